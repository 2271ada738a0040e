"""`perf record` and `perf script`: the only place that knows their command lines.

`record_argv` / `script_argv` are pure; `run_record` and `script_lines` run perf and turn its
failures into one line the user can act on.
"""

from __future__ import annotations

import contextlib
import io
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from autoprof.errors import AutoprofError
from autoprof.perf.command import perf_path
from autoprof.perf.process import Interrupted, Stopper, stop_group, workload_env

PERF_DATA = "perf.data"  # the samples file of a record folder (perf's own default name)
RECORD_INFO = "record.json"  # beside it: what was recorded, how (`flame.capture.RecordInfo`)
PERF_DATA_MAGIC = (b"PERFILE2", b"PERFFILE")  # the first 8 bytes of a perf.data
CALL_GRAPHS = ("fp", "dwarf", "lbr")
# `perf script` fields: perf's default layout plus the pid (for --pid), so the output stays what
# stackcollapse-perf.pl reads.
SCRIPT_FIELDS = "+pid"


@dataclass
class RecordOptions:
    """What to sample. 99 Hz by default: off the round frequencies of periodic work."""

    frequency: int = 99
    call_graph: str = "fp"
    events: list[str] = field(default_factory=list)
    pid: int | None = None
    system_wide: bool = False
    duration: float | None = None  # seconds to sample a -p PID or -a target, then stop perf


def record_argv(options: RecordOptions, output: Path, command: Sequence[str]) -> list[str]:
    """The `perf record` command line for `options`, writing `output`, running `command`."""
    if options.call_graph not in CALL_GRAPHS:
        raise AutoprofError(
            f"unknown call graph {options.call_graph!r} (choose {', '.join(CALL_GRAPHS)})"
        )
    if options.frequency <= 0:
        raise AutoprofError(f"sampling frequency must be positive, not {options.frequency}")
    if options.pid is not None and options.system_wide:
        raise AutoprofError("choose one of -p PID and -a, not both")
    if not command and options.pid is None and not options.system_wide:
        raise AutoprofError("nothing to record: give a command after --, or -p PID, or -a")
    if options.duration is not None and (command or options.duration <= 0):
        raise AutoprofError(
            "--duration S (S > 0) applies to -p PID and -a; a command ends by itself"
        )
    argv = [perf_path(), "record", "-F", str(options.frequency), "--call-graph", options.call_graph]
    for event in options.events:
        argv += ["-e", event]
    if options.pid is not None:
        argv += ["-p", str(options.pid)]
    if options.system_wide:
        argv.append("-a")
    argv += ["-o", str(output)]
    if command:
        argv += ["--", *command]
    return argv


def script_argv(perf_data: Path) -> list[str]:
    """The `perf script` command line that prints the stacks of `perf_data`."""
    return [perf_path(), "script", "-F", SCRIPT_FIELDS, "-i", str(perf_data)]


# perf record finishes its file after SIGINT (and builds its build-id table): give it time
FINISH_GRACE_S = 10.0


@dataclass
class RecordResult:
    exit_code: int
    stderr: str  # perf's messages (and the workload's standard error)
    stopped_by: int | None = None  # the signal that ended the recording (SIGINT for --duration)


def run_record(
    argv: list[str],
    stderr_copy: Path,
    duration: float | None = None,
    env: dict[str, str] | None = None,
) -> RecordResult:
    """Run `perf record`: standard error goes both to the terminal and to `stderr_copy`.

    perf and the workload run in a process group of their own. Ctrl-C, SIGTERM or SIGHUP (and
    the end of `duration`) send SIGINT to that group, as Ctrl-C in a terminal would: the
    workload stops, perf writes its data file; what still runs after a grace period is killed.
    `env`: variables a job sets for its workload (`process.workload_env`).
    """
    with Stopper() as stopper:
        proc = _start(argv, env, stderr=subprocess.PIPE, start_new_session=True)
        chunks: list[bytes] = []
        tee = threading.Thread(target=_tee, args=(proc.stderr, chunks), daemon=True)
        tee.start()
        stopped_by = None
        try:
            code = proc.wait(timeout=duration)
        except subprocess.TimeoutExpired:
            # a signal meanwhile must not cut the stop short; it is what stopped the recording
            with contextlib.suppress(Interrupted), stopper.deferred():
                code = _finish(proc)
            stopped_by = stopper.signum or signal.SIGINT
        except Interrupted as stop:
            stopped_by, code = stop.signum, _finish(proc)
        except BaseException:
            with stopper.deferred():
                _finish(proc)
            raise
    tee.join()
    text = b"".join(chunks).decode("utf-8", "replace")
    stderr_copy.write_text(text)
    return RecordResult(code, text, stopped_by)


def _finish(proc: subprocess.Popen) -> int:
    return stop_group(proc, FINISH_GRACE_S)


def _start(argv: list[str], env: dict[str, str] | None = None, **popen) -> subprocess.Popen:
    try:
        return subprocess.Popen(argv, env=workload_env(job=env), **popen)
    except FileNotFoundError as err:
        raise AutoprofError("perf not found (Debian: sudo apt-get install linux-perf)") from err


def _tee(stream: io.BufferedReader, chunks: list[bytes]) -> None:
    for chunk in iter(lambda: stream.read1(65536), b""):
        chunks.append(chunk)
        sys.stderr.buffer.write(chunk)
        sys.stderr.flush()


def wrote_data(stderr: str) -> bool:
    """Whether `perf record` finished its data file: it says so last on standard error,
    ``[ perf record: Captured and wrote 0.012 MB perf.data (34 samples) ]``."""
    return "Captured and wrote" in stderr


def perf_error_line(stderr: str) -> str:
    """The line of perf's standard error that says what went wrong."""
    lines = [line.strip() for line in stderr.splitlines()]
    lines = [line for line in lines if line and not line.startswith("[ perf record:")]
    keys = ("error", "invalid", "not supported", "permission", "failed", "no such", "cannot")
    for i, line in enumerate(lines):
        low = line.lower()
        if low.rstrip(":") == "error" and i + 1 < len(lines):
            return lines[i + 1]
        if any(k in low for k in keys):
            return line
    return lines[-1] if lines else "no message"


@contextlib.contextmanager
def script_output(perf_data: Path) -> Iterator[IO[str]]:
    """Stream the text of `perf script` over `perf_data` (a text stream to read).

    Raises AutoprofError with perf's own reason when perf cannot read the file.
    """
    argv = script_argv(perf_data)
    proc = _start(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="surrogateescape"
    )
    stdout, stderr = proc.stdout, proc.stderr
    assert stdout is not None and stderr is not None  # both piped
    errors: list[str] = []
    reader = threading.Thread(target=lambda: errors.append(stderr.read()), daemon=True)
    reader.start()
    try:
        yield stdout
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    stdout.read()  # drain whatever the consumer left
    code = proc.wait()
    reader.join()
    if code != 0:
        reason = perf_error_line(errors[0] if errors else "")
        raise AutoprofError(f"perf script cannot read {perf_data}: {reason}")
