"""New measurements from the web page: requests, a queue that runs one job at a time, and the
live view of a running job.

Every job runs in a child process of its own (`python -m autoprof.web.task FOLDER`, a process
group of its own), so Stop is a signal: SIGINT makes the runner stop perf as Ctrl-C does, the
child writes what it kept, and anything a dead child left is killed by `stop_leftovers`. The
server never blocks on a job: the page polls or streams its state.

A job's folder: `request.json` (what was asked), `out/` (the profile or record folder),
`task.log` (the child's messages), `result.json` (state, error, stored run id).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shlex
import signal
import subprocess
import threading
import uuid
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from autoprof.errors import AutoprofError
from autoprof.queue.model import FAILED, FINISHED, QUEUED, RUNNING, STOPPED, JobResult, settle
from autoprof.queue.spec import allowed
from autoprof.results.live import Tail
from autoprof.run import outdir
from autoprof.run.options import EventSelection, ProfileOptions
from autoprof.run.request import Request
from autoprof.run.runner import stop_leftovers
from autoprof.util import children, owned
from autoprof.util.clock import now_iso
from autoprof.util.records import write_json

if TYPE_CHECKING:
    from autoprof.catalog.model import Catalog

TOOLS = ("stat", "profile", "record")
STOP_GRACE_S = 15
TAIL_BYTES = 4096
# autoprof's settings that carry a password: never in a job process's environment
SECRET_SETTINGS = frozenset({"AUTOPROF_STORE", "AUTOPROF_REDIS"})
REQUEST = "request.json"
RESULT = "result.json"
LOG = "task.log"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The only variables a job may set (the operator picks among them with --allow-env): thread
# counts and placement for OpenMP, BLAS and language runtimes. Each takes a number or a keyword
# that no program turns into code to run, a file to read or a folder to search. An allow-list:
# every other name is refused, whatever --allow-env says, because too many make a program (or
# a library it loads, or perf) run code of the job's choosing past --allow, or read files or
# folders the job chose: the dynamic loader (LD_*), shells (BASH_ENV, ENV), interpreters
# (PYTHON*, PERL*, PERLLIB, LUA_INIT, NODE_*, RUBY*), OPENSSL_CONF, JAVA_TOOL_OPTIONS, libpq's
# PG*, glibc's GCONV_PATH, PATH, HOME, XDG_*, TMPDIR, autoprof's own AUTOPROF_*.
HARMLESS_ENV = frozenset(
    {
        "OMP_NUM_THREADS",
        "OMP_THREAD_LIMIT",
        "OMP_DYNAMIC",
        "OMP_PROC_BIND",
        "OMP_PLACES",
        "OMP_SCHEDULE",
        "OMP_WAIT_POLICY",
        "OMP_STACKSIZE",
        "OMP_MAX_ACTIVE_LEVELS",
        "GOMP_SPINCOUNT",
        "KMP_AFFINITY",
        "KMP_BLOCKTIME",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "BLIS_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "RAYON_NUM_THREADS",
        "JULIA_NUM_THREADS",
        "GOMAXPROCS",
        "GOGC",
        "GOMEMLIMIT",
    }
)


@dataclass
class JobRequest:
    """What the new-measurement form asks for. `stat` streams its intervals live; `profile`
    repeats; both measure every chosen event without multiplexing. `record` samples for a
    flame graph."""

    tool: str
    command: list[str]
    events: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    pid: int | None = None
    duration: float = 10.0  # seconds each group watches `pid` (stat/profile attached to it)
    interval_ms: int = 100
    repeat: int = 1
    reserve: int = 0  # generic counters taken by others (--reserve)
    tags: dict[str, str] = field(default_factory=dict)
    # what part of the program is counted (ProfileOptions' --region, --per-thread, --pin,
    # --core-type: their limits and checks are the CLI's)
    regions: list[str] = field(default_factory=list)
    per_thread: bool = False
    pin: str | None = None
    core_type: str | None = None
    emulate: bool = False  # profile under an emulator (--emulate): exact, no PMU needed

    @property
    def options(self) -> ProfileOptions:
        """How a stat/profile job measures (the CLI's ProfileOptions)."""
        options = ProfileOptions(
            interval_ms=self.interval_ms,
            repeat=self.repeat,
            regions=tuple(self.regions),
            per_thread=self.per_thread,
            pin=self.pin,
            core_type=self.core_type,
            emulate=self.emulate,
        )
        if self.pid is not None:  # every group watches the running process for `duration`
            options = replace(options, pids=str(self.pid), duration=self.duration)
        return options

    @property
    def command_line(self) -> str:
        return shlex.join(self.command)

    def measurement(self) -> Request:
        """What a stat/profile job measures: the one `Request` that `run.planning` plans and
        `pipeline.measure` runs for the CLI and the queue too, with their limits."""
        return Request(
            self.command,
            self.events,
            options=self.options,
            selection=EventSelection(reserve=self.reserve),
            tags=self.tags,
            env=self.env,
        )

    @classmethod
    def from_form(cls, data: Any) -> JobRequest:
        """Parse the form's JSON (command as one shell line or a list of arguments, env and
        tags as KEY=VALUE lines, numbers as numbers or the text of an input); raises
        AutoprofError with what is wrong. Interval, repeat, duration and reserve have the
        limits every entry point has (`run.options`)."""
        if not isinstance(data, dict):
            raise AutoprofError(f"expected a JSON object, not {type(data).__name__}")
        tool = str(data.get("tool", "stat"))
        if tool not in TOOLS:
            raise AutoprofError(f"unknown tool {tool!r} (choose {', '.join(TOOLS)})")
        command = _command(data.get("command", ""))
        pid = data.get("pid") or None
        if not command and pid is None:
            raise AutoprofError("give a command (or a PID to attach to)")
        if command and pid is not None and tool != "record":
            raise AutoprofError("give a command or a PID to attach to, not both")
        events = data.get("events") or []
        if not (isinstance(events, list) and all(isinstance(e, str) for e in events)):
            raise AutoprofError("events: expected a list of event names")
        events = [e for e in events if e.strip()]
        emulate = data.get("emulate") in (True, "on", "true")
        if emulate and tool != "profile":
            raise AutoprofError("emulate: an emulator gives totals; choose the profile tool")
        if tool != "record" and not events and not emulate:  # emulated: the emulator's all
            raise AutoprofError("choose at least one event")
        request = cls(
            tool=tool,
            command=command,
            events=events,
            env=_pairs(data.get("env", ""), "environment variable", _ENV_NAME),
            pid=_pid(pid) if pid is not None else None,
            duration=_number(data.get("duration") or 10, "duration", float),
            interval_ms=_number(data.get("interval_ms", 100), "interval"),
            repeat=_number(data.get("repeat", 1), "repeat"),
            reserve=_number(data.get("reserve", 0), "reserve"),
            tags=_pairs(data.get("tags", ""), "tag", None),
            regions=_lines(data.get("regions", ""), "regions"),
            per_thread=data.get("per_thread") in (True, "on", "true"),
            pin=str(data.get("pin") or "").strip() or None,
            core_type=str(data.get("core_type") or "").strip() or None,
            emulate=emulate,
        )
        request.measurement().check()  # the CLI's limits (run.options), in its words
        return request


def _command(value: Any) -> list[str]:
    """A command given as one shell line or as a list of arguments."""
    if isinstance(value, list) and all(isinstance(arg, str) for arg in value):
        return value
    if not isinstance(value, str):
        raise AutoprofError("command: expected a shell line or a list of arguments")
    try:
        return shlex.split(value)
    except ValueError as err:
        raise AutoprofError(f"command: {err}") from None


def _lines(value: Any, what: str) -> list[str]:
    """Names one per line (a textarea's text), or a list of names."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    if not isinstance(value, str):
        raise AutoprofError(f"{what}: expected names, one per line")
    return [line.strip() for line in value.splitlines() if line.strip()]


def _number(value: Any, what: str, kind: type = int) -> Any:
    """`value` (a JSON number, or an input's text) as a `kind` (int: a whole number; float:
    seconds), or AutoprofError saying what is wrong."""
    try:
        if isinstance(value, bool):  # JSON true is no number
            raise TypeError
        return kind(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(1e999)
        noun = "a number of seconds" if kind is float else "a whole number"
        raise AutoprofError(f"{what} {value!r} is not {noun}") from None


def _pid(value: Any) -> int:
    """A process id to attach to (the kernel's pid_max is at most 2**22)."""
    pid = _number(value, "pid")
    if not 1 <= pid <= 2**22:
        raise AutoprofError(f"pid {pid} is outside 1..{2**22}")
    return pid


def _pairs(text: Any, what: str, name_rule: re.Pattern | None) -> dict[str, str]:
    """KEY=VALUE lines (or a dict) -> dict; names checked against `name_rule` when given."""
    items = (
        text.items()
        if isinstance(text, dict)
        else (line.partition("=")[::2] for line in str(text).splitlines() if line.strip())
    )
    pairs = {}
    for key, value in items:
        key = str(key).strip()
        if not key or (name_rule is not None and not name_rule.fullmatch(key)):
            raise AutoprofError(f"{what} {key!r}: expected KEY=VALUE with a plain name")
        pairs[key] = str(value).strip()
    return pairs


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


def check_allowed(request: JobRequest, patterns: list[re.Pattern]) -> None:
    """The queue worker's own rule: the shell-joined command must fully match an --allow."""
    if not patterns:
        raise AutoprofError("this server is read-only: start it with --allow REGEX to measure")
    # attaching: --allow '-p [0-9]+'; `record` of a command may attach to a PID as well
    checks = [request.command] if request.command else []
    if request.pid is not None:
        checks.append(["-p", str(request.pid)])
    for checked in checks:
        if not allowed(checked, patterns):
            raise AutoprofError(
                f"refused: command {shlex.join(checked)!r} does not match this server's --allow"
            )


def check_events(request: JobRequest, catalog: Catalog) -> None:
    """A job's events, checked against this machine's `catalog` as its tool checks them before
    any run, so that the form gets the refusal instead of a job bound to fail: every tool's
    events resolve to events of this machine (`host.resolve_events`: an unknown one, or a text
    that is not one event, never reaches perf); a stat/profile job's are planned as the job
    will plan them (`run.planning`: an event of a system-wide-only PMU for a command, two
    events perf would print alike) and must be countable (no hardware event where the kernel
    offers no PMU)."""
    from autoprof.catalog import host
    from autoprof.run import planning

    if not request.events:
        return
    if request.tool == "record":
        host.resolve_events(catalog, request.events)
        return
    planned = planning.plan_catalog(catalog, request.measurement())
    host.refuse_uncountable(planned.catalog)


def refused_env_names(names: list[str]) -> list[str]:
    """The names of `names` that no job may set, however the server was started."""
    return [name for name in names if name not in HARMLESS_ENV]


def harmless_env_text() -> str:
    return ", ".join(sorted(HARMLESS_ENV))


def check_env(request: JobRequest, allowed: frozenset[str]) -> None:
    """A job sets only the variables the operator listed with --allow-env, and only harmless
    ones (HARMLESS_ENV): the command is checked against --allow, its environment must not
    undo that. The variables go to the workload alone, never to autoprof's own processes."""
    for name in request.env:
        if name not in HARMLESS_ENV:
            raise AutoprofError(
                f"refused: a job may not set {name} (only these can be allowed: "
                f"{harmless_env_text()})"
            )
        if name not in allowed:
            raise AutoprofError(
                f"refused: environment variable {name} is not allowed here "
                "(the server's operator lists those a job may set with --allow-env NAME)"
            )


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
            "stdout": _tail(latest / outdir.STDOUT),
            "stderr": _tail(latest / outdir.STDERR),
            "log": _tail(self.folder / LOG),
        }


class Live(Protocol):
    """New intervals of a running job: `poll` reads what came since, `points` holds them."""

    points: list[dict]

    def poll(self) -> int: ...


class Backend(Protocol):
    """Where the page's jobs run: here (`LocalQueue`) or on a queue worker (`rqjobs.RqQueue`)."""

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
