"""A workload started for `perf stat` so that perf counts what bare perf counts, and autoprof
knows how the workload ended.

Bare `perf stat -- CMD` forks CMD and enables its counters in CMD's exec (enable_on_exec), so
nothing of perf is counted; but with `-I` (the live intervals) perf 6.1 exits 0 whatever CMD
did, and without `-I` it reports a signal only as a line on stderr. Any process of autoprof's
between perf and CMD would be counted instead: a `/bin/sh -c` wrapper added 58,796 user-mode
instructions to every run on the emulated Arm machine (issue #28), and one that stays alive to
wait for CMD is counted for as long as it lives, since counting is inherited by children.

So autoprof starts CMD itself, as its own child, with PTRACE_TRACEME: the kernel stops CMD with
SIGTRAP once its exec has completed, before its first user-mode instruction. The child asks
for it from a native launcher (launcher.c, built by `make install` where a C compiler is) that
autoprof starts with vfork and that execs CMD; without one, from Python between fork and exec
(a preexec_fn: no vfork, ~2 ms more CPU and ~4 ms more wall time per run). Either way the
process is CMD, held, with CMD's argv, environment and descriptors. perf then attaches
to that pid (`perf stat -p PID`, counters enabled at once, inherited by CMD's children) with a
control channel (`--control fd:CTL,ACK`: socketpairs, which CMD cannot reopen through /proc to
switch its own counting off); perf answers a `ping` only from its event loop, after its counters
are open, and then autoprof detaches (PTRACE_DETACH with no signal) from the very thread that
started CMD (the tracer). CMD runs as it would under bare perf, untraced. When it
ends (its exact exit status or signal, read with WNOWAIT) autoprof sends perf SIGCHLD, which
perf stat takes for "stop" (skip_signal): it prints the last, partial interval and exits 0;
only then is CMD reaped. perf stops by itself at a target gone from /proc (is_target_alive),
without printing that interval (nor anything, for a run shorter than one interval), so CMD
stays a zombie, still "alive" to perf, until perf has printed.

What is counted, then, is CMD from its first instruction: user-mode counts equal bare perf's
exactly; kernel-mode counts lack the end of the exec that bare perf counts after its
enable_on_exec point (the ELF loader zeroing the partial .bss pages of the program and its
dynamic loader: 2 of the ~47 page faults of `true`) and hold instead the return from the ptrace
stop. A set-user-ID program does not gain its privileges when exec'd under ptrace.

CMD leads a process group of its own in autoprof's session, with perf in it: stopping the group
(`process.stop_processes`) stops both and whatever CMD started. A system-wide profile of a command
(`-a`, `-C`) runs the same way, perf counting every CPU instead of attaching to CMD.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import math
import os
import platform
import select
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Self

from autoprof.errors import AutoprofError
from autoprof.perf import spawn as spawning
from autoprof.perf.process import proc_text, stop_processes
from autoprof.perf.spawn import Child

_PTRACE_TRACEME = 0  # <linux/ptrace.h>
_PTRACE_DETACH = 17
# the native launcher (launcher.c), built beside its source, one per machine type
LAUNCHER = Path(__file__).with_name(f"launcher-{platform.machine()}")
LAUNCHER_PROTOCOL = "autoprof-launcher/1"
# why it exited before the exec it was started for (launcher.c); any lower status: exec's errno
_LAUNCHER_TRACEME, _LAUNCHER_CPUS, _LAUNCHER_USAGE = 255, 254, 253
PING = b"ping\n"  # a control command with no effect but perf's "ack"
ACK = b"ack"
PERF_EXIT_GRACE_S = 10.0  # for perf to print its last interval once CMD is gone
_POLL_S = 0.05
# poll and ppoll by machine (arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/
# unistd.h: the generic table of arm64 and riscv has ppoll only)
_POLL_CALLS = {"x86_64": (7, 271), "aarch64": (73,), "riscv64": (73,)}


@functools.cache
def _ptrace() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    call = libc.ptrace
    call.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    call.restype = ctypes.c_long
    return call


def _trace_me(call: Any, cpus: frozenset[int] | None = None) -> None:
    """In the child between fork and exec (subprocess's preexec_fn): only a ctypes call
    prepared in the parent, no import; bound to `cpus` first (`--pin`: inherited by all it
    starts)."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    if call(_PTRACE_TRACEME, 0, None, None) != 0:
        raise OSError(ctypes.get_errno(), "PTRACE_TRACEME")


@functools.cache
def devnull() -> int:
    """/dev/null, open for reading for as long as autoprof runs: the standard input of every
    workload and perf (subprocess.DEVNULL opens and closes it again for each process)."""
    return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)


