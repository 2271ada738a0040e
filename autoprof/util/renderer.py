"""The one renderer contract (pyinstrument's renderers): an object that turns one kind of result
into one output format, so that commands only choose a renderer and never draw themselves; and
the one writer that puts an output where the user asked.

`Renderer[T].render(data)` returns the output for `data` (a T): text or bytes, written nowhere.
`write(output, target, name)` writes it: `-` (or None) is standard output, a folder gets it as
`name` inside, any other path is the file itself; a path that cannot be written is one line.
`RichRenderer` is the base of every renderer that draws rich text: the text the command's
console would print (a terminal's width and colours), or plain and never wrapped for a file.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from autoprof.errors import AutoprofError
from autoprof.util import atomic

if TYPE_CHECKING:
    from rich.console import Console

T = TypeVar("T")

FILE_WIDTH = 100_000  # a file has no terminal width: never wrap a table's lines
STDOUT = "-"


class Renderer(ABC, Generic[T]):
    extensions: ClassVar[tuple[str, ...]]  # the files it makes; the first is its default

    @abstractmethod
    def render(self, data: T) -> str | bytes:
        """The output for `data`."""


def is_stdout(target: Path | str | None) -> bool:
    return target is None or str(target) == STDOUT


def write(output: str | bytes, target: Path | str | None, name: str | None = None) -> Path | None:
    """Write `output` to standard output (`target` None or `-`), into the folder `target` as
    `name` (when `target` is a folder and `name` is given) or to the file `target`; the file
    written (None for standard output). AutoprofError, in one line, when it cannot be written."""
    if is_stdout(target):
        if isinstance(output, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(output)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(output)
        return None
    path = Path(str(target))
    if name is not None and path.is_dir():
        path = path / name
    try:
        if isinstance(output, str):
            output = output.encode("utf-8", errors="surrogateescape")
        atomic.write(path, output)  # whole or not at all: a full disk leaves no half file
    except OSError as err:
        raise AutoprofError(f"cannot write {path}: {err.strerror}") from err
    return path


class RichRenderer(Renderer[T]):
    """Rich text: drawn for a terminal like `console` (its width and colours) when one is
    given, else plain and unwrapped, as a file wants it."""

    extensions = (".txt",)

    def __init__(self, console: Console | None = None):
        self.console = console

    def render(self, data: T) -> str:
        from rich.console import Console

        console = self.console or Console(width=FILE_WIDTH, highlight=False, color_system=None)
        with console.capture() as captured:  # as `console` would print it, colours and all
            self.draw(data, console)
        return captured.get()

    @abstractmethod
    def draw(self, data: T, console: Console) -> None:
        """Print `data` on `console`."""
