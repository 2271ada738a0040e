"""Counts per thread (`profile --per-thread`): one `perf stat` per thread of the workload's
process tree, each started while its thread is held at its creation.

perf 6.1's own `--per-thread -p PID` fixes its list of threads when it attaches, at the
workload's exec: threads made later are inherited into their creator's count, so a two-thread
program gives one row. So autoprof stays the workload's tracer (`perf.launch` holds it at its
exec with PTRACE_TRACEME) with PTRACE_O_TRACECLONE, TRACEFORK, TRACEVFORK, TRACEEXEC and
TRACEEXIT: the kernel stops a thread only at those events and when a signal is delivered to it
(the signal is passed on unchanged). A new thread, or a new process, starts stopped; its perf
(`perf stat --no-inherit --per-thread -t TID`, with its control pipe) is started then, and the
thread runs once perf has answered a ping, as `perf.launch` does for the first. At a thread's
exit stop (PTRACE_EVENT_EXIT: the thread still exists) its perf is told to stop (SIGCHLD: it
prints its last interval) and waited for before the thread may exit. With --no-inherit each perf
counts one thread and no counter is shared between threads: nothing multiplexes that would not
multiplex for the whole process, and every thread's count is exact where the process's is.

The cost: one perf per thread (its start holds the new thread: tens of milliseconds each), and
the tracer polling its tracees. The first thread's counts go to `perf.csv`, every other's to
`perf-TID.csv` beside it; the run's record lists the threads (`ThreadRecord`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from autoprof.errors import AutoprofError
from autoprof.perf.launch import (
    PERF_EXIT_GRACE_S,
    Launch,
    _ptrace,
    await_ack,
    control_channel,
    devnull,
    end_perf,
)

_PTRACE_CONT = 7
_PTRACE_DETACH = 17
_PTRACE_SETOPTIONS = 0x4200
_PTRACE_GETEVENTMSG = 0x4201
_PTRACE_GETSIGINFO = 0x4202
# PTRACE_O_TRACEFORK | TRACEVFORK | TRACECLONE | TRACEEXEC | TRACEEXIT (<linux/ptrace.h>)
_OPTIONS = 0x02 | 0x04 | 0x08 | 0x10 | 0x40
_EVENT_FORK, _EVENT_VFORK, _EVENT_CLONE, _EVENT_EXEC, _EVENT_EXIT = 1, 2, 3, 4, 6
_WALL = 0x40000000  # __WALL: threads of a traced process are not children to waitid
_POLL_MAX_S = 0.005
THREAD_OUTPUT = "perf-{tid}.csv"  # a thread's perf output, beside the first thread's perf.csv


@dataclass
class ThreadRecord:
    """One thread a per-thread run counted: its id, its name when it ended (`comm`), the thread
    that made it (None for the workload itself), when its perf started (seconds after the
    first's) and how that perf ended."""

    tid: int
    comm: str = ""
    parent: int | None = None
    start_s: float = 0.0
    perf_exit: int | None = None

    @property
    def label(self) -> str:
        """How perf's --per-thread output names a thread, and results.csv's UNIT does:
        COMM-TID."""
        return f"{self.comm}-{self.tid}"


def output_name(tid: int, first: bool) -> str:
    """The file a thread's perf writes: perf.csv for the workload's first thread."""
    return "perf.csv" if first else THREAD_OUTPUT.format(tid=tid)


def thread_argv(argv: Sequence[str], output: Path, tid: int, ctl: int, ack: int) -> list[str]:
    """A thread's perf: the run's `perf stat` argv (its -o replaced by the thread's file) with
    --no-inherit --per-thread -t TID and the control pipe."""
    args = list(argv)
    at = args.index("-o")
    args[at + 1] = str(output)
    return [*args, "--no-inherit", "--per-thread", "-t", str(tid), "--control", f"fd:{ctl},{ack}"]


@dataclass
class _Counted:
    """A thread being counted and its perf."""

    record: ThreadRecord
    argv: list[str]
    perf: subprocess.Popen | None = None
    ctl: int | None = None
    ack: int | None = None
    stopped: bool = True  # held in a ptrace stop by autoprof


@dataclass
class ThreadLaunch(Launch):
    """A `Launch` whose workload stays traced, each of its threads counted by its own perf."""

    folder: Path = Path(".")
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    stderr_file: Any = None
    counted: dict[int, _Counted] = field(default_factory=dict)
    done: list[ThreadRecord] = field(default_factory=list)
    _origin: float = 0.0

    def start_perf(
        self,
        argv: Sequence[str],
        *,
        attach: bool,
        env: Mapping[str, str],
        stdout: IO[bytes] | int | None = None,
        stderr: IO[bytes] | int | None = None,
    ) -> list[str]:
        """Start the first thread's perf (the workload, held at its exec); returns its argv."""
        self.argv, self.env, self.stderr_file = list(argv), dict(env), stderr
        self.folder = Path(argv[list(argv).index("-o") + 1]).parent
        ptrace = _ptrace()
        if ptrace(_PTRACE_SETOPTIONS, self.pid, None, ctypes.c_void_p(_OPTIONS)) != 0:
            raise AutoprofError(f"cannot trace the workload's threads: {_errno_text()}")
        self._origin = time.monotonic()
        thread = self._count(self.pid, None)
        self.perf = thread.perf
        self._ctl, self._ack = thread.ctl, thread.ack
        return thread.argv

    def _count(self, tid: int, parent: int | None) -> _Counted:
        """Start the perf of thread `tid` (held in a stop)."""
        ctl, ctl_read = control_channel()  # socketpairs: not reopened through /proc
        ack, ack_write = control_channel()
        output = self.folder / output_name(tid, parent is None)
        argv = thread_argv(self.argv, output, tid, ctl_read, ack_write)
        record = ThreadRecord(tid, parent=parent, start_s=round(time.monotonic() - self._origin, 6))
        try:
            perf = subprocess.Popen(
                argv,
                stdin=devnull(),
                stdout=self.stderr_file,
                stderr=self.stderr_file,
                env=self.env,
                pass_fds=(ctl_read, ack_write),
                process_group=self.pid,
            )
        except OSError as err:
            raise AutoprofError(f"cannot start perf: {err.strerror or err}") from None
        finally:
            os.close(ctl_read)
            os.close(ack_write)
        thread = _Counted(record, argv, perf, ctl, ack)
        self.counted[tid] = thread
        return thread

    def release(
        self, deadline: float | None = None, counting: Callable[[], None] | None = None
    ) -> bool:
        """Wait until the first perf counts (then call `counting`), then let the workload run,
        still traced. False when perf exited first: the workload is then killed before its
        first instruction."""
        if not self.ran and not self.exited() and self._await_ack(deadline):
            if counting is not None:
                counting()
            self.ran = self._resume(self.pid, 0)
        if not self.ran:
            self.kill()
        return self.ran

    def _resume(self, tid: int, sig: int) -> bool:
        thread = self.counted.get(tid)
        if thread is not None:
            thread.stopped = False
        return _ptrace()(_PTRACE_CONT, tid, None, ctypes.c_void_p(sig)) == 0

    def wait_exit(self, timeout: float | None = None) -> None:
        """Serve the tracees' stops until the workload and every thread it made have ended;
        TimeoutExpired after `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0001
        while self.counted or not self.exited():
            served = False
            for tid in list(self.counted):
                keep = os.WNOWAIT if tid == self.pid else 0  # `finish` reaps the workload
                info = _wait(tid, os.WSTOPPED | os.WEXITED | os.WNOHANG | keep)
                if info is not None:
                    self._serve(tid, info, deadline)
                    served = True
            if served:
                delay = 0.0001
                continue
            if not self.counted:  # the workload's last threads are gone; it is reaped next
                self._await_workload(deadline)
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.workload.args, timeout or 0)
            time.sleep(delay)
            delay = min(delay * 2, _POLL_MAX_S)

    def _await_workload(self, deadline: float | None) -> None:
        """The workload's leader is reported once all its threads are reaped: wait for it."""
        super().wait_exit(None if deadline is None else max(deadline - time.monotonic(), 0))

    def _serve(self, tid: int, info: os.waitid_result, deadline: float | None) -> None:
        """One stop (or the end) of tracee `tid`."""
        if info.si_code in (os.CLD_EXITED, os.CLD_KILLED, os.CLD_DUMPED):
            self._ended(tid, keep=tid == self.pid)
            return
        if info.si_code != os.CLD_TRAPPED:
            return
        status = info.si_status
        event = status >> 8
        if tid == self.pid and tid not in self.counted:
            return
        if event in (_EVENT_CLONE, _EVENT_FORK, _EVENT_VFORK):
            new = _event_message(tid)
            self._new_tracee(new, tid, deadline)
            self._resume(tid, 0)
        elif event == _EVENT_EXIT:
            self._stop_perf(tid)
            self._resume(tid, 0)
        elif event == _EVENT_EXEC:
            self._resume(tid, 0)
        else:  # a signal for the thread: deliver it (group-stops are let go: no SEIZE here)
            sig = status & 0x7F
            self._resume(tid, sig if _has_siginfo(tid) else 0)

    def _new_tracee(self, tid: int, parent: int, deadline: float | None) -> None:
        """A thread or process just made: held at its first stop until its perf counts."""
        while True:
            info = _wait(tid, os.WSTOPPED | os.WEXITED)
            if info is None or info.si_code != os.CLD_TRAPPED:
                return  # killed before it ran
            if (info.si_status & 0x7F) == signal.SIGSTOP:
                break
        thread = self._count(tid, parent)
        perf = thread.perf
        assert perf is not None and thread.ctl is not None and thread.ack is not None
        # the thread runs once its perf counts; uncounted when that perf failed (its stderr
        # says why, and its file is missing: aggregate reports the run broken)
        await_ack(perf, thread.ctl, thread.ack, deadline)
        self._resume(tid, 0)

    def _stop_perf(self, tid: int) -> None:
        """Thread `tid` is exiting (held): its perf prints its last interval and ends."""
        thread = self.counted.get(tid)
        if thread is None or thread.perf is None or thread.record.perf_exit is not None:
            return
        with contextlib.suppress(OSError):
            thread.record.comm = Path(f"/proc/{self.pid}/task/{tid}/comm").read_text().strip()
        if not thread.record.comm:
            with contextlib.suppress(OSError):
                thread.record.comm = Path(f"/proc/{tid}/comm").read_text().strip()
        thread.record.perf_exit = end_perf(thread.perf)
        for fd in (thread.ctl, thread.ack):
            if fd is not None and fd not in (self._ctl, self._ack):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _ended(self, tid: int, keep: bool) -> None:
        """Thread `tid` is gone (reaped unless it is the workload, which `finish` reaps)."""
        self._stop_perf(tid)
        thread = self.counted.pop(tid, None)
        if thread is not None:
            self.done.append(thread.record)
        if not keep:
            _wait(tid, os.WEXITED | os.WNOHANG)

    @property
    def threads(self) -> list[ThreadRecord]:
        """Every thread counted, in the order they were made."""
        return sorted(
            [*self.done, *(t.record for t in self.counted.values())], key=lambda r: r.start_s
        )

    def finish(self, grace: float = PERF_EXIT_GRACE_S) -> int | None:
        """Stop the perfs of threads still counted (the workload ended before them: they are
        let go, untraced), then as `Launch.finish`. Returns the first perf's exit code."""
        self._let_go()
        for tid in list(self.counted):
            self._stop_perf(tid)
            self.done.append(self.counted.pop(tid).record)
        first = next((t for t in self.done if t.parent is None), None)
        self.workload.wait()
        self.close()
        return None if first is None else first.perf_exit

    def stop(self) -> int | None:
        """As `Launch.stop`, the tracees first let go (a traced thread would not see the
        stopping signals)."""
        self._let_go()
        return super().stop()

    def _let_go(self) -> None:
        """Detach every tracee still alive, held or running (a running one is stopped first,
        with its process: SIGSTOP, then SIGCONT once it is detached)."""
        ptrace = _ptrace()
        running = [tid for tid, thread in self.counted.items() if not thread.stopped]
        for tid in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(tid, signal.SIGSTOP)
        for tid in list(self.counted):
            if tid in running:
                info = _wait(tid, os.WSTOPPED | os.WEXITED | (os.WNOWAIT if tid == self.pid else 0))
                if info is None or info.si_code != os.CLD_TRAPPED:
                    continue
            ptrace(_PTRACE_DETACH, tid, None, None)
        for tid in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(tid, signal.SIGCONT)


def _wait(tid: int, flags: int) -> os.waitid_result | None:
    """waitid for one tracee (a thread needs __WALL); None when nothing is to be had."""
    try:
        return os.waitid(os.P_PID, tid, flags | _WALL)
    except ChildProcessError:
        return None


def _event_message(tid: int) -> int:
    """The new thread's or process's id at a clone, fork or vfork stop."""
    value = ctypes.c_ulong()
    _ptrace()(_PTRACE_GETEVENTMSG, tid, None, ctypes.byref(value))
    return value.value


def _has_siginfo(tid: int) -> bool:
    """A signal-delivery stop has a siginfo; a group-stop (SIGSTOP taking effect) has none."""
    buffer = ctypes.create_string_buffer(128)
    return _ptrace()(_PTRACE_GETSIGINFO, tid, None, buffer) == 0


def _errno_text() -> str:
    return os.strerror(ctypes.get_errno() or errno.EPERM)