@functools.cache
def native_launcher() -> str | None:
    """The native launcher's path when it is built here (and executable), else None."""
    return str(LAUNCHER) if os.access(LAUNCHER, os.X_OK) else None


def _launcher_failed(name: str, status: int, cpus: frozenset[int] | None) -> AutoprofError:
    """What the launcher's exit `status` says (it exited before the exec of `name`)."""
    if status == _LAUNCHER_TRACEME:
        return AutoprofError(f"cannot start {name} held at its exec: {_traceme_refused()}")
    if status == _LAUNCHER_CPUS:
        listed = ",".join(map(str, sorted(cpus or ())))
        return AutoprofError(f"cannot run {name} on CPUs {listed}: the kernel refused them")
    if 0 < status < _LAUNCHER_USAGE:
        return AutoprofError(f"cannot run {name}: {os.strerror(status)}")
    return AutoprofError(f"{LAUNCHER} does not answer as {LAUNCHER_PROTOCOL}: run make install")


def resolve(name: str, env: Mapping[str, str] | None = None) -> str:
    """The program `name` runs (PATH searched as exec does); AutoprofError in one line when
    there is none or it may not be run."""
    path = shutil.which(name, path=(env or os.environ).get("PATH", os.defpath))
    if path is not None:
        return path
    if "/" in name and os.path.exists(name):
        reason = "is a directory" if os.path.isdir(name) else os.strerror(errno.EACCES)
        raise AutoprofError(f"cannot run {name}: {reason}")
    raise AutoprofError(f"command not found: {name}")


def _traceme_refused() -> str:
    """Why the kernel refuses PTRACE_TRACEME, as far as it can be told from here."""
    try:
        scope = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        scope = ""
    if scope == "3":
        return "PTRACE_TRACEME refused (kernel.yama.ptrace_scope=3 forbids ptrace)"
    if scope == "2":
        return "PTRACE_TRACEME refused (kernel.yama.ptrace_scope=2: root or CAP_SYS_PTRACE only)"
    return "PTRACE_TRACEME refused (a seccomp filter, or autoprof itself under a tracer?)"


def _until_polling(perf: Child, deadline: float) -> None:
    """Wait until perf sleeps in its event loop's poll (or `deadline`). A signal that finds
    perf stat elsewhere (still answering the ping, printing an interval) sets its `done` flag
    without interrupting a poll, and the loop ends without printing the last interval: a short
    workload lost every count that way in the lane, now and then."""
    delay = 0.0002
    while perf.poll() is None and not _in_poll(perf.pid) and time.monotonic() < deadline:
        time.sleep(delay)
        delay = min(delay * 2, 0.01)


def _in_poll(pid: int) -> bool:
    """Process `pid` sleeps in poll(2)/ppoll(2): its wait channel names poll (the kernel's
    do_sys_poll, poll_schedule_timeout), or, where the kernel hides wait channels, its system
    call is one of this machine's poll calls."""
    try:
        wchan = proc_text(f"/proc/{pid}/wchan").strip()
        if wchan not in ("", "0"):
            return "poll" in wchan
        number = proc_text(f"/proc/{pid}/syscall").split()[0]
    except (OSError, IndexError):
        return False
    return number.isdigit() and int(number) in _POLL_CALLS.get(platform.machine(), ())


def control_channel() -> tuple[int, int]:
    """One way of perf's control channel, (our end, perf's end): a socketpair, not a pipe. A
    pipe or FIFO can be opened again through /proc/PERF/fd/N by any process of the same user,
    the workload included, which could then write `disable` and switch its own counting off;
    a socket cannot be opened through /proc (ENXIO). Neither end is inheritable."""
    ours, perfs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return ours.detach(), perfs.detach()


def _until_ended(pid: int, ended: Callable[[], bool], deadline: float | None) -> bool:
    """Wait until `ended()` (child `pid` has ended), or until `deadline` (time.monotonic);
    whether it ended. Woken by the child's pidfd as it ends: a sleep between looks would add
    its length to every run (where the kernel has none, before Linux 5.3, it sleeps)."""
    try:
        poller: select.poll | None = select.poll()
        fd = os.pidfd_open(pid)
    except OSError:  # ENOSYS: no pidfd_open; ESRCH: reaped already (ended() says so)
        poller, fd = None, -1
    try:
        if poller is not None:
            poller.register(fd, select.POLLIN)
        delay = 0.0005
        while not ended():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            if poller is not None:
                poller.poll(None if left is None else max(1, math.ceil(left * 1000)))
            else:
                time.sleep(delay if left is None else min(delay, left))
                delay = min(delay * 2, _POLL_S)
        return True
    finally:
        if fd >= 0:
            os.close(fd)


