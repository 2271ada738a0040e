"""`perf stat` command lines for a group of events, and what perf's stderr says went wrong.

The runner passes events by their catalog spec; perf writes its CSV to a file (-o) so the
workload's own stdout and stderr stay apart from the counts.
"""

from __future__ import annotations

import re
import shutil
import signal
from collections.abc import Sequence
from dataclasses import dataclass

# "The sys_perf_event_open() syscall returned with 28 (No space left on device) for event (X)."
_OPEN_FAILED = re.compile(
    r"returned with (\d+) \(([^)]*)\) for event \((.+?)\)\.?\s*$", re.MULTILINE
)
# "event syntax error: 'nosuch:event'"
_SYNTAX = re.compile(r"event syntax error: '(.+?)'", re.MULTILINE)
# "No permission to enable ftrace:function event." (EACCES/EPERM; perf names no errno)
_NO_PERMISSION = re.compile(r"^No permission to enable (\S+) event\.", re.MULTILINE)
_EPERM = 1
# what perf 6.1 prints on its stderr when a `disable` arrives on its control channel
_SWITCHED_OFF = re.compile(r"^Events disabled$", re.MULTILINE)
_CUT = ".."  # how perf marks the ends it cut off a long event in a syntax error


def workload_signal(stderr: str, argv0: str) -> int | None:
    """The signal that killed the workload of a `perf stat -- CMD` without -I, or None: perf 6.1
    then exits 0 and says so only in its stderr's last line, psignal's ``CMD: Segmentation
    fault`` (tools/perf/builtin-stat.c, __run_perf_stat: psignal(WTERMSIG(status), argv[0]))."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if not lines:
        return None
    for number in sorted(set(signal.Signals)):
        if lines[-1] == f"{argv0}: {signal.strsignal(number)}":
            return int(number)
    return None


def installed() -> str | None:
    """The full path of perf on PATH; None where it is not installed. Every part of autoprof
    that asks whether perf is there asks here."""
    return shutil.which("perf")


def perf_path() -> str:
    """perf as found on PATH when autoprof starts, resolved once to a full path: a job's
    environment or working folder cannot then put another program in its place."""
    return installed() or "perf"


def stat_argv(
    specs: Sequence[str],
    command: Sequence[str],
    output: str,
    *,
    interval_ms: int | None = 100,
    system_wide: bool = False,
    cpu_list: str | None = None,
    no_merge: bool = False,
    perf: str = "perf",
) -> list[str]:
    """`perf stat -x, [-I ms] -o output ... -e spec ... -- command`; with no `command`, the
    options only (`perf.launch` adds the workload's pid and the control pipe)."""
    argv = [perf, "stat", "-x", ",", "-o", output]
    if interval_ms:
        argv += ["-I", str(interval_ms)]
    if system_wide or cpu_list:
        argv += ["-a", "-A"] if not cpu_list else ["-C", cpu_list, "-A"]
    if no_merge:
        argv.append("--no-merge")
    for spec in specs:
        argv += ["-e", spec]
    return [*argv, "--", *command] if command else argv


def attach_argv(
    specs: Sequence[str],
    output: str,
    duration_s: float,
    *,
    pids: str | None = None,
    cgroup: str | None = None,
    system_wide: bool = False,
    cpu_list: str | None = None,
    interval_ms: int | None = 100,
    no_merge: bool = False,
    perf: str = "perf",
) -> list[str]:
    """`perf stat` of what already runs, for `duration_s`: processes (`-p 12,34`), a cgroup
    (`-a -G NAME,NAME,...`, one name per event as perf wants) or the whole system (`-a`).

    perf 6.1 refuses `--timeout` with `-I`, so an interval profile stops after
    `--interval-count` intervals; perf also stops when every watched process has exited.
    """
    argv = [perf, "stat", "-x", ",", "-o", output]
    if interval_ms:
        argv += [
            "-I",
            str(interval_ms),
            "--interval-count",
            str(interval_count(duration_s, interval_ms)),
        ]
    else:
        argv += ["--timeout", str(max(10, round(duration_s * 1000)))]
    if pids:
        argv += ["-p", pids]
    elif cpu_list:
        argv += ["-C", cpu_list, "-A"]
    elif system_wide or cgroup:
        argv += ["-a", "-A"] if system_wide else ["-a"]
    if no_merge:
        argv.append("--no-merge")
    for spec in specs:
        argv += ["-e", spec]
    if cgroup:
        argv += ["-G", ",".join([cgroup] * len(specs))]
    return argv


def interval_count(duration_s: float, interval_ms: int) -> int:
    """Intervals of `interval_ms` that cover `duration_s` (at least one)."""
    return max(1, -(-round(duration_s * 1000) // interval_ms))


@dataclass(frozen=True)
class OpenFailure:
    """perf could not open one event; `errno` 0 when perf gave a syntax error instead."""

    event: str
    errno: int
    reason: str

    @property
    def capacity(self) -> bool:
        """ENOSPC/EBUSY: the event may count in a run of its own (counters were taken)."""
        return self.errno in (16, 28)


def shown_as(shown: str, text: str) -> bool:
    """Whether `shown`, the event perf named in its error, is the event `text`.

    perf 6.1's "event syntax error" prints a long event through a window around the error
    (terminal width, 80 columns when perf writes to a file): the text cut off before it is
    dropped and the window's first two characters become `..`, likewise at its end. So a
    shortened form names an event that holds its middle part, with at least one character
    dropped and two overwritten on each cut side (tests/data/perf61/long_refused*.stderr.txt).
    """
    if shown == text:
        return True
    head, tail = shown.startswith(_CUT), len(shown) > len(_CUT) and shown.endswith(_CUT)
    if not (head or tail):
        return False
    middle = shown[len(_CUT) if head else 0 : -len(_CUT) if tail else None]
    if not middle:
        return False
    cut = f".{{{len(_CUT) + 1},}}"  # at least one character dropped, two overwritten by `..`
    pattern = (cut if head else "") + re.escape(middle) + (cut if tail else "")
    return re.fullmatch(pattern, text, re.DOTALL) is not None


def switched_off(stderr: str) -> bool:
    """Whether perf was told to stop counting while it ran (`disable` on its control channel:
    it says "Events disabled"). autoprof only pings perf there; a process of the same user can
    still take autoprof's end of the channel (pidfd_getfd, ptrace) and switch its counting off,
    and the intervals after that are then not counted (issue #38, point 5)."""
    return _SWITCHED_OFF.search(stderr) is not None


def open_failure(stderr: str) -> OpenFailure | None:
    """The event perf refused to open, from its stderr, if it says so."""
    match = _OPEN_FAILED.search(stderr)
    if match:
        return OpenFailure(
            match.group(3), int(match.group(1)), f"{match.group(2)} (errno {match.group(1)})"
        )
    match = _NO_PERMISSION.search(stderr)
    if match:
        return OpenFailure(match.group(1), _EPERM, match[0].rstrip("."))
    match = _SYNTAX.search(stderr)
    if match:
        hint = stderr[match.end() :].strip().splitlines()
        detail = next((h.strip(" \\_") for h in hint if h.strip(" \\_")), "syntax error")
        return OpenFailure(match.group(1), 0, f"event syntax error: {detail}")
    return None
