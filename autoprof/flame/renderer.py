"""Flame-graph renderers: one folded profile -> one output format, behind autoprof's one
renderer contract (`autoprof.util.renderer`): ``renderer.render(folded, path)`` writes the file
the user's -o names (standard output for None or ``-``); ``renderer.text(folded)`` is the text
itself. One module per format: `svg.py`, `speedscope.py`, and the folded text (below), as
pyinstrument's `renderers/`."""

from __future__ import annotations

import sys
from abc import abstractmethod
from pathlib import Path

from autoprof.errors import AutoprofError
from autoprof.flame.diff import diff_folded_lines
from autoprof.flame.fold import Folded, folded_lines
from autoprof.util.renderer import Renderer


def clean(text: str) -> str:
    """Text every output format accepts: undecodable bytes (kept by the parser as surrogate
    escapes) become U+FFFD, control characters go."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return "".join(ch for ch in text if ch >= " " or ch == "\t")


class FlameRenderer(Renderer[Folded]):
    extensions = (".svg", ".folded", ".json", ".txt")

    def render(self, data: Folded, path: Path | None) -> list[Path]:
        text = self.text(data)
        if path is None or str(path) == "-":
            sys.stdout.write(text)
            return []
        try:
            path.write_text(text, errors="surrogateescape")
        except OSError as err:
            raise AutoprofError(f"cannot write {path}: {err.strerror}") from err
        return [path]

    @abstractmethod
    def text(self, folded: Folded) -> str:
        """The output for `folded`."""


class FoldedRenderer(FlameRenderer):
    """FlameGraph's folded stacks, byte for byte what stackcollapse-perf.pl writes; with a
    `baseline` (BEFORE), its two-column differential form."""

    def __init__(self, baseline: Folded | None = None) -> None:
        self.baseline = baseline

    def text(self, folded: Folded) -> str:
        if self.baseline is not None:
            return "".join(diff_folded_lines(self.baseline, folded))
        return "".join(folded_lines(folded))
