"""A long text stream (an instruction trace, an emulator's log) read in blocks of whole lines,
a few MB each, so that regular expressions work on a block at C speed and nothing is done per
line in Python."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

BLOCK_BYTES = 1 << 22


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def read_blocks(stream: Readable, size: int = BLOCK_BYTES) -> Iterator[bytes]:
    """A binary stream in blocks of whole lines of about `size` bytes (the last may lack its
    newline)."""
    rest = b""
    while chunk := stream.read(size):
        chunk = rest + chunk
        cut = chunk.rfind(b"\n") + 1
        rest = chunk[cut:]
        if cut:
            yield chunk[:cut]
    if rest:
        yield rest
