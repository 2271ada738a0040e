"""New measurements on RQ (when $AUTOPROF_REDIS is set): the page's request becomes a queue
job (`queue.jobs.submit`) for this machine's worker (`autoprof worker` listening on
host:HOSTNAME), which checks --allow again, profiles, aggregates and uploads.

The worker runs elsewhere (or in another process), so its jobs have no live intervals here: the
page shows the job's state and phase, and the stored run once it is done. RQ jobs carry a
profile's options only: no environment variables, no record, no PID.
"""

from __future__ import annotations

import shlex
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoprof.errors import AutoprofError
from autoprof.web.jobs import JobRequest

FINISHED = {"finished": "done", "failed": "failed", "stopped": "stopped", "canceled": "stopped"}


@dataclass
class RqJob:
    """A queue job seen through the same fields as a local `jobs.Job`."""

    id: str
    request: JobRequest
    state: str
    created: str | None = None
    started: str | None = None
    ended: str | None = None
    error: str | None = None
    run_id: str | None = None
    phase: str | None = None
    folder: Path = field(default_factory=lambda: Path("/nonexistent"))

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed", "stopped")

    def to_dict(self) -> dict[str, Any]:
        keys = ("id", "state", "created", "started", "ended", "error", "run_id", "phase")
        data = {k: getattr(self, k) for k in keys}
        data["request"] = vars(self.request)
        data["command_line"] = self.request.command_line
        return data

    def tails(self) -> dict[str, str]:
        return {"stdout": "", "stderr": "", "log": f"RQ job, phase: {self.phase or '-'}"}


def _stamp(value) -> str | None:
    return value.isoformat(timespec="seconds") if value else None


class RqQueue:
    """Submit to and read from RQ; the same methods as `jobs.LocalQueue`."""

    def __init__(self, redis_url: str, hostname: str | None = None):
        from autoprof.queue import connection

        self.conn = connection.connect(redis_url)
        self.queue_name = connection.host_queue(hostname or socket.gethostname())
        self.requests: dict[str, JobRequest] = {}

    def submit(self, request: JobRequest) -> RqJob:
        from autoprof.queue import jobs
        from autoprof.queue.spec import JobSpec

        if request.tool == "record" or request.env or request.pid is not None:
            raise AutoprofError(
                "queue jobs (AUTOPROF_REDIS) run profiles only: no record, environment or PID"
            )
        options = {"interval_ms": request.interval_ms, "repeat": request.repeat}
        spec = JobSpec(request.command, request.events, options, tags=request.tags)
        (job,) = jobs.submit(self.conn, self.queue_name, jobs.split_specs(spec, 1))
        self.requests[job.id] = request
        found = self.get(job.id)
        assert found is not None  # just submitted
        return found

    def get(self, job_id: str) -> RqJob | None:
        from autoprof.queue import jobs

        try:
            found = jobs.info(jobs.find_job(self.conn, job_id))
        except AutoprofError:
            return None
        return self._adapt(found)

    def list(self) -> list[RqJob]:
        from autoprof.queue import jobs

        return [self._adapt(i) for i in reversed(jobs.list_jobs(self.conn))]

    def stop(self, job_id: str) -> RqJob:
        from autoprof.queue import jobs

        jobs.cancel(self.conn, job_id)
        job = self.get(job_id)
        if job is None:
            raise AutoprofError(f"no job {job_id}")
        return job

    def close(self) -> None:
        """Queue jobs belong to their workers: nothing to stop here."""

    def _adapt(self, found) -> RqJob:
        request = self.requests.get(found.id)
        if request is None:  # submitted by another server or by `autoprof submit`
            request = JobRequest("profile", shlex.split(found.command_line))
        return RqJob(
            id=found.id,
            request=request,
            state=FINISHED.get(found.status, "running" if found.status == "started" else "queued"),
            created=_stamp(found.enqueued),
            started=_stamp(found.started),
            ended=_stamp(found.ended),
            error=found.error,
            run_id=found.result.get("run"),
            phase=found.phase,
        )
