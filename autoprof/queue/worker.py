"""The worker on a target machine: RQ's forking Worker, one job at a time, with autoprof's rules.

- Only autoprof's job function runs (`ProfileJob._execute`): a job naming any other function,
  or whose data is not JSON, fails as "refused: ..." before anything of it is imported or run.
- A job's command must fully match one of the worker's --allow patterns, else it is refused;
  a system-wide one (`submit -a`: every process of the machine is measured) needs the worker's
  --allow-system-wide; a job whose data would inflate past MAX_JOB_DATA is refused unread.
- Before a profile the machine must be quiet: 1-minute load average <= --max-load, polled for at
  most --load-wait seconds; the load seen goes into the job's meta and the profile's manifest.
- The profile runs in WORKDIR/<job id>, is aggregated, then uploaded in one transaction: a job
  killed at any point leaves no run in the store, and a retry on this machine resumes the runs.
- A worker that dies (kill -9) stops its heartbeats; after HEARTBEAT x 3 seconds any other
  worker's maintenance (every --maintenance seconds) or `autoprof jobs list` fails the job, or
  requeues it when it was submitted with --retry: RQ's own abandoned-job mechanism, with
  timings short enough for tests (RQ's defaults take 1.5 to 10 minutes).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from redis import Redis
from rq import Worker, get_current_job
from rq.exceptions import DeserializationError
from rq.job import Job
from rq.serializers import JSONSerializer

from autoprof.catalog import host
from autoprof.errors import AutoprofError
from autoprof.queue import connection
from autoprof.queue.capped import CappedJob, TooLarge
from autoprof.queue.spec import JOB_FUNCTION, JobSpec, Refused, allowed
from autoprof.results import aggregate
from autoprof.run import profile as library
from autoprof.run.runner import stop_leftovers
from autoprof.store import engine, upload

PLAN_KEY = "autoprof:plan:{}"  # digest of the plan the first part of a split profile ran
PLAN_KEY_TTL_S = 30 * 86400
HEARTBEAT_MISSES = 3  # a started job is abandoned after this many heartbeats go missing


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


def _note(job: Job, **values: Any) -> None:
    job.meta.update(values)
    job.save_meta()


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


def run_job(spec_data: Any) -> dict[str, Any]:
    """The job function (`spec.JOB_FUNCTION`): profile, aggregate, upload; returns the run."""
    job = get_current_job()
    settings: Settings | None = getattr(job, "settings", None)
    if job is None or settings is None:
        raise Refused("autoprof jobs run only in `autoprof worker`")
    _note(job, host=settings.hostname, phase="checking", error=None)
    try:
        return _profile_job(job, settings, JobSpec.from_json(spec_data))
    except AutoprofError as err:
        _note(job, error=str(err))
        raise


def check_spec(spec: JobSpec, settings: Settings) -> None:
    """The worker owner's rules for a spec: its command is --allow'ed, and it measures the
    whole machine only where the owner said so."""
    if not allowed(spec.command, settings.allow):
        raise Refused(f"command {spec.command_line!r} does not match this worker's --allow")
    if spec.profile_options().system_wide and not settings.allow_system_wide:
        raise Refused("a system-wide job (-a) needs a worker started with --allow-system-wide")


def _profile_job(job: Job, settings: Settings, spec: JobSpec) -> dict[str, Any]:
    check_spec(spec, settings)
    options = spec.profile_options()
    catalog = host.build_catalog(events_dir=settings.events_dir, **spec.selection)
    catalog, plan = library.plan_for(catalog, spec.events, options.anchor)
    library.check_machine(catalog, options, spec.command)
    agree_on_plan(job, spec, plan.to_json())
    _note(job, phase="waiting for a quiet machine")
    load, waited = wait_until_quiet(
        lambda: os.getloadavg()[0], settings.max_load, settings.load_wait_s, settings.load_poll_s
    )
    _note(job, phase="profiling", load1=round(load, 2), load_waited_s=round(waited, 1))
    out = settings.workdir / job.id
    facts = replace(host.read_facts(catalog), hostname=settings.hostname)
    record = {"id": job.id, "queue": job.origin, "worker": job.worker_name, "load1": load}
    outcome = library.profile(
        out,
        spec.command,
        catalog,
        plan,
        options,
        facts=facts,
        profile_id=spec.profile_id,
        job=record,
    )
    _note(job, phase="aggregating")
    aggregate.aggregate_to(out)
    _note(job, phase="uploading")
    store = engine.open_store(settings.store)
    try:
        done = upload.upload(store, out, spec.tags)
    finally:
        store.engine.dispose()
    _note(job, phase="done")
    failed_runs = [f"{r}.{k}" for r, k in outcome.failed]
    result = {
        "run": done.uuid,
        "part": done.part,
        "parts": done.parts,
        "rows": done.rows,
        "complete": done.complete,
        "failed_runs": failed_runs,
        "load1": load,
    }
    if outcome.failed:  # stored, as a local profile keeps them; the job still says so
        listed = ", ".join(failed_runs[:10])
        raise AutoprofError(
            f"{len(outcome.failed)} runs failed (run.repeat {listed}); "
            f"the results are stored as run {done.uuid}, folder kept in {out}"
        )
    if not settings.keep:
        shutil.rmtree(out, ignore_errors=True)
    return result


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

    def __init__(self, *args: Any, workdir: Path, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.workdir = workdir

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


def queue_names(hostname: str, extra: list[str]) -> list[str]:
    """host:NAME first, then cpu:ID, then the extra queues (RQ serves them in this order)."""
    names = [connection.host_queue(hostname), connection.cpu_queue(host.cpu_id()), *extra]
    return list(dict.fromkeys(names))


def check_allow(patterns: list[re.Pattern]) -> list[re.Pattern]:
    """The --allow patterns, refused when there are none: a worker runs others' commands."""
    if not patterns:
        raise AutoprofError(
            "a worker runs commands others submit: give at least one --allow REGEX "
            "(--allow '.*' to run anything)"
        )
    return patterns


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
    settings.workdir.mkdir(parents=True, exist_ok=True)
    stop_leftovers(settings.workdir)  # a previous worker here was killed mid-job
    job_class = type("ProfileJob", (ProfileJob,), {"settings": settings})
    worker = ProfileWorker(
        queue_names(settings.hostname, extra_queues),
        name=f"{settings.hostname}.{os.getpid()}",
        connection=conn,
        serializer=JSONSerializer,
        job_class=job_class,
        job_monitoring_interval=heartbeat_s,
        maintenance_interval=maintenance_s,
        workdir=settings.workdir,
        # RQ blocks for worker_ttl - 15 s waiting for a job; maintenance runs between waits
        worker_ttl=maintenance_s + 15,
    )
    with connection.errors(redis_text):
        return worker.work(burst=burst, logging_level="INFO")
