"""A command's wall time and rusage (user and system time, max RSS), from a small process.

Linux's max RSS (`ru_maxrss`) of a process holds the pages of the process it was forked from:
exec keeps the high-water mark of the memory it replaces (`exec_mmap` -> `setmax_mm_hiwater_rss`),
and a child forked by autoprof (a Python with pandas loaded: ~100 MiB) would report autoprof's
size for `true`. So the command is forked by a helper, an isolated Python without site
(`-I -S`, ~8 MiB), which waits for it (`wait4`: the command's and its reaped children's
rusage) and prints the figures as one JSON line. Under `perf stat` the command is perf, whose
own peak (~14 MiB) then bounds the figure from below: `bench` measures that floor on an empty
program (`true`) and says when a command's peak does not rise above it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

from autoprof.errors import AutoprofError
from autoprof.perf.process import stop_group, workload_env

# argv[1:] is the command; its standard output goes to /dev/null (as hyperfine's); the helper's
# own is the JSON line; its exit status is the command's (128 + N for a signal N)
HELPER = """
import json, os, sys, time
argv = sys.argv[1:]
start = time.monotonic_ns()
pid = os.fork()
if pid == 0:
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.execvp(argv[0], argv)
    except OSError as err:
        os.write(2, f"{argv[0]}: {err.strerror}\\n".encode())
    os._exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.monotonic_ns() - start
os.write(1, json.dumps({"wall_s": wall / 1e9, "user_s": ru.ru_utime, "sys_s": ru.ru_stime,
    "max_rss_kib": ru.ru_maxrss, "status": status}).encode())
code = os.waitstatus_to_exitcode(status)
os._exit(code if code >= 0 else 128 - code)
"""


@dataclass
class Usage:
    wall_s: float
    user_s: float
    sys_s: float
    max_rss_kib: float
    returncode: int  # as subprocess gives one: negative for a signal
    stderr: str


def run(argv: list[str], timeout: float | None, shown: str, env=None) -> Usage:
    """Run `argv` from the helper, in a session of its own (a timeout or a signal stops the
    helper, the command and whatever it started); `shown` names the command in errors."""
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", HELPER, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env if env is not None else workload_env(),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        raise AutoprofError(f"{shown} ran past --timeout {timeout:g} s") from None
    except BaseException:
        stop_group(proc)
        raise
    stderr = err.decode(errors="replace")
    try:
        found = json.loads(out)
    except ValueError:
        raise AutoprofError(
            f"{shown}: no rusage ({stderr.strip()[-200:] or 'no output'})"
        ) from None
    code = os.waitstatus_to_exitcode(found.pop("status"))
    return Usage(**found, returncode=code, stderr=stderr)
