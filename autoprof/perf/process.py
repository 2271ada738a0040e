"""perf and its workload as one process group: stopping it whole, and the signals that ask to.

perf runs in a session of its own (`start_new_session=True`), so its process group holds perf,
the workload and whatever the workload started, and nothing else. `stop_group` ends all of it:
SIGINT first (perf then writes what it counted), then SIGTERM, then SIGKILL, each after a grace
period while perf or any process of the group is still alive, so a workload that ignores
SIGINT (or SIGTERM) is never left running.

`Stopper` turns SIGINT, SIGTERM and SIGHUP into `Interrupted(signum)`, raised in the main thread,
except inside `deferred()` sections (starting perf, appending to the journal) where it is raised
when the section ends: a signal never leaves a started perf unknown or a journal line cut short.
After the first signal the stopper raises no more, so a second Ctrl-C cannot abandon a stop.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from autoprof.errors import AutoprofError

STOP_GRACE_S = 2.0
# autoprof's own settings (AUTOPROF_STORE holds the store URL with its password, AUTOPROF_REDIS
# the queue's): a measured program has no business reading them (issue #23, item 3).
OWN_PREFIX = "AUTOPROF_"
NONCE_VAR = "AUTOPROF_RUN_NONCE"  # in perf's environment alone (stop_leftovers)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_POLL_S = 0.01
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_DEATH_RELAY = signal.SIGUSR2  # see die_with_parent
_PR_SET_DUMPABLE = 4
_COERCED = ("C.UTF-8", "C.utf8", "UTF-8")  # the locales of PEP 538's coercion


def command_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a command autoprof starts for perf to count (`perf.launch`): `base`
    (this process's) less autoprof's own AUTOPROF_* settings and less the LC_CTYPE Python sets
    itself in the C locale (PEP 538), so that the command runs in the user's environment (a
    locale changes what a program does)."""
    env = {k: v for k, v in (os.environ if base is None else base).items()}
    if base is None and _coerced_locale():
        del env["LC_CTYPE"]
    return {k: v for k, v in env.items() if not k.upper().startswith(OWN_PREFIX)}


def _coerced_locale() -> bool:
    """Python set LC_CTYPE at start-up (PEP 538): this process was not given one."""
    if os.environ.get("LC_CTYPE") not in _COERCED:
        return False
    try:
        given = Path("/proc/self/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return not any(item.startswith(b"LC_CTYPE=") for item in given)


def workload_env(
    base: Mapping[str, str] | None = None, job: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment perf starts with (and a workload perf starts itself: `bench`,
    `record`, with the `job`'s variables: a web job's, checked by its server): `command_env`,
    in the C locale so that perf's numbers parse."""
    return command_env(base) | dict(job or {}) | {"LC_ALL": "C"}


class Interrupted(Exception):
    """A signal (Ctrl-C, SIGTERM, SIGHUP) stopped the work; what finished is kept."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + the signal number (130 for Ctrl-C)."""
        return 128 + self.signum


def group_members(pgid: int, proc: Path = Path("/proc")) -> list[int]:
    """The live (not zombie) processes of process group `pgid`, read from /proc."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []  # the common case, answered by one system call
    except PermissionError:
        pass
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def start_perf(argv: list[str], out: Any, err: Any, env: Mapping[str, str]) -> subprocess.Popen:
    """perf (`argv`, from `perf.command`) leading a session of its own, so that `stop_group`
    ends it and whatever it started; AutoprofError in one line when it cannot be started."""
    try:
        return subprocess.Popen(
            argv,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as error:
        raise AutoprofError(f"cannot start perf: {error}") from None


def stop_group(
    proc: subprocess.Popen,
    grace: float = STOP_GRACE_S,
    signals: tuple[int, ...] = STOP_SIGNALS,
) -> int:
    """Stop `proc` (the leader of its own process group) and every process of its group, with
    `signals` in turn, `grace` seconds apart while any of them lives. Returns proc's exit code."""
    stop_processes(proc.pid, lambda: proc.poll() is not None, grace, signals)
    return proc.wait()


def stop_processes(
    group: int,
    ended: Callable[[], bool],
    grace: float = STOP_GRACE_S,
    signals: tuple[int, ...] = STOP_SIGNALS,
) -> None:
    """Send process group `group` `signals` in turn, `grace` seconds apart, until `ended()`
    (the caller's own children are done) and no live process is left in the group."""
    for sig in signals:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, sig)
        deadline = time.monotonic() + grace
        while True:
            if ended() and not group_members(group):
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(_POLL_S)


class Stopper:
    """Installs handlers for SIGINT, SIGTERM and SIGHUP (main thread only; elsewhere a no-op)
    that raise `Interrupted`; restores the previous handlers on exit."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._depth = 0
        self._previous: dict[int, signal._HANDLER] = {}

    def __enter__(self) -> Stopper:
        if threading.current_thread() is threading.main_thread():
            # installed even when started with SIGINT ignored (`cmd &`): Ctrl-C must stop it
            self._previous = {sig: signal.signal(sig, self._handle) for sig in HANDLED}
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame) -> None:
        if self.signum is not None:
            return  # already stopping
        self.signum = signum
        if not self._depth:
            raise Interrupted(signum)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """A section a signal must not cut: a signal that arrives in it is raised at its end."""
        before = self.signum
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if before is None and self.signum is not None and not self._depth:
            raise Interrupted(self.signum)


def start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat field 22): with the
    pid it names one process, also after the pid is used again; None when there is none."""
    try:
        stat = proc_text(f"/proc/{pid}/stat")
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def proc_text(path: str) -> str:
    """A small /proc file's text in one read: a tenth of `Path.read_text`'s cost, read at
    every run's start and end."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 4096).decode(errors="replace")
    finally:
        os.close(fd)


def stop_leftovers(
    perfs: Iterable[tuple[int, str]], workloads: Iterable[tuple[int, int]] = ()
) -> list[int]:
    """Kill what a dead profiler left running: each of `perfs` ((pid, nonce) of the perf of a
    run its run.json says is unfinished) that is still that perf, with the process group it is
    in (its workload's, or its own for an attached run), and each of `workloads` ((pid,
    start_time) of the command it started, which leads its group) that is still that very
    process: a workload whose perf died too (the profiler died before perf acked) would run on
    uncounted. Returns the pids of the perfs and workloads stopped.

    perf and the workload run in a process group of their own (so that a timeout can stop them
    together), which also means they outlive a profiler killed with SIGKILL and would disturb
    whatever is measured next. Only a process of this user is killed (a record may name any
    pid), and only a perf that has the nonce in its environment, outside this process's own
    group, or the recorded workload itself by its start time: a pid may have been reused since.
    """
    killed, groups = [], set()
    for pid, nonce in perfs:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            group = os.getpgid(pid)
            if comm == "perf" and group != os.getpgrp() and _has_nonce(pid, nonce):
                os.killpg(group, signal.SIGKILL)
                killed.append(pid)
                groups.add(group)
        except (OSError, ProcessLookupError):
            continue  # gone already
    for pid, started in workloads:
        if pid in groups or start_time(pid) != started or not _mine(pid):
            continue
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


def _mine(pid: int) -> bool:
    """Process `pid` runs as this user (its real and effective uid)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.geteuid()
    except OSError:
        return False


