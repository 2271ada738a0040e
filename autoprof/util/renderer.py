"""The one renderer contract (pyinstrument's renderers): an object that writes one kind of
result in one format, so that commands only choose a renderer and never draw themselves.

`Renderer[T].render(data, path)` writes `data` (a T) to `path`: a file with one of
`extensions` (one output), a folder (the default files of this format, under their default
names), or None (the renderer's own place: the terminal, standard output); it returns the files
written. `RichRenderer` is the base of every renderer that draws rich text: it prints to the
command's console, or the same text to a file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

T = TypeVar("T")

FILE_WIDTH = 100_000  # a file has no terminal width: never wrap a table's lines


class Renderer(ABC, Generic[T]):
    extensions: ClassVar[tuple[str, ...]]

    @abstractmethod
    def render(self, data: T, path: Path | None) -> list[Path]:
        """Write `data`; return the files written."""


class RichRenderer(Renderer[T]):
    """Rich text: `console` is where a None path prints (the command's console, which knows the
    terminal); a path gets the same text without colours or wrapping."""

    extensions = (".txt",)

    def __init__(self, console: Console | None = None):
        self.console = console

    def render(self, data: T, path: Path | None) -> list[Path]:
        from rich.console import Console

        if path is None:
            self.draw(data, self.console or Console(highlight=False))
            return []
        with path.open("w", encoding="utf-8") as handle:
            self.draw(data, Console(file=handle, width=FILE_WIDTH, highlight=False))
        return [path]

    @abstractmethod
    def draw(self, data: T, console: Console) -> None:
        """Print `data` on `console`."""
