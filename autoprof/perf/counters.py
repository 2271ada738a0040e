"""The counters a running `perf stat` opened, read by autoprof itself while perf counts.

Named regions need the counts at the instant a marker is passed, while the marking thread
waits; perf stat 6.1 prints only on its timer (a control `enable` prints nothing). So
autoprof takes copies of perf's own event descriptors (pidfd_getfd(2), Linux 5.6: the
caller may ptrace perf, its child) and reads them with read(2) itself: the same kernel
counters perf reads, inherited children included, with their enabled and running times.

perf opens one descriptor per event for a workload it attaches to (`-p`, one thread, cpu -1),
in the order of its `-e` options and before it answers its control pipe's ping; events perf
could not open (`<not supported>`) have none. `event_fds` returns them in that order.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
from dataclasses import dataclass

from autoprof.errors import AutoprofError

# pidfd_getfd is 438 in every table (arch/x86/entry/syscalls/syscall_64.tbl, the generic
# include/uapi/asm-generic/unistd.h of arm64 and riscv)
_PIDFD_GETFD = 438
_PERF_LINK = "anon_inode:[perf_event]"
_PLAIN = struct.Struct("=3Q")  # read_format TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING (perf stat)


@dataclass(frozen=True)
class Reading:
    """One counter: its value (raw: before perf's scale), and the nanoseconds it was enabled
    and running (running < enabled: it was multiplexed)."""

    value: int
    enabled: int
    running: int

    def __sub__(self, other: Reading) -> Reading:
        return Reading(
            self.value - other.value, self.enabled - other.enabled, self.running - other.running
        )

    def __add__(self, other: Reading) -> Reading:
        return Reading(
            self.value + other.value, self.enabled + other.enabled, self.running + other.running
        )


ZERO = Reading(0, 0, 0)


def _getfd(pidfd: int, target: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(_PIDFD_GETFD, pidfd, target, 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return int(fd)


def event_fds(perf_pid: int) -> list[int]:
    """Copies of the event descriptors of perf `perf_pid`, in the order perf opened them
    (ascending descriptor numbers: perf opens its events one after another, closing none);
    the caller closes them. AutoprofError in one line when they cannot be taken."""
    fd_dir = f"/proc/{perf_pid}/fd"
    try:
        numbers = sorted(int(n) for n in os.listdir(fd_dir))
        theirs = [n for n in numbers if _link(f"{fd_dir}/{n}") == _PERF_LINK]
    except OSError as err:
        raise AutoprofError(f"cannot read perf's descriptors: {err.strerror}") from None
    try:
        pidfd = os.pidfd_open(perf_pid)
    except OSError as err:
        raise AutoprofError(f"cannot open perf's pidfd: {err.strerror}") from None
    copies: list[int] = []
    try:
        for number in theirs:
            copies.append(_getfd(pidfd, number))
    except OSError as err:
        close(copies)
        hint = " (Linux 5.6 or later is needed)" if err.errno == 38 else ""
        raise AutoprofError(f"cannot take perf's counters: {err.strerror}{hint}") from None
    finally:
        os.close(pidfd)
    return copies


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def read(fd: int) -> Reading:
    """The counter behind `fd` now (perf stat's read format: value, enabled, running)."""
    data = os.read(fd, _PLAIN.size)
    if len(data) != _PLAIN.size:
        raise AutoprofError(
            f"a counter read gave {len(data)} bytes, not {_PLAIN.size}: a group of events "
            "(perf's {...}) is not read per region"
        )
    return Reading(*_PLAIN.unpack(data))


def read_all(fds: list[int]) -> list[Reading]:
    return [read(fd) for fd in fds]


def close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
