"""A run's standard output and error without a new file per run when it writes none.

Most workloads of a plan of many short runs write nothing, yet a file made for each stream of
each run cost the profile two inode allocations a run: on ext4 without a journal (this project's
VMs) the allocation skips every inode deleted in the last minutes (fs/ext4/ialloc.c,
`recently_deleted`), 0.3-1 ms of CPU a file where other programs churn files.

So each stream is written into a spool in `out/` (`stdout.spool`, `stderr.spool`), opened anew
for each run (a description of its own, given to the workload and perf). Once every process of
the run has ended, a spool that was written becomes the run's file (renamed into its folder:
`stdout.txt`, `stderr.txt`, as before) and the next run gets a new one; an empty spool serves the
next run, unless some process still holds it open for writing (a daemon the workload left,
inheriting its output): then it goes to the run's folder too, empty, so what that process writes
later lands in the run it came from, never in the next. Whether anyone holds it is the kernel's
answer to a read lease (fcntl F_SETLEASE), which it grants only to a file no one has open for
writing; where leases are refused (some network filesystems), every spool is handed over.

A run folder without `stdout.txt` or `stderr.txt` had nothing written to that stream. While a
run is under way its output is in the spools (`live`: the web's job page shows them).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from autoprof.run import outdir
from autoprof.util.owned import open_file

SUFFIX = ".spool"
STREAMS = (outdir.STDOUT, outdir.STDERR)
_SPOOLS = {stream: Path(stream).stem + SUFFIX for stream in STREAMS}  # stdout.txt: stdout.spool
NAMES = frozenset(_SPOOLS.values())  # what out/ may hold


def spool_path(out: Path, stream: str) -> str:
    """`out/stdout.spool` for `stdout.txt`: the spool of a stream of the run under way (a
    string: four a run, pathlib's joins cost more than the rest of the spool's work)."""
    return os.path.join(out, _SPOOLS[stream])


def live(out: Path, folder: Path, stream: str) -> Path:
    """Where a stream of run `folder` is: its file once the run ended, else the spool."""
    done = folder / stream
    return done if done.exists() else Path(spool_path(out, stream))


@contextlib.contextmanager
def outputs(out: Path, folder: Path) -> Iterator[tuple[int, int]]:
    """(stdout, stderr) descriptors for one run's processes, whose spools are settled into
    `folder` when the block ends, however it ends: call it around the whole run, processes
    reaped."""
    fds: list[int] = []
    try:
        for stream in STREAMS:
            fds.append(open_file(spool_path(out, stream), os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
        yield fds[0], fds[1]
    finally:
        for fd in fds:
            os.close(fd)  # before the lease is asked: our own description would refuse it
        for stream in STREAMS[: len(fds)]:
            settle(spool_path(out, stream), os.path.join(folder, stream))


def clear(out: Path) -> None:
    """Remove the spools a profiler that died left (output of a run it never finished, whose
    folder is made anew when it runs again): call it holding the folder's lock."""
    for stream in STREAMS:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(spool_path(out, stream))


def settle(spool: str, destination: str) -> None:
    """Hand `spool` over to the run as `destination` when it holds output or a process may
    still write it; else leave it for the next run."""
    try:
        written = os.stat(spool, follow_symlinks=False).st_size > 0
    except FileNotFoundError:
        return
    if written or held(spool):
        os.rename(spool, destination)


def held(path: str | Path) -> bool:
    """Some process has `path` open for writing (or the kernel cannot tell: True)."""
    try:
        fd = open_file(path, os.O_RDONLY)
    except OSError:
        return True
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    except OSError:  # EAGAIN: open for writing; EINVAL, ENOLCK: no leases here
        return True
    else:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        return False
    finally:
        os.close(fd)
