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
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    open_args["mode"] = "w" if text else "wb"
    if text:
        open_args.setdefault("encoding", "utf-8")
    if _special(path):  # /dev/null, a pipe, a terminal: written as it is, never replaced
        with open(path, **open_args) as file:
            yield file
        return
    create = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        try:
            fd = os.open(tmp, create, mode)
        except FileExistsError:  # a crashed writer's: the new file must get `mode`
            tmp.unlink()
            fd = os.open(tmp, create, mode)
        with open(fd, **open_args) as file:
            yield file
        tmp.replace(path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        if err.filename in (None, str(tmp)):
            raise OSError(err.errno, err.strerror, str(path)) from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _special(path: Path) -> bool:
    """Whether `path` is there and no regular file (a device, a pipe; links followed)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False


def write(path: Path, data: str | bytes, mode: int = 0o666) -> None:
    """`data` into `path`, whole or not at all (`replacing`); text as UTF-8."""
    with replacing(path, mode, text=isinstance(data, str)) as file:
        file.write(data)
