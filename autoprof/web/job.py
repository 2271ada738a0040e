"""A job as the page shows it (`Job`), whichever backend runs it (`Backend`: here,
`localqueue.LocalQueue`, or on RQ, `rqjobs.RqQueue`), and what anyone may read of it.

A local job's folder: `request.json` (what was asked), `out/` (the profile or record folder),
`task.log` (the child's messages), `result.json` (state, error, stored run id).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from autoprof.queue.model import FINISHED, QUEUED, JobResult
from autoprof.run import outdir, spool
from autoprof.util.clock import now_iso
from autoprof.web.form import JobRequest

TAIL_BYTES = 4096
REQUEST = "request.json"
RESULT = "result.json"
LOG = "task.log"


# the folders of an absolute path (`/tmp/x/data/ab12/out/stderr.txt` keeps `stderr.txt`)
_FOLDERS = re.compile(r"(?<![\w.~-])/(?:[^\s/'\"(),;]+/)+(?=[^\s/'\"(),;])")


def public_text(text: str | None, folder: Path | None = None) -> str | None:
    """A job's message as anyone may read it: a file of the job's `folder` by its name there
    (`out/stderr.txt`), any other absolute path by its last part (`.../x.json`). The folders
    tell the server's layout (users' homes, where jobs and data live) to whoever reaches the
    page; with the token, messages are shown whole."""
    if not text:
        return text
    if folder is not None:
        text = text.replace(f"{folder}/", "")
    return _FOLDERS.sub(".../", text)


@dataclass
class Job:
    """A job as the page shows it, whichever backend runs it (`Backend`)."""

    id: str
    request: JobRequest
    folder: Path | None  # the local job's folder; None for a queue job (its worker has it)
    state: str = QUEUED  # queued, running, then once: done, failed or stopped
    created: str | None = field(default_factory=lambda: now_iso("seconds"))
    started: str | None = None
    ended: str | None = None
    phase: str | None = None  # what a queue job's worker is doing
    result: JobResult | None = None  # once finished
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    @property
    def error(self) -> str | None:
        return self.result.error if self.result else None

    @property
    def run_id(self) -> str | None:
        """The stored run (stat/profile) once done."""
        return self.result.run_id if self.result else None

    def to_dict(self, private: bool = False) -> dict[str, Any]:
        """The job as pages and the API show it. Without `private` (the token), as anyone may
        read it: its environment's values left out (null), and the folders of the server's
        paths in its messages (`public_text`)."""
        keys = ("id", "state", "created", "started", "ended", "phase", "error", "run_id")
        data = {k: getattr(self, k) for k in keys}
        data["request"] = asdict(self.request)
        data["command_line"] = self.request.command_line
        data["result"] = self.result.to_json() if self.result else None
        if not private:
            data["request"]["env"] = dict.fromkeys(self.request.env)
            data["error"] = public_text(data["error"], self.folder)
            if data["result"] is not None:
                result = data["result"]
                result["error"] = public_text(result["error"], self.folder)
                result["warnings"] = [public_text(w, self.folder) for w in result["warnings"]]
        return data

    def tails(self) -> dict[str, str]:
        """The last few KB of the workload's stdout and stderr (latest run) and the task log."""
        if self.folder is None:
            return {"stdout": "", "stderr": "", "log": f"queue job, phase: {self.phase or '-'}"}
        out = self.folder / "out"
        folders = sorted((out / outdir.RUNS).glob("run*")) if (out / outdir.RUNS).is_dir() else []
        latest = folders[-1] if folders else out
        return {
            "stdout": _tail(spool.live(out, latest, outdir.STDOUT)),
            "stderr": _tail(spool.live(out, latest, outdir.STDERR)),
            "log": _tail(self.folder / LOG),
        }


class Live(Protocol):
    """New intervals of a running job: `poll` reads what came since, `points` holds them."""

    points: list[dict]

    def poll(self) -> int: ...


class Backend(Protocol):
    """Where the page's jobs run: here (`localqueue.LocalQueue`) or on a queue worker
    (`rqjobs.RqQueue`)."""

    def submit(self, request: JobRequest) -> Job: ...
    def get(self, job_id: str) -> Job | None: ...
    def list(self) -> list[Job]: ...
    def stop(self, job_id: str) -> Job: ...
    def live(self, job: Job) -> Live: ...
    def close(self) -> None: ...


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - TAIL_BYTES))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