def _has_nonce(pid: int, nonce: str) -> bool:
    """Process `pid` is this user's and was started with NONCE_VAR=`nonce`."""
    if not nonce or not _mine(pid):
        return False
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{NONCE_VAR}={nonce}".encode() in environ


def keep_private() -> None:
    """Close this process's memory and environment to the programs it measures (prctl
    PR_SET_DUMPABLE 0). A workload runs as the user who runs autoprof, and the server, a worker
    and a web job hold the store's URL with its password: in their environment
    (AUTOPROF_STORE), readable in /proc/PID/environ, and in their memory (/proc/PID/mem,
    ptrace). The kernel opens those of a process that is not dumpable only to a caller with
    CAP_SYS_PTRACE (kernel/ptrace.c, __ptrace_may_access; fs/proc/base.c, environ_open and
    mem_open go through it). Children get dumpable again at execve: perf and the workload are
    unchanged; no core dump is written of this process."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


def die_with_parent(parent: int, signum: int = signal.SIGTERM) -> None:
    """Have `signum` sent to this process, once, when its parent (pid `parent`) dies; sent at
    once when the parent is gone already. A process that handles `signum` as `Stopper` does
    stops its perf group before it exits, so nothing it started outlives a parent killed with
    SIGKILL.

    Once: the kernel sends the parent-death signal (prctl PR_SET_PDEATHSIG) each time the
    thread that is this process's parent exits while another thread of that process lives: the
    child is handed to the next live thread and signalled again (kernel/exit.c,
    forget_original_parent, after find_new_reaper's find_alive_thread). A killed worker's four
    threads sent its horse SIGTERM twice, 36 ms apart; the second came after the horse's
    Stopper had taken the first and ended, met SIGTERM's default action and killed the horse
    before it recorded why its job failed. So the kernel sends PARENT_DEATH_RELAY, whose
    handler sends `signum` the first time and ignores the relay from then on."""

    def relay(relayed: int, frame: object) -> None:
        signal.signal(relayed, signal.SIG_IGN)
        os.kill(os.getpid(), signum)

    signal.signal(PARENT_DEATH_RELAY, relay)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(PARENT_DEATH_RELAY), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # died between fork and prctl: the kernel will not tell us
        os.kill(os.getpid(), signum)
