"""New measurements on RQ (when $AUTOPROF_REDIS is set): the page's request becomes a queue
job (`queue.jobs.submit`) for this machine's worker (`autoprof worker` listening on
host:HOSTNAME), which checks --allow again and runs `pipeline.measure` as the CLI does.

The worker publishes the job's intervals to a Redis stream (`queue.live`), which the page's
live view reads as it reads a local job's perf output. RQ jobs carry a profile's options only:
no environment variables, no record, no PID.
"""

from __future__ import annotations

import shlex
import socket

from autoprof.errors import AutoprofError
from autoprof.queue.live import Follow
from autoprof.queue.model import DONE, FAILED, QUEUED, RUNNING, STOPPED, JobResult
from autoprof.web.form import JobRequest
from autoprof.web.job import Job

STATES = {"finished": DONE, "failed": FAILED, "stopped": STOPPED, "canceled": STOPPED}


def _stamp(value) -> str | None:
    return value.isoformat(timespec="seconds") if value else None


class RqQueue:
    """Submit to and read from RQ: a `job.Backend`, as `localqueue.LocalQueue` is."""

    def __init__(self, redis_url: str, hostname: str | None = None):
        from autoprof.queue import connection

        self.conn = connection.connect(redis_url)
        self.queue_name = connection.host_queue(hostname or socket.gethostname())
        self.requests: dict[str, JobRequest] = {}

    def submit(self, request: JobRequest) -> Job:
        from autoprof.queue import jobs
        from autoprof.queue.spec import JobSpec

        if request.tool == "record" or request.env or request.pid is not None:
            raise AutoprofError(
                "queue jobs (AUTOPROF_REDIS) run profiles only: no record, environment or PID"
            )
        spec = JobSpec.of(request.measurement())
        (job,) = jobs.submit(self.conn, self.queue_name, jobs.split_specs(spec, 1))
        self.requests[job.id] = request
        found = self.get(job.id)
        assert found is not None  # just submitted
        return found

    def get(self, job_id: str) -> Job | None:
        from autoprof.queue import jobs

        try:
            found = jobs.info(jobs.find_job(self.conn, job_id))
        except AutoprofError:
            return None
        return self._adapt(found)

    def list(self) -> list[Job]:
        from autoprof.queue import jobs

        return [self._adapt(i) for i in reversed(jobs.list_jobs(self.conn))]

    def stop(self, job_id: str) -> Job:
        from autoprof.queue import jobs

        jobs.cancel(self.conn, job_id)
        job = self.get(job_id)
        if job is None:
            raise AutoprofError(f"no job {job_id}")
        return job

    def live(self, job: Job) -> Follow:
        """The intervals the job's worker publishes."""
        return Follow(self.conn, job.id)

    def close(self) -> None:
        """Queue jobs belong to their workers: nothing to stop here."""

    def _adapt(self, found) -> Job:
        request = self.requests.get(found.id)
        if request is None:  # submitted by another server or by `autoprof submit`
            request = JobRequest("profile", shlex.split(found.command_line))
        state = STATES.get(found.status, RUNNING if found.status == "started" else QUEUED)
        result = found.result
        if result is None and state in (FAILED, STOPPED):
            result = JobResult(state, error=found.error)
        return Job(
            id=found.id,
            request=request,
            folder=None,
            state=state,
            created=_stamp(found.enqueued),
            started=_stamp(found.started),
            ended=_stamp(found.ended),
            phase=found.phase,
            result=result,
        )