def control_args(pid: int | str | None, ctl: int | str, ack: int | str) -> list[str]:
    """perf's target (`-p PID`; none for a system-wide profile) and its control channel."""
    target = ["-p", str(pid)] if pid is not None else []
    return [*target, "--control", f"fd:{ctl},{ack}"]


@dataclass
class Launch:
    """A workload and the perf that counts it (see the module's docstring).

    The workload is reaped only after perf has ended: perf stat stops at a target that is gone
    (`is_target_alive`: /proc/PID) without printing its last interval, so while perf runs the
    workload stays a zombie; it is waited for with WNOWAIT."""

    workload: Child
    perf: Child | None = None
    ran: bool = False  # detached: the workload ran its own instructions
    _ctl: int | None = field(default=None, repr=False)
    _ack: int | None = field(default=None, repr=False)

    @classmethod
    def spawn(
        cls,
        command: Sequence[str],
        *,
        env: Mapping[str, str],
        stdout: IO[bytes] | int | None = None,
        stderr: IO[bytes] | int | None = None,
        cpus: frozenset[int] | None = None,
        pass_fds: tuple[int, ...] = (),
        native: bool = True,
        program: str | None = None,
    ) -> Self:
        """Start `command` held at its exec (a group of its own), on `cpus` only when given,
        with `pass_fds` open in it (a region marker channel), through the native launcher
        when `native` and it is built; raises AutoprofError in one line when it cannot be run
        (not found, not executable, ptrace refused). `program`: the file `command[0]` names,
        when the caller resolved it once for many runs (`resolve`: a search of PATH)."""
        name = command[0]
        path = program or resolve(name, env)
        launcher = native_launcher() if native else None
        try:
            workload: Child
            if launcher is not None:  # vfork (posix_spawn): no code of ours in the child
                pin = "-" if cpus is None else ",".join(map(str, sorted(cpus)))
                workload = spawning.start(
                    [launcher, LAUNCHER_PROTOCOL, pin, path, name, *command[1:]],
                    env=env,
                    stdin=devnull(),
                    stdout=stdout,
                    stderr=stderr,
                    pass_fds=pass_fds,
                )
            else:
                workload = subprocess.Popen(
                    [name, *command[1:]],
                    executable=path,
                    stdin=devnull(),
                    stdout=stdout,
                    stderr=stderr,
                    env=dict(env),
                    process_group=0,
                    pass_fds=pass_fds,
                    preexec_fn=functools.partial(_trace_me, _ptrace(), cpus),
                )
        except subprocess.SubprocessError:  # the child's PTRACE_TRACEME failed
            raise AutoprofError(
                f"cannot start {name} held at its exec: {_traceme_refused()}"
            ) from None
        except OSError as err:
            raise AutoprofError(f"cannot run {name}: {err.strerror or err}") from None
        # the exec's SIGTRAP stop (waitid leaves any other outcome, a kill, to be reaped later)
        info = os.waitid(os.P_PID, workload.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
        if info is not None and info.si_code == os.CLD_TRAPPED:
            os.waitpid(workload.pid, 0)  # consume the stop
        elif info is not None and info.si_code == os.CLD_EXITED and launcher is not None:
            workload.wait()  # the launcher, before the exec: it says why
            raise _launcher_failed(name, info.si_status, cpus)
        return cls(workload)

    @property
    def pid(self) -> int:
        return self.workload.pid

    @property
    def perf_pid(self) -> int | None:
        return None if self.perf is None else self.perf.pid

    @property
    def workload_status(self) -> int | None:
        """The workload's end once reaped (Popen's returncode: -N for signal N)."""
        return self.workload.returncode

    def start_perf(
        self,
        argv: Sequence[str],
        *,
        attach: bool,
        env: Mapping[str, str],
        stdout: IO[bytes] | int | None = None,
        stderr: IO[bytes] | int | None = None,
    ) -> list[str]:
        """Start perf (`argv`: `perf stat` and its options, no target) in the workload's
        group, attached to the workload (`attach`) or counting system-wide; returns the argv
        it runs."""
        self._ctl, ctl_read = control_channel()
        self._ack, ack_write = control_channel()
        full = [*argv, *control_args(self.pid if attach else None, ctl_read, ack_write)]
        try:
            self.perf = spawning.start(
                full,
                env=env,
                stdin=devnull(),
                stdout=stdout,
                stderr=stderr,
                pass_fds=(ctl_read, ack_write),
                process_group=self.pid,
            )
        except OSError as err:
            raise AutoprofError(f"cannot start perf: {err.strerror or err}") from None
        finally:
            os.close(ctl_read)
            os.close(ack_write)
        return full

    def release(
        self, deadline: float | None = None, counting: Callable[[], None] | None = None
    ) -> bool:
        """Wait until perf counts (its ack), call `counting` (the workload still held: a
        region relay takes perf's counters then), then let the workload run. False when perf
        exited first (it could not open its events): the workload is then killed before its
        first instruction. subprocess.TimeoutExpired when `deadline` (time.monotonic) passes
        first. Call it from the thread that spawned the workload (its tracer)."""
        if not self.ran and not self.exited() and self._await_ack(deadline):
            if counting is not None:
                counting()
            self.ran = _ptrace()(_PTRACE_DETACH, self.pid, None, None) == 0
        if not self.ran:
            self.kill()
        return self.ran

    def _await_ack(self, deadline: float | None) -> bool:
        assert self.perf is not None and self._ctl is not None and self._ack is not None
        return await_ack(self.perf, self._ctl, self._ack, deadline)

    def exited(self) -> bool:
        """The workload has ended (reaped or not)."""
        if self.workload.returncode is not None:
            return True
        flags = os.WEXITED | os.WNOWAIT | os.WNOHANG
        return os.waitid(os.P_PID, self.pid, flags) is not None

    def wait_exit(self, timeout: float | None = None) -> None:
        """Until the workload has ended, leaving it unreaped; TimeoutExpired after `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not _until_ended(self.pid, self.exited, deadline):
            raise subprocess.TimeoutExpired(self.workload.args, timeout or 0)

    def kill(self) -> None:
        """Kill the workload, held or running (reaped by `finish`)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def finish(self, grace: float = PERF_EXIT_GRACE_S) -> int | None:
        """Once the workload has ended: tell perf to stop (SIGCHLD: it prints its last
        interval, or its counts) and wait for it, killing a perf that does not stop within
        `grace`; then reap the workload. Returns perf's exit code (None without a perf)."""
        code = None if self.perf is None else end_perf(self.perf, grace)
        self.workload.wait()
        self.close()
        return code

    def stop(self) -> int | None:
        """Stop everything (a timeout, a signal): a workload still held is killed before it
        ran; a running one with its whole group, perf in it, as `process.stop_group` does
        (SIGINT first: perf writes what it counted). Returns perf's exit code."""
        if not self.ran:
            self.kill()
        elif self.perf is not None:
            perf = self.perf
            stop_processes(self.pid, lambda: perf.poll() is not None and self.exited())
        return self.finish()

    def close(self) -> None:
        for fd in (self._ctl, self._ack):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._ctl = self._ack = None


def await_ack(perf: Child, ctl: int, ack: int, deadline: float | None) -> bool:
    """Ping perf on its control pipe (`ctl`) and wait for its answer (`ack`): its counters are
    open. False when perf exited first; subprocess.TimeoutExpired when `deadline` passes."""
    try:
        os.write(ctl, PING)
    except BrokenPipeError:
        return False  # perf is gone
    reply = b""
    while ACK not in reply:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise subprocess.TimeoutExpired(perf.args, 0)
        # perf may take a while to open many events (uncore boxes): wait, in steps
        ready, _, _ = select.select([ack], [], [], min(left or 1.0, 1.0))
        if ready:
            chunk = os.read(ack, 64)
            if not chunk:
                return False  # perf exited: its end of the pipe closed
            reply += chunk
    return True


def end_perf(perf: Child, grace: float = PERF_EXIT_GRACE_S) -> int:
    """Tell perf to stop (SIGCHLD once it waits in its event loop: it prints its last interval,
    or its counts) and wait for it, killing a perf that does not stop within `grace`."""
    _until_polling(perf, time.monotonic() + grace)
    with contextlib.suppress(ProcessLookupError):
        os.kill(perf.pid, signal.SIGCHLD)
    # woken by perf's pidfd as it ends: Popen.wait(timeout) sleeps up to 50 ms between looks
    if not _until_ended(perf.pid, lambda: perf.poll() is not None, time.monotonic() + grace):
        perf.kill()
    return perf.wait()
