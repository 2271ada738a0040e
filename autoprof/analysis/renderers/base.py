"""The renderers' one contract (pyinstrument's renderers): a renderer writes an analysis result
in one format, chosen by the output file's extension."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from pathlib import Path

    from autoprof.analysis.tables import Result


class Renderer(ABC):
    """`render(result, path)`: `path` is a file with one of `extensions` (one output), a folder
    (the result's default files of this format, under their default names), or None (the
    renderer's own place: the terminal, standard output)."""

    extensions: ClassVar[tuple[str, ...]]

    @abstractmethod
    def render(self, result: Result, path: Path | None) -> list[Path]:
        """Write `result`; return the files written."""
