"""Files written whole or not at all: into a temp file of this process and thread beside the
file asked for, then renamed over it. A full disk (or Ctrl-C) leaves no half file, an older
file stays until the new one is whole, and the error names the file asked for (a failed
write names none: `No space left on device` alone told the user nothing)."""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def replacing(
    path: Path, mode: int = 0o666, text: bool = False, **open_args: Any
) -> Iterator[IO[Any]]:
    """A new file to write `path`'s content into (binary, or UTF-8 `text`; `open_args` as
    `open`'s, newline=""), renamed over `path` when the block ends without an error, else
    removed. `mode`: the file's permissions before the umask. The temp file is made anew
    (O_EXCL: never a file or link someone left under its name)."""
    path = Path(path)
    open_args["mode"] = "w" if text else "wb"
    if text:
        open_args.setdefault("encoding", "utf-8")
    if _special(path):  # /dev/null, a pipe, a terminal: written as it is, never replaced
        with open(path, **open_args) as file:
            yield file
        return
    tmp, fd = _created(path, mode)
    try:
        with open(fd, **open_args) as file:
            yield file
        os.replace(tmp, path)
    except BaseException as err:
        _failed(path, tmp, err)
        raise


def write(path: Path, data: str | bytes, mode: int = 0o666) -> None:
    """`data` into `path`, whole or not at all, as `replacing` writes it (text as UTF-8), with
    no file object: a run's record is written this way at every run."""
    raw = data.encode() if isinstance(data, str) else data
    if _special(path):
        with open(path, "wb") as file:
            file.write(raw)
        return
    tmp, fd = _created(path, mode)
    try:
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as err:
        _failed(path, tmp, err)
        raise


def _created(path: Path, mode: int) -> tuple[str, int]:
    """A new temp file beside `path`, of this process and thread: (its name, its descriptor)."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    create = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    try:
        try:
            return tmp, os.open(tmp, create, mode)
        except FileExistsError:  # a crashed writer's: the new file must get `mode`
            os.unlink(tmp)
            return tmp, os.open(tmp, create, mode)
    except OSError as err:
        raise _named(err, path, tmp) from None


def _failed(path: Path, tmp: str, err: BaseException) -> None:
    """The temp file removed; an OSError about it raised as one about `path`."""
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    if isinstance(err, OSError):
        named = _named(err, path, tmp)
        if named is not err:
            raise named from None


def _named(err: OSError, path: Path, tmp: str) -> OSError:
    """`err` naming the file asked for where it named the temp file or none."""
    if err.filename in (None, tmp):
        return OSError(err.errno, err.strerror, str(path))
    return err


def _special(path: Path) -> bool:
    """Whether `path` is there and no regular file (a device, a pipe; links followed)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
