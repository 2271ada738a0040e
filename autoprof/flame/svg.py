"""The interactive flame graph: one self-contained SVG file (script and style inside).

Every frame is drawn in the file itself (it reads without JavaScript, e.g. in an image viewer);
the embedded script (`flame.js`) adds click-to-zoom, reset (button or Escape), a regex search
that shows how many frames matched and their share of the samples, and a details line for the
frame under the mouse. Colours depend on the frame name only (a stable hash), so the same
function has the same colour in every graph; a diff colours by growth (red) and shrinkage (blue).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from importlib import resources

from autoprof.errors import AutoprofError
from autoprof.flame.diff import diff_tree, share_delta
from autoprof.flame.fold import Folded
from autoprof.flame.renderer import FlameRenderer, clean
from autoprof.flame.tree import Node, build_tree

FRAME_HEIGHT = 16
FONT_SIZE = 12
CHAR_WIDTH = 0.59  # average glyph width of Verdana, in font sizes (as FlameGraph assumes)
PAD_X = 10
PAD_TOP = FONT_SIZE * 4 + 8  # title, then the controls line
PAD_BOTTOM = FONT_SIZE * 2 + 10  # the details line


def escape(text: str) -> str:
    """XML character data (xml.sax.saxutils would import urllib and http.client: slow start)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def quoteattr(text: str) -> str:
    """A double-quoted XML attribute value."""
    text = escape(text).replace('"', "&quot;")
    return '"' + text.replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;") + '"'


def frame_colour(name: str) -> str:
    """A warm colour chosen by the name alone; FlameGraph's annotations pick other hues:
    ``_[k]`` kernel (orange), ``_[j]`` JIT (green), ``_[i]`` inlined (aqua)."""
    h = zlib.crc32(name.encode("utf-8", "surrogateescape"))
    v1, v2, v3 = (h & 0xFF) / 255, (h >> 8 & 0xFF) / 255, (h >> 16 & 0xFF) / 255
    if name.endswith("_[k]"):
        r, g, b = 230 + 25 * v1, 140 + 60 * v2, 0 + 40 * v3
    elif name.endswith("_[j]"):
        r, g, b = 50 + 60 * v1, 180 + 60 * v2, 50 + 60 * v3
    elif name.endswith("_[i]"):
        r, g, b = 80 + 60 * v1, 190 + 50 * v2, 190 + 50 * v3
    else:
        r, g, b = 205 + 50 * v3, 230 * v1, 55 * v2
    return f"rgb({int(r)},{int(g)},{int(b)})"


def diff_colour(delta: float, scale: float) -> str:
    """White for no change, towards red for growth and blue for shrinkage."""
    t = min(1.0, abs(delta) / scale) if scale > 0 else 0.0
    fade = round(255 * (1 - t))
    return f"rgb(255,{fade},{fade})" if delta > 0 else f"rgb({fade},{fade},255)"


def _number(n: int) -> str:
    return f"{n:,}"


def _tooltip(node: Node, total: int, event: str | None, before_total: int | None) -> str:
    pct = 100.0 * node.value / total if total else 0.0
    parts = []
    if node.samples:
        parts.append(f"{_number(node.samples)} samples")
        if node.value != node.samples:
            parts.append(f"{_number(node.value)} {event or 'weight'}")
    else:
        parts.append(f"{_number(node.value)} samples")
    parts.append(f"{pct:.2f}%")
    if before_total is not None:
        before = 100.0 * node.before / before_total if before_total else 0.0
        delta = pct - before
        parts.append(f"before {before:.2f}%, {delta:+.2f} pts")
    return f"{node.name} ({', '.join(parts)})"


def _label(name: str, width: float) -> str:
    fits = int(width / (FONT_SIZE * CHAR_WIDTH))
    if fits < 3:
        return ""
    return name if len(name) <= fits else name[: fits - 2] + ".."


