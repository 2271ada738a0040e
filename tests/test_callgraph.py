"""`autoprof callgraph`: gprof2dot + Graphviz on a live recording of the hotspots example; the
SVG's percentages agree with `report`'s, and the picture opens in Chromium."""

from __future__ import annotations

import csv
import io
import re
import shutil
from pathlib import Path
from xml.etree import ElementTree

import pytest

from autoprof.callgraph.graph import GraphOptions, gprof2dot_argv, output_format
from autoprof.errors import AutoprofError
from autoprof.testing.cli import invoke

FUNCTIONS = ("heavy", "medium", "touch")
SVG_NS = "{http://www.w3.org/2000/svg}"


def node_labels(svg: Path) -> dict[str, list[str]]:
    """Graphviz SVG: each node is <g class="node"> with its label's lines as <text>."""
    root = ElementTree.parse(svg).getroot()
    labels = {}
    for group in root.iter(f"{SVG_NS}g"):
        if group.get("class") == "node":
            texts = [t.text or "" for t in group.iter(f"{SVG_NS}text")]
            if texts:
                labels[texts[0]] = texts[1:]
    return labels


@pytest.fixture(scope="module")
def callgraph_svg(hotspots_recording: Path, tmp_path_factory) -> Path:
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot not found (make system-deps installs it)")
    out = tmp_path_factory.mktemp("callgraph") / "graph.svg"
    result = invoke("callgraph", str(hotspots_recording), "-o", str(out))
    assert result.returncode == 0, result.output
    return out


@pytest.mark.slow
def test_svg_percentages_agree_with_report(hotspots_recording: Path, callgraph_svg: Path):
    report = invoke("report", str(hotspots_recording), "--csv", "-")
    shares = {
        r["symbol"]: float(r["cpu-clock %"]) for r in csv.DictReader(io.StringIO(report.output))
    }
    labels = node_labels(callgraph_svg)
    for name in FUNCTIONS:
        total, self_share = labels[name][0], labels[name][1]
        assert re.fullmatch(r"\d+\.\d\d%", total)
        self_pct = float(self_share.strip("()%"))
        assert abs(self_pct - shares[name]) <= 5, (name, self_pct, shares[name])
    heavy, medium = (float(labels[n][1].strip("()%")) for n in ("heavy", "medium"))
    assert heavy > medium


@pytest.mark.slow
def test_svg_opens_in_chromium(page, callgraph_svg: Path, tmp_path: Path):
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(callgraph_svg.as_uri())
    assert page.locator("svg g.node").count() >= len(FUNCTIONS)
    for name in FUNCTIONS:
        assert page.locator("g.node text", has_text=re.compile(f"^{name}$")).first.is_visible()
    # Playwright's screenshot waits for document.fonts, which a bare SVG document never
    # settles: the same SVG inline in an HTML page
    wrapper = tmp_path / "callgraph.html"
    wrapper.write_text(f"<!doctype html><html><body>{callgraph_svg.read_text()}</body></html>")
    page.goto(wrapper.as_uri())
    shot = tmp_path / "callgraph.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000 and errors == []


def test_options_and_formats():
    argv = gprof2dot_argv(GraphOptions(node_thres=1, edge_thres=0.5, root="main", leaf="f"))
    assert argv[-10:] == ["-f", "collapse", "-n", "1", "-e", "0.5", "-z", "main", "-l", "f"]
    assert output_format(Path("g.PNG")) == "png"
    with pytest.raises(AutoprofError, match=r"give a \.svg, \.png or \.dot"):
        output_format(Path("g.pdf"))


@pytest.mark.slow
def test_dot_output_and_a_missing_root(hotspots_recording: Path, tmp_path: Path):
    out = tmp_path / "g.dot"
    ok = invoke("callgraph", str(hotspots_recording), "-o", str(out), "--leaf", "heavy")
    assert ok.returncode == 0, ok.output
    assert out.read_text().startswith("digraph") and "touch" not in out.read_text()
    bad = invoke("callgraph", str(hotspots_recording), "-o", str(out), "--root", "nosuch")
    assert bad.returncode != 0 and "root node nosuch not found" in bad.output
