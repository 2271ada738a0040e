"""Named regions for `autoprof profile --region NAME`, for Python programs.

    from autoprof.markers import region

    with region("solve"):
        solve()

    @region("parse")
    def parse(text): ...

Under autoprof, the environment variable `ENV` names an inherited file descriptor: a Unix
SOCK_SEQPACKET socket. A marker sends one message, ``B <tid> <name>`` or ``E <tid> <name>``
(`message`), and waits for autoprof's one-byte answer: autoprof reads every counter while
the thread waits, so a region counts exactly from its entry to its exit (plus the marker's
own instructions). One thread of the process passes a marker at a time (a lock), so each
answer reaches the thread that asked. Not under autoprof, a marker is an attribute load and a
branch. This module imports only the standard library's `os` and `threading` (and, under
autoprof, `socket`, to check the descriptor is the channel): a workload pays nothing else.
The C header is `autoprof.h` beside this file (`autoprof markers --cflags`).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["ENV", "NAME_MAX", "begin", "end", "message", "region"]

ENV = "AUTOPROF_MARKERS"
NAME_MAX = 64  # bytes of a region's name; longer names are cut
ACK = b"\x01"

F = TypeVar("F", bound=Callable[..., Any])


def message(op: str, tid: int, name: str | bytes) -> bytes:
    """The bytes of one marker: `op` ``B`` (begin) or ``E`` (end), the thread, the name (UTF-8,
    cut at NAME_MAX bytes)."""
    raw = name.encode() if isinstance(name, str) else bytes(name)
    return b"%s %d %s" % (op.encode(), tid, raw[:NAME_MAX])


def _channel() -> int | None:
    """The channel's descriptor, when the variable names one that is autoprof's socket (not a
    file the program opened at that number)."""
    text = os.environ.get(ENV, "")
    if not text.isdigit():
        return None
    import socket

    try:
        with socket.socket(fileno=os.dup(int(text))) as channel:
            return int(text) if channel.type == socket.SOCK_SEQPACKET else None
    except OSError:
        return None


_fd = _channel()
_lock = threading.Lock()


def _after_fork() -> None:  # a lock held by another thread at fork would never be released
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def _mark(op: str, name: str | bytes) -> None:
    fd = _fd
    if fd is None:
        return
    with _lock:
        os.write(fd, message(op, threading.get_native_id(), name))
        os.read(fd, 1)


def begin(name: str | bytes) -> None:
    """Enter region `name` (regions nest and repeat; entries accumulate)."""
    _mark("B", name)


def end(name: str | bytes) -> None:
    """Leave region `name`, the innermost one this thread entered."""
    _mark("E", name)


class region:  # lower case: used as `with region(...)` and `@region(...)`, like contextlib's
    """A named region, as a context manager or a decorator."""

    __slots__ = ("name",)

    def __init__(self, name: str | bytes):
        self.name = name

    def __enter__(self) -> region:
        if _fd is not None:
            _mark("B", self.name)
        return self

    def __exit__(self, *exc: object) -> None:
        if _fd is not None:
            _mark("E", self.name)

    def __call__(self, function: F) -> F:
        @functools.wraps(function)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self:
                return function(*args, **kwargs)

        return wrapped  # type: ignore[return-value]
