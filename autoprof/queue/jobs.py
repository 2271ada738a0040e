"""The client side: submit profiles, list and show jobs, cancel them.

Every job autoprof submits is also indexed in the sorted set `INDEX` (score: submit time), so
`jobs list` finds them whatever queue they went to, without reading other applications' jobs.
Reading goes through RQ's own registries: listing first runs the started-job registries'
cleanup, which fails (or retries, with --retry) a job whose worker died, even when no worker
listens on its queue any more.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from dataclasses import dataclass, field, replace

import redis
from rq import Queue, Retry
from rq.command import send_stop_job_command
from rq.exceptions import (
    AbandonedJobError,
    DeserializationError,
    InvalidJobOperation,
    NoSuchJobError,
)
from rq.job import Job, JobStatus
from rq.registry import StartedJobRegistry
from rq.results import Result
from rq.serializers import JSONSerializer

from autoprof.errors import AutoprofError
from autoprof.queue.capped import CappedJob
from autoprof.queue.model import FAILED, STOPPED, JobResult
from autoprof.queue.spec import JOB_FUNCTION, JobSpec
from autoprof.util.clock import aware_utc

INDEX = "autoprof:jobs"
MIN_PREFIX = 4
DEFAULT_JOB_TIMEOUT_S = 24 * 3600  # RQ's default (180 s) is far too short for a profile
RESULT_TTL_S = 7 * 86400  # how long finished jobs stay listed
RETRY_WAIT_S = 30  # before a failed job runs again (--retry); twice as long each next time
RETRY_WAIT_MAX_S = 3600
FAILURE_TTL_S = 30 * 86400
ACTIVE = {JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED, JobStatus.STARTED}
ENDED = {
    s.value for s in (JobStatus.FINISHED, JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED)
}


@dataclass
class JobInfo:
    """One line of `jobs list`; everything `jobs show` prints."""

    id: str
    status: str
    queue: str
    command_line: str
    profile_id: str | None
    part: int
    parts: int
    worker: str | None = None
    host: str | None = None  # the worker's --hostname
    enqueued: dt.datetime | None = None
    started: dt.datetime | None = None
    ended: dt.datetime | None = None
    phase: str | None = None  # waiting for a quiet machine, profiling, uploading, ...
    load: float | None = None  # 1-minute load average seen before the profile started
    error: str | None = None
    result: JobResult | None = None  # once it ended: what its worker returned, or why it failed
    warnings: list[str] = field(default_factory=list)  # the worker's checks (NMI watchdog, ...)
    retries_left: int | None = None

    @property
    def seconds(self) -> float | None:
        """How long it ran (so far, while it runs); None when it never started."""
        if self.started is None:
            return None
        end = self.ended or dt.datetime.now(dt.UTC)
        return (end - self.started).total_seconds()


def retry_waits(retries: int, first_s: int = RETRY_WAIT_S) -> list[int]:
    """Seconds a failed job waits before each run again: `first_s`, twice that, ... (at most
    RETRY_WAIT_MAX_S). Run again at once, `--retry 3` burnt its three tries in three seconds
    on a store that was restarting. Each is asked of RQ a second longer: RQ keeps a schedule
    to the whole second, rounded down (registry.ScheduledJobRegistry.schedule), so a wait of
    S ended up to a second early (`--retry-wait 1` ran again after 0.4 s)."""
    return [min(first_s * 2**k, RETRY_WAIT_MAX_S) + 1 for k in range(retries)]


def split_specs(spec: JobSpec, split: int) -> list[JobSpec]:
    """`spec` as `split` parts sharing one new profile id (the store's run id)."""
    profile_id = str(uuid.uuid4())
    return [replace(spec, profile_id=profile_id, part=k, parts=split) for k in range(1, split + 1)]


def submit(
    conn: redis.Redis,
    queue_name: str,
    specs: list[JobSpec],
    *,
    job_timeout: int = DEFAULT_JOB_TIMEOUT_S,
    retry: int = 0,
    retry_wait_s: int = RETRY_WAIT_S,
) -> list[Job]:
    """Enqueue one job per spec on `queue_name`, atomically, and index them. A spec a worker
    would refuse (its options out of range: `JobSpec.from_json`) is refused here, at once."""
    for spec in specs:
        JobSpec.from_json(spec.to_json())
    queue = Queue(queue_name, connection=conn, serializer=JSONSerializer)
    datas = [
        Queue.prepare_data(
            JOB_FUNCTION,
            args=(spec.to_json(),),
            timeout=job_timeout,
            result_ttl=RESULT_TTL_S,
            failure_ttl=FAILURE_TTL_S,
            description=f"autoprof profile -- {spec.command_line}",
            retry=Retry(max=retry, interval=retry_waits(retry, retry_wait_s)) if retry else None,
        )
        for spec in specs
    ]
    with conn.pipeline() as pipe:
        jobs = queue.enqueue_many(datas, pipeline=pipe)
        pipe.zadd(INDEX, {job.id: time.time() for job in jobs})
        pipe.execute()
    return jobs


def _spec_fields(job: Job) -> tuple[str, str | None, int, int]:
    """(command line, profile id, part, parts) of a job, whatever its arguments hold."""
    try:
        spec = JobSpec.from_json(job.args[0])
    except (AutoprofError, DeserializationError, IndexError, TypeError, ValueError):
        return (job.description or "?", None, 1, 1)
    return spec.command_line, spec.profile_id, spec.part, spec.parts


def _error(job: Job, status: str, latest: Result | None) -> str | None:
    if job.meta.get("error"):
        return job.meta["error"]
    if status == JobStatus.STOPPED:
        return "stopped (jobs cancel)"
    if status == JobStatus.CANCELED:
        return "canceled before it ran"
    if latest is not None and latest.type == Result.Type.FAILED and latest.exc_string:
        lines = [line.strip() for line in latest.exc_string.strip().splitlines() if line.strip()]
        last = lines[-1] if lines else ""
        return last[last.index("refused: ") :] if "refused: " in last else last or None
    return None


def _result_time(status: JobStatus | None, latest: Result | None) -> dt.datetime | None:
    """When an ended job's last result was written: RQ sets no ended_at on a stopped job."""
    if status in ACTIVE or latest is None:
        return None
    return aware_utc(latest.created_at)


def _job_result(status: JobStatus | None, latest: Result | None, error: str | None):
    """The typed result of an ended job; None while it is active."""
    if status in ACTIVE or status is None:
        return None
    if status == JobStatus.FINISHED and latest is not None:
        return JobResult.from_json(latest.return_value)
    return JobResult(FAILED if status == JobStatus.FAILED else STOPPED, error=error)


def info(job: Job) -> JobInfo:
    status = job.get_status(refresh=False)
    latest = job.latest_result()
    command_line, profile_id, part, parts = _spec_fields(job)
    error = _error(job, status, latest)
    return JobInfo(
        id=job.id,
        status=str(status.value if status else "?"),
        queue=job.origin,
        command_line=command_line,
        profile_id=profile_id,
        part=part,
        parts=parts,
        worker=job.worker_name,
        host=job.meta.get("host"),
        enqueued=aware_utc(job.enqueued_at),
        started=aware_utc(job.started_at),
        ended=aware_utc(job.ended_at) or _result_time(status, latest),
        phase=job.meta.get("phase"),
        load=job.meta.get("load1"),
        error=error,
        result=_job_result(status, latest, error),
        warnings=list(job.meta.get("warnings") or []),
        retries_left=job.retries_left,
    )


def _index_ids(conn: redis.Redis) -> list[str]:
    """The job ids in the index, oldest first (the connection returns bytes)."""
    return [i.decode() if isinstance(i, bytes) else str(i) for i in conn.zrange(INDEX, 0, -1)]


def _indexed(conn: redis.Redis) -> list[Job]:
    """The indexed jobs that still exist, oldest first; expired ones leave the index."""
    ids = _index_ids(conn)
    found = CappedJob.fetch_many(ids, connection=conn, serializer=JSONSerializer) if ids else []
    gone = [i for i, job in zip(ids, found, strict=True) if job is None]
    if gone:
        conn.zrem(INDEX, *gone)
    return [job for job in found if job is not None]


def _clean_started(conn: redis.Redis, jobs: list[Job]) -> None:
    """RQ's abandoned-job handling for the queues of unfinished jobs: a job whose worker stopped
    sending heartbeats is moved to failed, or requeued when it has retries left."""
    for name in sorted({job.origin for job in jobs if job.get_status(refresh=False) in ACTIVE}):
        clean_started(StartedJobRegistry(name, connection=conn, serializer=JSONSerializer))


def clean_started(registry: StartedJobRegistry) -> None:
    """RQ's cleanup of a started-job registry, each job it abandons told why (`abandoned`)."""
    registry.cleanup(exception_handlers=[abandoned])


def abandoned(job: Job, kind: type, error: BaseException, _traceback: object) -> bool:
    """RQ's exception handler: a job whose worker's heartbeats stopped says why in autoprof's
    words (RQ records only "AbandonedJobError"), and whether it runs again (--retry). Any other
    failure goes on to the next handler."""
    if not issubclass(kind, AbandonedJobError):
        return True
    again = f"; it runs again ({job.retries_left} retries left)" if job.retries_left else ""
    job.meta["error"] = (
        f"abandoned: worker {job.worker_name or '?'} sent no heartbeat in time (it died, or "
        f"lost the queue's Redis); nothing stored{again}"
    )
    job.save_meta()
    return True


def list_jobs(conn: redis.Redis) -> list[JobInfo]:
    jobs = _indexed(conn)
    _clean_started(conn, jobs)
    for job in jobs:
        job.refresh()
    return [info(job) for job in jobs]


def find_job(conn: redis.Redis, ident: str) -> Job:
    """The indexed job named by `ident`: its id or an unambiguous prefix (>= 4 characters)."""
    ident = ident.strip()
    if len(ident) < MIN_PREFIX:
        raise AutoprofError(f"job id {ident!r} is too short: give at least {MIN_PREFIX} characters")
    ids = _index_ids(conn)
    matches = [i for i in ids if i.startswith(ident)]
    if len(matches) > 1:
        raise AutoprofError(f"job id {ident} is ambiguous: {', '.join(matches[:10])}")
    try:
        if not matches:
            raise NoSuchJobError
        job = CappedJob.fetch(matches[0], connection=conn, serializer=JSONSerializer)
    except NoSuchJobError:
        raise AutoprofError(f"no job {ident} (see `autoprof jobs list`)") from None
    _clean_started(conn, [job])
    job.refresh()
    return job


def cancel(conn: redis.Redis, ident: str) -> tuple[str, str]:
    """Cancel a queued job, or stop a started one; returns (job id, what was done)."""
    job = find_job(conn, ident)
    status = job.get_status()
    if status == JobStatus.STARTED:
        try:
            send_stop_job_command(conn, job.id, serializer=JSONSerializer)
        except InvalidJobOperation as err:
            raise AutoprofError(f"job {job.id}: cannot stop it: {err}") from None
        return job.id, "stop sent to its worker"
    if status not in ACTIVE:
        raise AutoprofError(f"job {job.id} has already ended ({status.value})")
    job.cancel()
    return job.id, "canceled"
