"""The worker on a target machine: RQ's forking Worker, one job at a time, with autoprof's rules.

- Only autoprof's job function runs (`ProfileJob._execute`): a job naming any other function,
  or whose data is not JSON, fails as "refused: ..." before anything of it is imported or run.
- A job's command must fully match one of the worker's --allow patterns, else it is refused;
  a system-wide one (`submit -a` or `--cpu-list`: every process on those CPUs is measured)
  needs the worker's --allow-system-wide; a job whose data would inflate past MAX_JOB_DATA is
  refused unread.
- Before a profile the machine must be quiet: 1-minute load average <= --max-load, polled for at
  most --load-wait seconds; the load seen goes into the job's meta and the profile's manifest.
- The profile runs in WORKDIR/<job id>, is aggregated, then uploaded in one transaction: a job
  killed at any point leaves no run in the store, and a retry on this machine resumes the runs.
- A workload runs as the worker's user: the worker (and its work horse, a fork) is not dumpable,
  so no workload reads its environment or memory, which hold the store's and the queue's
  passwords (`process.keep_private`).
- A worker that dies (kill -9) takes its work horse with it (PR_SET_PDEATHSIG: the horse gets
  SIGTERM and stops perf and the workload first), and stops its heartbeats; after HEARTBEAT x 3
  seconds any other worker's maintenance (every --maintenance seconds) or `autoprof jobs list`
  fails the job, or requeues it when it was submitted with --retry: RQ's own abandoned-job
  mechanism, with timings short enough for tests (RQ's defaults take 1.5 to 10 minutes). A new
  worker on the same host fails its dead predecessor's jobs at once (`fail_stale`).
- A job ends once: a job no longer started (failed as abandoned, stopped) is not stored and
  its late return is ignored; a job run again stores its run once (`upload` skips a part
  already stored).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import redis
from redis import Redis
from rq import Worker, get_current_job
from rq.exceptions import DeserializationError
from rq.job import Job, JobStatus
from rq.registry import ScheduledJobRegistry, StartedJobRegistry
from rq.serializers import JSONSerializer

from autoprof.catalog import machine
from autoprof.errors import AutoprofError
from autoprof.perf.process import Interrupted, die_with_parent, keep_private
from autoprof.pipeline import measure
from autoprof.queue import connection, live
from autoprof.queue.capped import CappedJob, TooLarge
from autoprof.queue.jobs import abandoned, clean_started
from autoprof.queue.model import JobResult
from autoprof.queue.spec import JOB_FUNCTION, JobSpec, Refused, allowed
from autoprof.run.planning import Planned
from autoprof.run.runner import stop_leftovers
from autoprof.util.owned import open_file, own_folder
from autoprof.util.urls import mask, scrub

PLAN_KEY = "autoprof:plan:{}"  # digest of the plan the first part of a split profile ran
PLAN_KEY_TTL_S = 30 * 86400
HEARTBEAT_MISSES = 3  # a started job is abandoned after this many heartbeats go missing
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
REDIS_BACKOFF_MAX_S = 30.0
WORKER_LOCK = ".worker.lock"  # in the work folder: one worker there at a time


@dataclass(frozen=True)
class Settings:
    """What the worker's owner decides (the submitter decides only the JobSpec)."""

    store: str  # store URL (kept out of every message by the store's masking)
    allow: list[re.Pattern]
    hostname: str
    workdir: Path
    max_load: float = 1.0
    load_wait_s: float = 300.0
    load_poll_s: float = 5.0
    events_dir: str | None = None
    keep: bool = False  # keep a job's out/ folder after a successful upload
    allow_system_wide: bool = False  # run `submit -a` jobs (they see every process's counts)


