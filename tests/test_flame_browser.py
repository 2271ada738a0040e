"""The flame graph SVG in a real browser: Debian's Chromium, driven by Playwright.

Never downloads a browser: skips when /usr/bin/chromium (make system-deps) or Playwright is
missing. Expected numbers come from the SVG's own frames and the folded data, not from the page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autoprof.flame.source import FoldOptions, load
from autoprof.flame.svg import PAD_X, SvgRenderer

DATA = Path(__file__).parent / "data"
WIDTH = 1000
pytestmark = pytest.mark.slow  # a real browser


@pytest.fixture(scope="module")
def graph(tmp_path_factory) -> tuple[Path, object]:
    folded = load(DATA / "perf61-dd-two-events.script", FoldOptions(event="cpu-clock"))
    path = tmp_path_factory.mktemp("svg") / "flame.svg"
    path.write_text(SvgRenderer(title="dd", width=WIDTH).render(folded))
    return path, folded


def test_click_zooms_a_frame_to_full_width(page, graph):
    path, _ = graph
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(path.as_uri())
    frame = page.locator('g.f[data-n="ksys_read"]').first
    before = float(frame.locator("rect").get_attribute("width"))
    assert before < (WIDTH - 2 * PAD_X) * 0.9
    frame.click()
    after = float(frame.locator("rect").get_attribute("width"))
    assert after == pytest.approx(WIDTH - 2 * PAD_X, abs=0.01)
    assert page.locator("#reset").is_visible()
    hidden = page.locator("g.f.hidden").count()
    assert hidden > 0  # frames outside the zoomed subtree are hidden
    page.locator("#reset").click()
    assert float(frame.locator("rect").get_attribute("width")) == pytest.approx(before, abs=0.01)
    assert page.locator("g.f.hidden").count() == 0
    assert errors == []


def test_search_shows_match_count_and_share(page, graph, tmp_path: Path):
    path, folded = graph
    page.goto(path.as_uri())
    pattern = "read"
    page.locator("#search").fill(pattern)
    text = page.locator("#matched").text_content()
    names = re.findall(r'<g class="f" data-n="([^"]*)"', path.read_text())
    count = sum(1 for name in names[1:] if re.search(pattern, name))
    matched = sum(w for stack, w in folded.stacks.items() if any(pattern in f for f in stack))
    assert text == f"Matched: {count} frames, {100 * matched / folded.total:.2f}%"
    page.screenshot(path=str(tmp_path / "flame.png"))
    page.locator("#search").fill("(")
    assert page.locator("#matched").text_content() == "invalid regex"
