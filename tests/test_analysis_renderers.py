"""The renderers of the analyses' results, chosen by the output's extension: a real PNG that
Matplotlib reads back, CSV with the analysis' own numbers, tables on the terminal, and one line
for an extension no renderer knows. The numbers come from series built with known relations."""

from __future__ import annotations

import io
import pkgutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from matplotlib import image

import autoprof.analysis
from autoprof.analysis import correlation, data
from autoprof.testing.cli import invoke
from tests.helpers import png_size, results_frame, write_results

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def linear(tmp_path_factory):
    """a, b = 2a + 1 (r = 1), c = -a (r = -1) and an independent noise event, in one run."""
    rng = np.random.default_rng(16)
    signal = np.cumsum(rng.normal(size=40)) + 100
    series = {"a": signal, "b": 2 * signal + 1, "c": -signal + 500, "noise": rng.normal(size=40)}
    return write_results(results_frame(series), tmp_path_factory.mktemp("linear"))


def test_importing_the_analyses_imports_no_matplotlib():
    """The numbers never pay for Matplotlib: only the png renderer imports it."""
    names = [
        m.name
        for m in pkgutil.walk_packages(autoprof.analysis.__path__, "autoprof.analysis.")
        if m.name != "autoprof.analysis.renderers.png"
    ]
    assert "autoprof.analysis.correlation" in names and "autoprof.analysis.renderers.csv" in names
    code = f"import importlib, sys; [importlib.import_module(n) for n in {names!r}]; " + (
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_analyze_commands_do_not_import_the_cli():
    """The analyze/*.py scripts enter through `autoprof.cli.main_analyze`: the command layer
    itself never imports the CLI (no circle)."""
    code = "import sys, autoprof.commands.analyze; print('autoprof.cli' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_a_png_output_is_a_png_that_matplotlib_reads_back(tmp_path, linear):
    out = tmp_path / "figures" / "heat.png"
    run = invoke("analyze", "correlation", str(linear), "-o", str(out))
    assert run.returncode == 0, run.output
    assert out.read_bytes()[:8] == PNG_SIGNATURE
    assert image.imread(out).shape == (850, 1000, 4)  # 10 x 8.5 in at 100 dpi, RGBA
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["heat.png"]
    assert f"wrote {out}" in run.output


def test_a_csv_output_holds_the_analysis_numbers(tmp_path, linear):
    out = tmp_path / "matrix.csv"
    run = invoke("analyze", "correlation", str(linear), "-o", str(out))
    assert run.returncode == 0, run.output
    written = pd.read_csv(out, index_col="event")
    expected = correlation.analyse(data.load(linear, data.SERIES_COLUMNS)).matrix
    assert list(written.index) == list(expected.index) == list(written.columns)
    assert np.allclose(written.to_numpy(), expected.to_numpy(), rtol=1e-5)
    assert written.loc["a", "b"] == pytest.approx(1.0) and written.loc["a", "c"] == -1.0
    stats_csv = tmp_path / "events.csv"
    assert invoke("analyze", "stats", str(linear), "-o", str(stats_csv)).returncode == 0
    table = pd.read_csv(stats_csv, index_col="event")
    assert table.loc["b", "total"] == pytest.approx(2 * table.loc["a", "total"] + 40)


def test_the_console_shows_the_tables(tmp_path, linear):
    run = invoke("analyze", "correlation", str(linear), "-o", str(tmp_path / "folder"))
    assert run.returncode == 0, run.output
    assert "Strongest correlations" in run.output
    first = next(line for line in run.output.splitlines() if line.startswith("│"))
    assert {"a", "b", "1"} <= set(first.replace("│", " ").split())  # r(a, b) = 1 leads
    names = {p.name for p in (tmp_path / "folder").iterdir()}
    assert names == {"correlation_heatmap.png", "correlation_matrix.csv"}  # today's defaults
    text = tmp_path / "stats.txt"
    run = invoke("analyze", "stats", str(linear), "-o", str(text))
    assert run.returncode == 0, run.output
    shown = text.read_text()
    assert "Top 10 events by total count" in shown and "│ noise" in shown
    assert "Top 10" not in run.output  # the tables went to the file


def test_event_detail_renders_svg_and_csv_by_extension(tmp_path, linear):
    svg, points = tmp_path / "lines.svg", tmp_path / "lines.csv"
    assert invoke("analyze", "event-detail", str(linear), "-e", "a", "-o", str(svg)).returncode == 0
    assert svg.read_text().lstrip().startswith("<?xml")
    assert (
        invoke("analyze", "event-detail", str(linear), "-e", "b", "-o", str(points)).returncode == 0
    )
    lines = pd.read_csv(points)
    assert set(lines[data.EVENT]) == {"b"} and len(lines) == 40


@pytest.mark.parametrize(
    ("args", "out", "message"),
    [
        (
            ["correlation"],
            "heat.jpeg",
            "unknown output format '.jpeg' (known: .png, .svg, .csv, .txt)",
        ),
        (["stats"], "stats.png", "stats draws no figure (use .csv or .txt)"),
    ],
)
def test_an_output_no_renderer_can_write_is_one_line(tmp_path, linear, args, out, message):
    run = invoke("analyze", *args, str(linear), "-o", str(tmp_path / out))
    assert run.returncode == 2
    assert run.stderr.splitlines() == [f"autoprof: error: {tmp_path / out}: {message}"]
    assert not (tmp_path / out).exists()


def test_default_folder_is_analysis_beside_the_results(linear):
    run = invoke("analyze", "compare", str(linear), str(linear))
    assert run.returncode == 0, run.output
    folder = linear.parent / "analysis"
    assert png_size(folder / "compare.png") == (1000, 290)  # 1.5 in + 4 bars x 0.35 in
    assert pd.read_csv(folder / "compare.csv")["ratio"].tolist() == [1.0] * 4
    assert "Largest changes" in run.output and "0 of 4 events changed significantly" in run.output


def test_the_csv_renderer_gives_the_main_table_the_writer_puts_on_stdout(linear, capsys):
    from autoprof.analysis import renderers, stats
    from autoprof.util.renderer import write

    result = stats.analyse(data.load(linear), None)
    assert write(renderers.renderer(renderers.RENDERERS[".csv"]).render(result), "-") is None
    table = pd.read_csv(io.StringIO(capsys.readouterr().out), index_col="event")
    assert sorted(table.index) == ["a", "b", "c", "noise"] and (table["samples"] == 40).all()


@pytest.mark.parametrize(
    ("args", "notes"),
    [
        (["stats"], "sanity lists from the STATUS column"),
        (["correlation"], "4 events over 40 intervals"),
        (["event-detail", "-e", "a"], "plotted a"),
        (["compare", "RESULTS"], "warning: no manifest.json"),
    ],
)
def test_dash_puts_the_main_table_or_the_tables_on_stdout_and_no_figure(
    tmp_path, linear, args, notes
):
    """`-o -` is standard output, as for `runs export`: the main table as CSV (what `-o
    table.csv` writes), `-o -.txt` the tables as text (what `-o tables.txt` writes); the notes go
    to standard error, nothing is written anywhere, and a figure is refused in one line."""
    name, *rest = [str(linear) if a == "RESULTS" else a for a in args]

    def analyze(out: str):
        return invoke("analyze", name, str(linear), *rest, "-o", out, cwd=tmp_path)

    for dash, file in [("-", "main.csv"), ("-.csv", "main.csv"), ("-.txt", "tables.txt")]:
        piped = analyze(dash)
        assert piped.returncode == 0, piped.stderr
        assert analyze(str(tmp_path / file)).returncode == 0
        assert piped.stdout == (tmp_path / file).read_text()
        assert notes in piped.stderr and notes not in piped.stdout
    table = pd.read_csv(io.StringIO(analyze("-").stdout))
    assert len(table) > 1 and "a" in set(table.iloc[:, 0])  # the events' table, a's row in it
    for figure in ("-.png", "-.svg"):
        refused = analyze(figure)
        assert (refused.returncode, refused.stdout) == (2, "")
        assert refused.stderr.splitlines() == [
            f"autoprof: error: {figure}: a figure is not written to standard output (-o - writes "
            "the main table as CSV, -o -.txt the tables as text; a figure needs a file, e.g. -o "
            "figure.png)"
        ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["main.csv", "tables.txt"]


def test_the_png_and_the_web_page_colour_a_correlation_alike(tmp_path):
    """r = +1 is red and r = -1 blue in both (the web page had them the other way round)."""
    import numpy as np
    import pandas as pd
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgb

    from autoprof.analysis.correlation import Correlation, colour_scale
    from autoprof.analysis.renderers.png import figure

    events = ["a", "b"]
    matrix = pd.DataFrame([[1.0, -1.0], [-1.0, 1.0]], index=events, columns=events)
    fig = figure(Correlation(matrix, pd.DataFrame(columns=["event", "reason"]), "pearson", 20))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())[:, :, :3] / 255
    ax = fig.axes[0]

    def cell(i: int, j: int) -> np.ndarray:
        x, y = ax.transData.transform((j - 0.3, i - 0.3))  # off the printed coefficient
        return pixels[int(pixels.shape[0] - y), int(x)]

    scale = dict(colour_scale())  # what the web page's heatmap is given
    assert np.allclose(cell(0, 0), to_rgb(scale[1.0]), atol=0.02)  # r = +1
    assert np.allclose(cell(0, 1), to_rgb(scale[0.0]), atol=0.02)  # r = -1
    red, _, blue = to_rgb(scale[1.0])
    assert red > 0.3 > blue
