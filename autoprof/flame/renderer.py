"""Renderers turn one folded profile into one output format; always call them as
``text = renderer.render(folded)``; the user's -o names the file. One module per format:
`svg.py`, `speedscope.py`, and the folded text itself (`FoldedRenderer`, below) (the
pyinstrument `renderers/` pattern)."""

from __future__ import annotations

from autoprof.flame.fold import Folded, folded_lines


def clean(text: str) -> str:
    """Text every output format accepts: undecodable bytes (kept by the parser as surrogate
    escapes) become U+FFFD, control characters go."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return "".join(ch for ch in text if ch >= " " or ch == "\t")


class Renderer:
    def render(self, folded: Folded) -> str:
        raise NotImplementedError


class FoldedRenderer(Renderer):
    """FlameGraph's folded stacks, byte for byte what stackcollapse-perf.pl writes."""

    def render(self, folded: Folded) -> str:
        return "".join(folded_lines(folded))