@dataclass
class SvgRenderer(FlameRenderer):
    """`text(folded)` draws a flame graph; with `baseline` (BEFORE), a differential one."""

    title: str = "Flame Graph"
    width: int = 1200
    minwidth: str = "0.1"  # pixels, or a percentage of the total such as "0.5%"
    inverted: bool = False  # icicle: root at the top
    baseline: Folded | None = None

    def _min_value(self, total: int, scale: float) -> float:
        text = self.minwidth.strip()
        try:
            if text.endswith("%"):
                return total * float(text[:-1]) / 100.0
            return float(text) / scale if scale else 0.0
        except ValueError:
            raise AutoprofError(f"--minwidth takes pixels or a percentage, not {text!r}") from None

    def render(self, folded: Folded) -> str:
        diff = self.baseline is not None
        tree = diff_tree(self.baseline, folded) if self.baseline is not None else build_tree(folded)
        total = tree.value
        span = self.width - 2 * PAD_X
        scale = span / total if total else 0.0
        min_value = self._min_value(total, scale)
        visible = [item for item in tree.walk() if item[2].value >= min_value and item[2].value]
        depth = max((d for d, _, _ in visible), default=0)
        height = PAD_TOP + (depth + 1) * FRAME_HEIGHT + PAD_BOTTOM
        before_total = tree.before if diff else None
        if diff:
            deltas = [share_delta(n, total, tree.before) for _, _, n in visible[1:]]
            delta_scale = max((abs(d) for d in deltas), default=0.0)
        frames = []
        for d, start, node in visible:
            x = PAD_X + start * scale
            w = node.value * scale
            if self.inverted:
                y = PAD_TOP + d * FRAME_HEIGHT
            else:
                y = height - PAD_BOTTOM - (d + 1) * FRAME_HEIGHT
            name = clean(node.name)
            if diff:
                fill = diff_colour(share_delta(node, total, tree.before), delta_scale)
            else:
                fill = "rgb(240,240,240)" if d == 0 else frame_colour(node.name)
            tip = clean(_tooltip(node, total, folded.event, before_total))
            frames.append(
                f'<g class="f" data-n={quoteattr(name)} data-s="{start}" data-v="{node.value}"'
                f' data-d="{d}"><title>{escape(tip)}</title>'
                f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{FRAME_HEIGHT - 1}"'
                f' fill="{fill}" rx="2"/>'
                f'<text x="{x + 3:.2f}" y="{y + FRAME_HEIGHT - 4}">{escape(_label(name, w))}</text>'
                "</g>"
            )
        script = resources.files("autoprof.flame").joinpath("flame.js").read_text()
        subtitle = ""
        if diff:
            subtitle = "red: grew, blue: shrank (share of samples, AFTER vs BEFORE); widths: AFTER"
        elif folded.event:
            subtitle = f"event: {folded.event}"
        return "".join(
            [
                '<?xml version="1.0" standalone="no"?>\n',
                f'<svg version="1.1" width="{self.width}" height="{height}"'
                f' viewBox="0 0 {self.width} {height}" xmlns="http://www.w3.org/2000/svg"'
                f' data-total="{total}" data-pad="{PAD_X}" data-font="{FONT_SIZE}"'
                f' data-char="{CHAR_WIDTH}" data-minwidth="{min_value * scale:.4f}">\n',
                "<style>",
                "text{font-family:Verdana,sans-serif;font-size:12px;fill:#000}",
                "g.f{cursor:pointer}g.f:hover rect{stroke:#000;stroke-width:0.5}",
                ".hidden{display:none}.parent rect{opacity:0.5}",
                "#title{font-size:17px;text-anchor:middle}#sub{fill:#555;text-anchor:middle}",
                "#reset{cursor:pointer;fill:#06c}#matched{text-anchor:end}",
                "input{font:12px Verdana,sans-serif;width:100%;box-sizing:border-box}",
                "</style>\n",
                '<rect width="100%" height="100%" fill="#fafafa"/>\n',
                f'<text id="title" x="{self.width / 2}" y="{FONT_SIZE + 8}">'
                f"{escape(clean(self.title))}</text>\n",
                f'<text id="sub" x="{self.width / 2}" y="{2 * FONT_SIZE + 10}">'
                f"{escape(clean(subtitle))}</text>\n",
                f'<text id="reset" class="hidden" x="{PAD_X}" y="{3 * FONT_SIZE + 14}">'
                "Reset zoom</text>\n",
                f'<foreignObject x="{self.width - PAD_X - 260}" y="{2 * FONT_SIZE + 18}"'
                ' width="260" height="22"><input xmlns="http://www.w3.org/1999/xhtml"'
                ' id="search" type="text" placeholder="Search (regex)"/></foreignObject>\n',
                f'<text id="matched" x="{self.width - PAD_X - 270}" y="{3 * FONT_SIZE + 14}"/>\n',
                f'<text id="details" x="{PAD_X}" y="{height - FONT_SIZE}"> </text>\n',
                '<g id="frames">\n',
                "\n".join(frames),
                "\n</g>\n",
                f"<script><![CDATA[\n{script}\n]]></script>\n",
                "</svg>\n",
            ]
        )
