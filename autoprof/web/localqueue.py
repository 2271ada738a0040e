"""New measurements run here: a queue that runs one job at a time, and the live view of a
running job.

Every job runs in a child process of its own (`python -m autoprof.web.task FOLDER`, a process
group of its own), so Stop is a signal: SIGINT makes the runner stop perf as Ctrl-C does, the
child writes what it kept, and anything a dead child left is killed by `stop_leftovers`. The
server never blocks on a job: the page polls or streams its state.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import threading
import uuid
from collections import deque
from dataclasses import asdict
from pathlib import Path

from autoprof.errors import AutoprofError
from autoprof.queue.model import FAILED, QUEUED, RUNNING, STOPPED, JobResult, settle
from autoprof.results.live import Tail
from autoprof.run.runner import stop_leftovers
from autoprof.util import children, owned
from autoprof.util.clock import now_iso
from autoprof.util.records import write_json
from autoprof.web.form import JobRequest
from autoprof.web.job import LOG, REQUEST, RESULT, Job

STOP_GRACE_S = 15
# autoprof's settings that carry a password: never in a job process's environment
SECRET_SETTINGS = frozenset({"AUTOPROF_STORE", "AUTOPROF_REDIS"})


class LocalQueue:
    """Jobs run here, one at a time, in order, each in a child process."""

    def __init__(self, root: Path, store_text: str | None):
        self.root = root.resolve()  # its jobs run in their folders
        self.store_text = store_text
        self.jobs: dict[str, Job] = {}
        self.waiting: deque[str] = deque()
        self.cond = threading.Condition()
        self.closed = False
        self._load_past()
        self.thread = threading.Thread(target=self._work, name="autoprof-jobs", daemon=True)
        self.thread.start()

    def _load_past(self) -> None:
        """Jobs of earlier runs of the server (their folders under `root`), as they ended; one
        that never wrote its result was cut short by the server's end."""
        for path in sorted(self.root.glob(f"*/{REQUEST}")):
            try:
                request = JobRequest(**json.loads(path.read_text()))
                job = Job(path.parent.name, request, path.parent)
            except (OSError, ValueError, TypeError):
                continue
            job.created = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).isoformat(
                timespec="seconds"
            )
            self._finish(job, default="the server stopped before the job ended")
            self.jobs[job.id] = job

    def submit(self, request: JobRequest) -> Job:
        job_id = uuid.uuid4().hex[:12]
        folder = self.root / job_id
        folder.mkdir(owned.FOLDER_MODE, parents=True)  # in the data folder, checked by serve
        write_json(folder / REQUEST, asdict(request))
        job = Job(job_id, request, folder)
        with self.cond:
            self.jobs[job_id] = job
            self.waiting.append(job_id)
            self.cond.notify()
        return job

    def get(self, job_id: str) -> Job | None:
        return self.jobs.get(job_id)

    def list(self) -> list[Job]:
        return sorted(self.jobs.values(), key=lambda j: j.created or "", reverse=True)

    def stop(self, job_id: str) -> Job:
        """A queued job is dropped; a running one gets SIGINT (perf stops as on Ctrl-C), then
        SIGKILL after a grace period; either way nothing of it keeps running."""
        job = self.jobs.get(job_id)
        if job is None:
            raise AutoprofError(f"no job {job_id}")
        with self.cond:
            if job.state == QUEUED:
                self.waiting.remove(job_id)
                job.state, job.ended = STOPPED, now_iso("seconds")
                job.result = JobResult(STOPPED, error="stopped before it ran")
                return job
            proc = job.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            stop_leftovers(self.root / job_id)
        return job

    def close(self) -> None:
        """Stop the running job and drop the queued ones (the server is shutting down)."""
        with self.cond:
            self.closed = True
            running = [j for j in self.jobs.values() if not j.finished]
            self.cond.notify()
        for job in running:
            self.stop(job.id)

    def _work(self) -> None:
        while True:
            with self.cond:
                while not self.waiting and not self.closed:
                    self.cond.wait()
                if self.closed:
                    return
                job = self.jobs[self.waiting.popleft()]
                job.state, job.started = RUNNING, now_iso("seconds")
                folder = self.root / job.id
                job.proc = self._start(folder)
            job.proc.wait()
            stop_leftovers(folder)  # a child killed hard may have left perf behind
            self._finish(job)

    def live(self, job: Job) -> Tail:
        """The intervals perf writes in the job's folder."""
        return Tail(self.root / job.id / "out")

    def _start(self, folder: Path) -> subprocess.Popen:
        """The job's process. The store's URL (its password) reaches it through its standard
        input, never its environment nor its arguments, which a workload of the same user reads
        in /proc/PID/environ and cmdline; the process then closes its memory (task.main)."""
        env = {k: v for k, v in os.environ.items() if k not in SECRET_SETTINGS}
        log_fd = owned.open_file(folder / LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        with open(log_fd, "ab") as log:
            proc = subprocess.Popen(
                children.python_argv("autoprof.web.task", str(folder)),
                cwd=folder,  # the workload's too; never the server's, where anyone may write
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        assert proc.stdin is not None  # a pipe
        with contextlib.suppress(BrokenPipeError), proc.stdin:
            proc.stdin.write(f"{self.store_text or ''}\n".encode())
        return proc

    def _finish(self, job: Job, default: str | None = None) -> None:
        try:
            result = JobResult.from_json(json.loads((self.root / job.id / RESULT).read_text()))
        except (OSError, ValueError):
            why = default or f"the job died (exit {job.proc.returncode if job.proc else '?'})"
            result = JobResult(FAILED, error=why)
        with self.cond:
            job.state = settle(job.state, result.state)
            job.result = job.result or result
            job.ended = job.ended or now_iso("seconds")
            job.proc = None