def wait_until_quiet(
    read_load: Callable[[], float],
    max_load: float,
    wait_s: float,
    poll_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[float, float]:
    """Poll the load average until it is <= max_load; returns (load seen, seconds waited).

    Raises AutoprofError when the machine stays busy for `wait_s` seconds: numbers taken on a
    busy machine would not be worth storing.
    """
    waited = 0.0
    while True:
        load = read_load()
        if load <= max_load:
            return load, waited
        if waited >= wait_s:
            raise AutoprofError(
                f"machine busy: load average {load:.2f} > --max-load {max_load:g} "
                f"after waiting {waited:g} s"
            )
        step = min(poll_s, wait_s - waited)
        sleep(step)
        waited += step


def riding_out(call: Callable[[], Any], say: Callable[[str], None], url: str) -> Any:
    """`call()`, called again while the queue's Redis does not answer (restarted, a network
    blip), after 1, 2, 4 ... REDIS_BACKOFF_MAX_S seconds, saying so once an attempt: RQ's
    worker quit with a traceback, and its job was abandoned."""
    attempt = 0
    while True:
        try:
            return call()
        except REDIS_DOWN as err:
            attempt += 1
            wait = min(2.0 ** (attempt - 1), REDIS_BACKOFF_MAX_S)
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            say(
                scrub(f"Redis {mask(url)} does not answer ({reason}): attempt {attempt}, again in "
                      f"{wait:g} s", url)
            )  # fmt: skip
            time.sleep(wait)


def _note(job: Job, **values: Any) -> None:
    """Values for `jobs show` (the job's phase, its load...): kept through a Redis restart."""
    job.meta.update(values)
    say = lambda text: print(f"autoprof: job {job.id}: {text}", flush=True)  # noqa: E731
    riding_out(job.save_meta, say, _url(job.connection))


def _url(conn: Redis) -> str:
    """The connection's server, as a URL to show (no password)."""
    kwargs = conn.connection_pool.connection_kwargs
    return f"redis://{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


def _plan_digest(plan: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()


def agree_on_plan(job: Job, spec: JobSpec, plan: dict[str, Any]) -> None:
    """The parts of a split profile must run one plan: the first part to start records its
    plan's digest, the others compare theirs before running anything (the store refuses a
    mismatched part too, but only after it ran)."""
    if spec.parts == 1:
        return
    key, digest = PLAN_KEY.format(spec.profile_id), _plan_digest(plan)
    job.connection.set(key, digest, nx=True, ex=PLAN_KEY_TTL_S)
    first = job.connection.get(key)
    if first is not None and (first.decode() if isinstance(first, bytes) else first) != digest:
        raise AutoprofError(
            f"part {spec.part} of {spec.parts}: this machine's event plan differs from the one "
            "another part ran; split a profile only over identical machines"
        )


def check_still_started(job: Job) -> None:
    """Refuse to go on with a job that is no longer started (another worker's maintenance
    failed it as abandoned, or it was stopped): its state is final, its profile never stored."""
    say = lambda text: print(f"autoprof: job {job.id}: {text}", flush=True)  # noqa: E731
    status = riding_out(lambda: job.get_status(refresh=True), say, _url(job.connection))
    if status != JobStatus.STARTED:
        raise AutoprofError(f"job {job.id} is {status.value if status else 'gone'}: not stored")


def run_job(spec_data: Any) -> dict[str, Any]:
    """The job function (`spec.JOB_FUNCTION`): profile, aggregate, upload; returns the run."""
    job = get_current_job()
    settings: Settings | None = getattr(job, "settings", None)
    if job is None or settings is None:
        raise Refused("autoprof jobs run only in `autoprof worker`")
    _note(job, host=settings.hostname, phase="checking", error=None)
    try:
        try:
            return _profile_job(job, settings, JobSpec.from_json(spec_data))
        except Interrupted as stop:  # SIGTERM: the worker died (PR_SET_PDEATHSIG) or stops it
            raise AutoprofError(
                f"interrupted by {stop.name} (its worker stopped or died): nothing stored"
            ) from None
    except AutoprofError as err:
        _note(job, error=str(err))
        raise


def check_spec(spec: JobSpec, settings: Settings) -> None:
    """The worker owner's rules for a spec: its command is --allow'ed, and it measures the
    whole machine only where the owner said so."""
    if not allowed(spec.command, settings.allow):
        raise Refused(f"command {spec.command_line!r} does not match this worker's --allow")
    if spec.profile_options().system_scope and not settings.allow_system_wide:
        raise Refused(
            "a system-wide job (-a or --cpu-list: it counts every process on those CPUs) needs "
            "a worker started with --allow-system-wide"
        )


def _profile_job(job: Job, settings: Settings, spec: JobSpec) -> dict[str, Any]:
    check_spec(spec, settings)
    out = settings.workdir / job.id

    def ready(planned: Planned) -> dict[str, Any]:
        """The plan agreed on, then a quiet machine: the job record the manifest keeps."""
        agree_on_plan(job, spec, planned.plan.to_json())
        _note(job, phase="waiting for a quiet machine")
        load, waited = wait_until_quiet(
            lambda: os.getloadavg()[0],
            settings.max_load,
            settings.load_wait_s,
            settings.load_poll_s,
        )
        _note(job, load1=round(load, 2), load_waited_s=round(waited, 1))
        return {"id": job.id, "queue": job.origin, "worker": job.worker_name, "load1": load}

    def warn(text: str) -> None:
        job.meta.setdefault("warnings", []).append(text)
        _note(job)

    def phase(name: str) -> None:
        if name == "aggregating":  # store only a job still ours: one failed meanwhile stays so
            check_still_started(job)
        _note(job, phase=name)

    hooks = measure.Hooks(warn=warn, phase=phase, ready=ready)
    with live.publishing(job.connection, job.id, out):
        done = measure.measure(
            spec.request(settings.events_dir),
            out,
            settings.store,
            hooks,
            hostname=settings.hostname,
        )
    result = JobResult.of(done, load1=job.meta.get("load1"))
    if done.failed_runs:  # stored, as a local profile keeps them; the job still says so
        raise AutoprofError(
            f"{done.outcome.failure()}; the results are stored as run {result.run_id}, "
            f"folder kept in {out}"
        )
    if not settings.keep:
        shutil.rmtree(out, ignore_errors=True)
    return result.to_json()


class NotJSON(DeserializationError):
    """Job data the JSON serializer cannot read (a pickled job, say): refused, never loaded.
    A DeserializationError still, which RQ's failure handling expects for such jobs."""

    def __str__(self) -> str:
        return "refused: job data is not JSON (autoprof workers take JSON jobs only)"


class ProfileJob(CappedJob):
    """An RQ job that runs only autoprof's job function; `settings` is set per worker."""

    settings: Settings | None = None

    def _deserialize_data(self) -> None:
        try:
            super()._deserialize_data()
        except TooLarge:
            raise
        except DeserializationError:
            raise NotJSON() from None

    def _execute(self) -> Any:
        if self.func_name != JOB_FUNCTION:
            raise Refused(f"{self.func_name} is not autoprof's job function {JOB_FUNCTION}")
        return super()._execute()


class ProfileWorker(Worker):
    """RQ's forking worker whose started jobs expire HEARTBEAT_MISSES heartbeats after the last
    one (RQ adds a fixed minute), so a dead worker's job is failed or retried in seconds, and
    whose stopped jobs leave no perf running (RQ kills the job's process group; perf has its
    own)."""

    def __init__(self, *args: Any, workdir: Path, redis_text: str, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.workdir = workdir
        self.worker_pid = os.getpid()
        self.redis_text = redis_text
        self.push_exc_handler(abandoned)

    def _ride_out(self, call: Callable[[], Any]) -> Any:
        say = lambda text: self.log.error("Worker %s: %s", self.name, text)  # noqa: E731
        return riding_out(call, say, self.redis_text)

    # Redis gone for a while (restarted): the worker waits for it, one line an attempt, where
    # RQ quit with a traceback (its work horse, and the job, died with it)
    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        if pipeline is not None:  # queued in a pipeline: sent (and failing) with it
            return super().heartbeat(timeout, pipeline)
        return self._ride_out(lambda: super(ProfileWorker, self).heartbeat(timeout))

    def check_for_suspension(self, burst: bool) -> None:
        return self._ride_out(lambda: super(ProfileWorker, self).check_for_suspension(burst))

    def run_maintenance_tasks(self) -> None:
        self._ride_out(super().run_maintenance_tasks)
        for job_id in self._ride_out(lambda: enqueue_due(self.connection, self.queues)):
            self.log.info("Worker %s: job %s waited its turn: it runs again", self.name, job_id)

    def maintain_heartbeats(self, job: Job, execution: Any) -> None:
        """The running job's heartbeat; while Redis does not answer, one line, and the job
        goes on (its heartbeats resume with Redis; past HEARTBEAT_MISSES it is abandoned)."""
        try:
            super().maintain_heartbeats(job, execution)
        except REDIS_DOWN as err:
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            self.log.error(
                "Worker %s: %s",
                self.name,
                scrub(f"Redis {mask(self.redis_text)} does not answer ({reason}): job {job.id} "
                      "goes on; its heartbeat waits for Redis", self.redis_text),
            )  # fmt: skip

    def setup_work_horse_signals(self) -> None:
        """The horse (its own process group) gets SIGTERM when the worker dies, even by
        SIGKILL: the runner then stops perf and the workload, and the horse ends."""
        super().setup_work_horse_signals()
        die_with_parent(self.worker_pid)

    def handle_job_success(self, job: Job, *args: Any, **kwargs: Any) -> None:
        """A job that ended already (failed as abandoned, stopped) keeps that state."""
        if not self._still_ours(job):
            return
        super().handle_job_success(job, *args, **kwargs)

    def handle_job_failure(self, job: Job, *args: Any, **kwargs: Any) -> None:
        """Likewise: a job abandoned and queued again (--retry) is not failed by its late end."""
        if not self._still_ours(job):
            return
        super().handle_job_failure(job, *args, **kwargs)

    def _still_ours(self, job: Job) -> bool:
        """Whether `job` is still started by this worker (not abandoned and run elsewhere)."""
        status = self._ride_out(lambda: job.get_status(refresh=True))
        worker = self._ride_out(lambda: job.connection.hget(job.key, "worker_name"))
        worker = worker.decode() if isinstance(worker, bytes) else worker
        if status == JobStatus.STARTED and worker in (None, "", self.name):
            return True
        self.log.error("Worker %s: job %s ended before it returned", self.name, job.id)
        return False

    def kill_horse(self, *args: Any, **kwargs: Any) -> None:
        super().kill_horse(*args, **kwargs)
        stop_leftovers(self.workdir)

    def handle_exception(self, job: Job, *exc_info: Any) -> None:
        """A refused job or one that failed with an AutoprofError (unknown event, busy machine)
        is one log line; anything else is a bug and keeps RQ's traceback. (This worker has no
        exception handlers of its own to call: RQ's failure handling is separate.)"""
        error = exc_info[1]
        if not isinstance(error, AutoprofError | NotJSON | TooLarge):
            super().handle_exception(job, *exc_info)
            return
        self.log.error("Worker %s: job %s failed: %s", self.name, job.id, error)

    def get_heartbeat_ttl(self, job: Job, working_time: float = 0.0) -> int:
        interval = self.job_monitoring_interval
        if job.timeout and job.timeout > 0:
            interval = max(1, min(interval, int(job.timeout - working_time)))
        return interval + self.job_monitoring_interval * (HEARTBEAT_MISSES - 1)


def enqueue_due(conn: Redis, queues: list[Any]) -> list[str]:
    """The jobs of `queues` whose wait before running again (`submit --retry-wait`) is over,
    put back on their queue (RQ's scheduler does it in a process of its own, which would
    outlive a killed worker, holding its work folder's lock); each by one worker only (the
    one whose ZREM takes it off the schedule). Their ids."""
    due = []
    for queue in queues:
        registry = ScheduledJobRegistry(queue=queue)
        for job_id in registry.get_jobs_to_schedule():
            if not conn.zrem(registry.key, job_id):
                continue  # another worker took it
            job = queue.fetch_job(job_id)
            if job is not None:
                queue.enqueue_job(job)
                due.append(job_id)
    return due


def queue_names(hostname: str, extra: list[str]) -> list[str]:
    """host:NAME first, then cpu:ID, then the extra queues (RQ serves them in this order)."""
    names = [connection.host_queue(hostname), connection.cpu_queue(machine.cpu_id()), *extra]
    return list(dict.fromkeys(names))


def check_allow(patterns: list[re.Pattern]) -> list[re.Pattern]:
    """The --allow patterns, refused when there are none: a worker runs others' commands."""
    if not patterns:
        raise AutoprofError(
            "a worker runs commands others submit: give at least one --allow REGEX "
            "(--allow '.*' to run anything)"
        )
    return patterns


def _worker_alive(pid: int) -> bool:
    """Whether `pid` is a running autoprof worker other than this process."""
    if pid == os.getpid():
        return False  # the pid of a dead worker, reused by this one
    try:
        return b"autoprof" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def fail_stale(conn: Redis, queues: list[str], hostname: str) -> list[str]:
    """Jobs a dead worker of this host left started (its name is HOSTNAME.PID and that process
    is gone) are failed, or requeued when they have retries left, at once, by RQ's own
    abandoned-job handling, instead of after their heartbeats expire. Returns their ids."""
    stale = []
    for name in queues:
        registry = StartedJobRegistry(name, connection=conn, serializer=JSONSerializer)
        for raw in conn.zrange(registry.key, 0, -1):
            member = raw.decode() if isinstance(raw, bytes) else str(raw)
            job_id = registry.parse_job_id(member)
            job = ProfileJob.fetch_many([job_id], connection=conn, serializer=JSONSerializer)[0]
            host, _, pid = (job.worker_name or "").rpartition(".") if job else ("", "", "")
            if host == hostname and pid.isdigit() and not _worker_alive(int(pid)):
                conn.zadd(registry.key, {member: 1})  # expired long ago: cleanup takes it
                stale.append(job_id)
        clean_started(registry)
    return stale


def work(
    conn: Redis,
    redis_text: str,
    settings: Settings,
    extra_queues: list[str],
    *,
    heartbeat_s: int = 10,
    maintenance_s: int = 60,
    burst: bool = False,
) -> bool:
    """Serve jobs from `conn` (connected to `redis_text`) until stopped (SIGINT/SIGTERM: after
    the current job) or, with `burst`, until the queues are empty; returns whether any job ran."""
    check_allow(settings.allow)
    keep_private()  # the store's and the queue's passwords: no workload reads them here
    # perf's files, by name: a folder this user's alone, by its resolved name
    settings = replace(settings, workdir=own_folder(settings.workdir))
    with _only_worker(settings):
        return _work(conn, redis_text, settings, extra_queues, heartbeat_s, maintenance_s, burst)


@contextlib.contextmanager
def _only_worker(settings: Settings) -> Iterator[None]:
    """Hold the work folder's lock (the folder defaults to one per --hostname): a second worker
    there would take the first's running perf for a dead worker's leftover and kill it, and its
    job would store a repeat perf did not count whole (issue #38, point 10). The lock goes with
    the worker and its work horse, whichever ends last."""
    path = settings.workdir / WORKER_LOCK
    with open(open_file(path, os.O_WRONLY | os.O_CREAT), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AutoprofError(
                f"another worker runs in {settings.workdir} (--hostname {settings.hostname}): "
                "one worker per work folder (give this one another --hostname or --workdir)"
            ) from None
        yield


def _work(
    conn: Redis,
    redis_text: str,
    settings: Settings,
    extra_queues: list[str],
    heartbeat_s: int,
    maintenance_s: int,
    burst: bool,
) -> bool:
    stop_leftovers(settings.workdir)  # a previous worker here was killed mid-job
    queues = queue_names(settings.hostname, extra_queues)
    with connection.errors(redis_text):
        fail_stale(conn, queues, settings.hostname)
    job_class = type("ProfileJob", (ProfileJob,), {"settings": settings})
    worker = ProfileWorker(
        queues,
        name=f"{settings.hostname}.{os.getpid()}",
        connection=conn,
        serializer=JSONSerializer,
        job_class=job_class,
        job_monitoring_interval=heartbeat_s,
        maintenance_interval=maintenance_s,
        workdir=settings.workdir,
        redis_text=redis_text,
        # RQ blocks for worker_ttl - 15 s waiting for a job; maintenance runs between waits
        worker_ttl=maintenance_s + 15,
    )
    with connection.errors(redis_text):
        return worker.work(burst=burst, logging_level="INFO")
