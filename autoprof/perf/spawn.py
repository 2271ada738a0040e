"""Starting a run's processes (the workload's launcher, perf) with posix_spawn instead of
subprocess.Popen: the same child, for less of autoprof's CPU at every run.

Popen builds the child's environment in Python (two `os.fsencode` a variable: ~160 calls a run
for perf's and the workload's ~40 variables), sets up its error pipe and reads it back: ~0.2 ms
of CPU a process where os.posix_spawn (vfork in glibc, its environment encoded in C) takes
~0.1 ms. What Popen's `close_fds` gave, that a child inherits only the descriptors it is given,
is kept another way: Python opens every descriptor close-on-exec (PEP 446), and those this
process was started with open are made close-on-exec once, before its first child
(`_private`). A descriptor given to the child (`pass_fds`) is duplicated onto itself, which
clears its close-on-exec flag in the child only (POSIX.1-2024 posix_spawn_file_actions_adddup2;
glibc since 2.29, `usable`): where that cannot be relied on, `start` falls back to Popen.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

Stream = IO[bytes] | int | None
# what Popen's restore_signals gives back their default in a child (Python ignores them)
_RESTORED = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name)
)


@dataclass(eq=False)
class Spawned:
    """A child started by `start`: what autoprof asks of subprocess.Popen (pid, args,
    returncode, poll, wait, kill), with Popen's answers."""

    pid: int
    args: list[str]
    returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code once the child has ended and is reaped (-N: killed by signal N)."""
        if self.returncode is None:
            self._reaped(os.WNOHANG)
        return self.returncode

    def wait(self) -> int:
        """Reap the child, waiting until it ends."""
        while self.returncode is None:
            self._reaped(0)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def _reaped(self, flags: int) -> None:
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): 0, as Popen says
            pid, status = self.pid, 0
        if pid:
            self.returncode = os.waitstatus_to_exitcode(status)


@functools.cache
def usable() -> bool:
    """posix_spawn's dup2(fd, fd) gives the child `fd` (glibc 2.29 and later clear its
    close-on-exec flag; older ones leave it, and the child would not have it)."""
    try:
        name, _, version = (os.confstr("CS_GNU_LIBC_VERSION") or "").partition(" ")
        major, minor = (int(part) for part in version.split(".")[:2])
    except (ValueError, OSError, AttributeError):  # not glibc
        return False
    return name == "glibc" and (major, minor) >= (2, 29)


@functools.cache
def _private() -> None:
    """Make close-on-exec every descriptor this process was started with (beyond 0-2) that is
    not yet: a child gets none but what it is given, as Popen's close_fds=True made it."""
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed now
                if fd > 2 and os.get_inheritable(fd):
                    os.set_inheritable(fd, False)


def _fd(stream: Stream) -> int | None:
    return stream if stream is None or isinstance(stream, int) else stream.fileno()


def start(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    stdin: Stream = None,
    stdout: Stream = None,
    stderr: Stream = None,
    pass_fds: tuple[int, ...] = (),
    process_group: int = 0,
    executable: str | None = None,
) -> Spawned | subprocess.Popen:
    """Start `argv` in process group `process_group` (0: a group of its own), with standard
    streams `stdin`, `stdout` and `stderr` (None: this process's) and `pass_fds` open in it as
    they are here. `executable` is the file run, else argv[0], searched on `env`'s PATH as
    Popen searches it when it names no folder. OSError when it cannot be run, as Popen
    raises it."""
    program = executable or argv[0]
    streams = ((_fd(stdin), 0), (_fd(stdout), 1), (_fd(stderr), 2))
    # a stream given as another of 0-2 would be overwritten before it is read: Popen orders that
    if not usable() or any(fd is not None and fd < 3 and fd != to for fd, to in streams):
        return subprocess.Popen(
            list(argv),
            executable=program,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            env=dict(env),
            pass_fds=pass_fds,
            process_group=process_group,
        )
    _private()
    if "/" not in program:
        found = shutil.which(program, path=env.get("PATH", os.defpath))
        if found is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        program = found
    actions = [(os.POSIX_SPAWN_DUP2, fd, to) for fd, to in streams if fd is not None and fd != to]
    actions += [(os.POSIX_SPAWN_DUP2, fd, fd) for fd in pass_fds]
    pid = os.posix_spawn(
        program,
        list(argv),
        env,
        file_actions=actions,
        setpgroup=process_group,
        setsigdef=_RESTORED,
    )
    return Spawned(pid, list(argv))


Child = Spawned | subprocess.Popen  # what `start` returns
