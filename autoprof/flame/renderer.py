"""Flame-graph renderers: one folded profile -> one output format, behind autoprof's one
renderer contract (`autoprof.util.renderer`): ``renderer.render(folded)`` is the text, which
`util.renderer.write` puts where the user's -o names (standard output for ``-``). One module
per format: `svg.py`, `speedscope.py`, and the folded text (below), as pyinstrument's
`renderers/`."""

from __future__ import annotations

from abc import abstractmethod

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

    @abstractmethod
    def render(self, data: Folded) -> str:
        """The output for `data`."""


class FoldedRenderer(FlameRenderer):
    """FlameGraph's folded stacks, byte for byte what stackcollapse-perf.pl writes; with a
    `baseline` (BEFORE), its two-column differential form."""

    def __init__(self, baseline: Folded | None = None) -> None:
        self.baseline = baseline

    def render(self, folded: Folded) -> str:
        if self.baseline is not None:
            return "".join(diff_folded_lines(self.baseline, folded))
        return "".join(folded_lines(folded))
