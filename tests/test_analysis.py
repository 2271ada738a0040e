"""The analysis layer on synthetic results with known structure, and on bad input.

Each synthetic results file is built here from known series, so every expected number comes
from the construction (a linear relation, an injected 2x change), not from the code under test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from autoprof.analysis import compare, correlation, data, event_detail, stats
from autoprof.analysis.renderers import png
from autoprof.errors import AutoprofError
from autoprof.results import csvfile
from autoprof.testing.cli import invoke
from tests.helpers import png_size, results_frame, write_results

REPO = Path(__file__).resolve().parents[1]


def drawn_outside(fig) -> list[float]:
    """How far (inches) what is drawn reaches past each edge (left, bottom, right, top) of the
    figure: all zero unless a label is cut off."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    box = fig.get_tightbbox(canvas.get_renderer())  # inches, only what is drawn
    width, height = fig.get_size_inches()
    return [round(max(0.0, v), 2) for v in (-box.x0, -box.y0, box.x1 - width, box.y1 - height)]


LONG = "OFFCORE_RESPONSE.DEMAND_DATA_RD.L3_MISS.REMOTE_HITM.SNOOP_HIT_WITH_FWD"


RNG = np.random.default_rng(7)
N = 400


@pytest.fixture(scope="module")
def structured() -> pd.DataFrame:
    """30 events over 4 runs: a family of 4 exact linear functions of one signal (one of them
    decreasing), spread over different runs; independent noise events; a constant, an all-zero
    and a never-counted event; and `<not counted>` intervals in run 2."""
    signal = np.cumsum(RNG.normal(size=N)) + 100
    series = {
        "fam.a": signal,
        "fam.b": 3 * signal + 5,
        "fam.c": 0.5 * signal - 7,
        "fam.d": -2 * signal + 1000,
    }
    run_of = {"fam.a": 1, "fam.b": 2, "fam.c": 3, "fam.d": 4}
    for i in range(22):
        series[f"noise.{i:02d}"] = RNG.normal(size=N) * 10 + 50
        run_of[f"noise.{i:02d}"] = 1 + i % 4
    series["flat.constant"] = np.full(N, 42.0)
    series["flat.zero"] = np.zeros(N)
    series["flat.never"] = np.full(N, np.nan)
    for name in list(series):
        if run_of.get(name) == 2:
            series[name] = series[name].copy()
            series[name][[5, 50, 300]] = np.nan  # the task did not run in those intervals
    return data.prepare(results_frame(series, run_of))


def test_exact_linear_events_correlate_at_one_and_cluster_together(structured):
    result = correlation.analyse(structured)
    family = ["fam.a", "fam.b", "fam.c", "fam.d"]
    m = result.matrix
    for x in family:
        for y in family:
            expected = -1.0 if (x == "fam.d") != (y == "fam.d") else 1.0
            assert m.loc[x, y] == pytest.approx(expected, abs=1e-9)
    positions = sorted(list(m.index).index(e) for e in family)
    assert positions == list(range(positions[0], positions[0] + 4)), list(m.index)
    assert (m.index == m.columns).all()
    noise = m.loc["noise.00", [c for c in m.columns if c.startswith("noise.") and c != "noise.00"]]
    assert noise.abs().max() < 0.3  # independent series do not correlate


def test_constant_zero_and_uncounted_events_are_left_out_and_listed(structured):
    result = correlation.analyse(structured)
    reasons = dict(result.excluded.to_numpy())
    assert reasons == {
        "flat.constant": "constant",
        "flat.zero": "all zero",
        "flat.never": "no value",
    }
    assert not set(reasons) & set(result.matrix.index)


@pytest.mark.parametrize("method", correlation.METHODS)
def test_pairwise_correlation_matches_pandas_with_gaps_and_ties(method):
    values = np.round(RNG.random((200, 9)) * 6)  # many ties
    values[RNG.random(values.shape) < 0.15] = np.nan
    values[:40, 2] = np.nan  # a shorter run
    frame = pd.DataFrame(values, columns=[f"e{i}" for i in range(9)])
    expected = frame.corr(method=method).to_numpy()
    got = correlation.correlate(frame, method).to_numpy()
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_spearman_ties_values_that_differ_only_by_rounding():
    a = np.array([0.1 + 0.2, 0.3, *np.arange(0.5, 2.5, 0.2)])  # 0.30000000000000004 vs 0.3
    b = np.array([1.0, 0.0, *np.arange(2.0, 12.0)])
    got = correlation.correlate(pd.DataFrame({"a": a, "b": b}), "spearman").loc["a", "b"]
    untied = pd.DataFrame({"a": a, "b": b}).corr("spearman").loc["a", "b"]
    tied = pd.DataFrame({"a": np.round(a, 12), "b": b}).corr("spearman").loc["a", "b"]
    assert untied == 1.0 and got == pytest.approx(tied) and got < 0.999


def test_series_mean_over_cpus_and_align_runs_by_interval_index():
    frame = data.prepare(
        results_frame({"x": np.array([1.0, 2.0, 3.0]), "y": np.array([10.0, 20.0])}, {"y": 2}, 4)
    )
    series = data.interval_series(data.per_interval(frame))
    assert series["x"].tolist() == [2.5, 3.5, 4.5]  # mean of value + 0..3
    assert series["y"].iloc[:2].tolist() == [11.5, 21.5]
    assert np.isnan(series["y"].iloc[2])  # run 2 had one interval less


def test_anchor_divides_by_the_anchor_of_the_same_run_and_interval():
    work = RNG.random((2, 50)) * 100 + 1
    frame = data.prepare(
        results_frame(
            {
                "task-clock": work,
                "per_work": 3 * work,
                "other": RNG.random((2, 50)),
                "other2": RNG.random((2, 50)),
                "t2": work,
            },
            {"t2": 2},
        )
    )
    with pytest.raises(AutoprofError, match=r"missing in run\(s\) 2\); .* events of run\(s\) 1$"):
        correlation.analyse(frame, anchor="task-clock")
    # events of the anchor's run only: t2's run needs no anchor
    result = correlation.analyse(frame, anchor="task-clock", events="per_work|other|task")
    reasons = dict(result.excluded.to_numpy())
    assert reasons == {"per_work": "constant", "task-clock": "constant"}
    assert list(result.matrix.index) == ["other", "other2"]


def test_events_of_a_short_run_are_left_out_and_short_pairs_listed(tmp_path):
    """Runs of different lengths: events share only the intervals both have a number in."""
    signal = RNG.normal(size=60)
    late = np.where(np.arange(60) >= 26, 1.0, np.nan)  # counted from interval 26 on
    series = {
        "x": signal,
        "x2": 2 * signal + RNG.normal(size=60) * 0.1,
        "early": np.where(np.arange(60) < 30, RNG.normal(size=60), np.nan),
        "late": late * RNG.normal(size=60),
        "brief": np.where(np.arange(60) < 6, RNG.normal(size=60), np.nan),
    }
    run_of = {"x": 1, "x2": 1, "early": 2, "late": 3, "brief": 4}
    path = write_results(results_frame(series, run_of), tmp_path)
    run = invoke("analyze", "correlation", str(path), "-o", str(tmp_path / "o"))
    assert run.returncode == 0, run.output
    assert "brief (fewer than 10 intervals)" in run.output
    assert "1 pair(s) of events share fewer than 10 intervals" in run.output
    short = pd.read_csv(tmp_path / "o" / "correlation_short_pairs.csv")
    assert short.to_dict("records") == [
        {"event_a": "early", "event_b": "late", "common_intervals": 4}
    ]
    matrix = pd.read_csv(tmp_path / "o" / "correlation_matrix.csv", index_col="event")
    assert np.isnan(matrix.loc["early", "late"]) and np.isnan(matrix.loc["late", "early"])
    assert matrix.loc["x", "x2"] > 0.99
    assert not np.isnan(matrix.loc["early", "x"])  # 30 common intervals
    run = invoke(
        "analyze", "correlation", str(path), "-o", str(tmp_path / "p"), "--min-overlap", "4"
    )
    assert run.returncode == 0, run.output
    short = pd.read_csv(tmp_path / "p" / "correlation_short_pairs.csv")
    assert short.to_dict("records") == [
        {"event_a": "late", "event_b": "brief", "common_intervals": 0}
    ]
    matrix = pd.read_csv(tmp_path / "p" / "correlation_matrix.csv", index_col="event")
    assert not np.isnan(matrix.loc["early", "late"]) and "brief" in matrix.index


def test_top_keeps_the_most_variable_and_events_filters(structured):
    result = correlation.analyse(structured, events=r"^fam\.", top=2)
    assert len(result.matrix) == 2
    # coefficient of variation: fam.d (mean ~800, std 2x) varies less than fam.c (mean ~43)
    series = data.interval_series(data.per_interval(structured))[
        ["fam.a", "fam.b", "fam.c", "fam.d"]
    ]
    cv = series.std(ddof=0) / series.mean().abs()
    assert set(result.matrix.index) == set(cv.nlargest(2).index)


def test_correlation_command_writes_matrix_and_heatmap(tmp_path, structured):
    path = write_results(structured, tmp_path / "in")
    out = tmp_path / "out"
    run = invoke("analyze", "correlation", str(path), "-o", str(out))
    assert run.returncode == 0, run.output
    matrix = pd.read_csv(out / "correlation_matrix.csv", index_col="event")
    assert matrix.shape == (26, 26)
    assert png_size(out / "correlation_heatmap.png") == (1000, 850)
    assert "flat.zero (all zero)" in run.output
    assert not (out / "correlation_index.csv").exists()  # 26 events: labelled


def test_many_events_get_an_index_file_instead_of_labels(tmp_path):
    signal = RNG.random(30)
    series = {f"e{i:03d}": signal * (i + 1) + RNG.random(30) for i in range(70)}
    path = write_results(results_frame(series), tmp_path)
    run = invoke(
        "analyze", "correlation", str(path), "-o", str(tmp_path / "o"), "--method", "spearman"
    )
    assert run.returncode == 0, run.output
    index = pd.read_csv(tmp_path / "o" / "correlation_index.csv")
    assert sorted(index["event"]) == sorted(series)
    assert png_size(tmp_path / "o" / "correlation_heatmap.png") == (1000, 850)


def test_event_detail_plots_against_real_interval_lengths(tmp_path):
    times = np.array([0.1, 0.2, 0.45, 0.5])  # a stretched interval and a short last one
    frame = results_frame(
        {"a": np.array([10.0, 10.0, 25.0, 5.0]), "b": np.arange(4.0)}, times=times
    )
    intervals = data.per_interval(data.prepare(frame))
    lines = event_detail.timelines(intervals, ["a"], rate=True)
    np.testing.assert_allclose(lines["TIME"], times)
    np.testing.assert_allclose(lines["VALUE"], [100.0, 100.0, 100.0, 100.0])
    path = write_results(frame, tmp_path)
    run = invoke(
        "analyze", "event-detail", str(path), "-e", "a", "-e", "b", "--rate", "-o", str(tmp_path)
    )
    assert run.returncode == 0, run.output
    assert png_size(tmp_path / "event_detail.png") == (1000, 500)  # 1 in margin + 2 x 2 in
    assert (tmp_path / "event_detail.svg").read_text().lstrip().startswith("<?xml")
    run = invoke("analyze", "event_detail", str(path), "--shared", "-o", str(tmp_path / "s"))
    assert run.returncode == 0, run.output
    assert png_size(tmp_path / "s" / "event_detail.png") == (1000, 600)


def test_event_detail_refuses_unknown_or_uncounted_events(tmp_path):
    frame = results_frame({"a": np.array([1.0, 2.0]), "gone": np.array([np.nan, np.nan])})
    path = write_results(frame, tmp_path)
    run = invoke("analyze", "event-detail", str(path), "-e", "nope")
    assert run.returncode == 2 and "not in the results: nope" in run.stderr
    run = invoke("analyze", "event-detail", str(path), "-e", "gone")
    assert run.returncode == 2 and "no counted value to plot for: gone" in run.stderr


def test_stats_counts_samples_zero_and_uncounted_events(tmp_path, structured):
    table = stats.event_table(structured)
    assert table.loc["flat.zero", "all_zero"]
    assert not table.loc["fam.a", "all_zero"]
    assert table.loc["fam.a", "samples"] == N
    assert table.loc["fam.b", "samples"] == N - 3 and table.loc["fam.b", "no_value"] == 3
    assert table.loc["fam.a", "total"] == pytest.approx(
        structured.loc[structured["EVENT_NAME"] == "fam.a", "SAMPLE_VALUE"].sum()
    )
    summary = stats.summarize(structured, table, None)
    metrics = dict(summary.metrics)
    assert metrics["events"] == 29 and metrics["all-zero events"] == 1
    assert metrics["events with no value"] == 1
    kinds = summary.sanity.groupby("kind")["event"].apply(set).to_dict()
    assert kinds["not_counted"] == {"flat.never"}
    assert "fam.b" in kinds["idle_intervals"] and "fam.a" not in kinds["idle_intervals"]
    assert "STATUS column" in summary.source


def test_stats_command_uses_the_report_beside_the_results(tmp_path, structured):
    path = write_results(structured, tmp_path)
    report = {
        "events": {"multiplexed": [{"event": "X", "pmu": "cpu", "min_percent_running": 48.2}]}
    }
    (tmp_path / "report.json").write_text(json.dumps(report))
    run = invoke("analyze", "stats", str(path), "-o", str(tmp_path / "o"))
    assert run.returncode == 0, run.output
    assert "report.json" in run.output
    summary = pd.read_csv(tmp_path / "o" / "stats_summary.csv").set_index("metric")["value"]
    assert int(summary["multiplexed events"]) == 1
    assert len(pd.read_csv(tmp_path / "o" / "stats.csv")) == 29


@pytest.fixture(scope="module")
def ab() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two builds, 5 repeats each, 60 events with 1% noise per repeat; in B, `hot.loop` counts
    2x and `bp.writes` (an exact breakpoint count) 1000 -> 1500."""
    repeats, intervals = 5, 20
    rng = np.random.default_rng(11)
    base = {f"ev.{i:02d}": rng.uniform(1e3, 1e6) for i in range(58)}
    base["hot.loop"] = 5e5

    def build(scale: dict[str, float]) -> pd.DataFrame:
        series = {}
        for event, level in base.items():
            noise = 1 + 0.01 * rng.standard_normal((repeats, 1))
            series[event] = level * scale.get(event, 1.0) * noise * np.ones((1, intervals))
        series["bp.writes"] = np.full((repeats, intervals), 50.0 * scale.get("bp.writes", 1.0))
        run_of = {e: 1 + i % 3 for i, e in enumerate(series)}
        return data.prepare(results_frame(series, run_of))

    return build({}), build({"hot.loop": 2.0, "bp.writes": 1.5})


def test_injected_2x_change_tops_compare_and_unchanged_events_are_not_significant(ab):
    table = compare.compare(*ab)
    top = table.iloc[0]
    assert top["event"] == "hot.loop"
    assert top["ratio"] == pytest.approx(2.0, rel=0.02)
    assert top["p_value"] < 0.01 and top["significant"]
    exact = table.set_index("event").loc["bp.writes"]
    assert exact["ratio"] == pytest.approx(1.5) and exact["significant"]
    assert exact["note"].startswith("exact change")
    unchanged = table[~table["event"].isin(["hot.loop", "bp.writes"])]
    assert not unchanged["significant"].any()
    assert (unchanged["q_value"] >= 0.05).all()


def test_mann_whitney_with_5_repeats_finds_the_change(ab):
    table = compare.compare(*ab, test="mannwhitney")
    hot = table.set_index("event").loc["hot.loop"]
    assert hot["p_value"] < 0.01  # 5 vs 5, all B above all A: exact p = 2/252
    assert table.iloc[0]["event"] == "hot.loop"


def test_compare_command_refuses_different_cpus_and_warns_without_manifest(tmp_path, ab):
    a = write_results(ab[0], tmp_path / "a", cpu_id="GenuineIntel-6-55-4")
    b = write_results(ab[1], tmp_path / "b", cpu_id="GenuineIntel-6-8F-8")
    run = invoke("analyze", "compare", str(a), str(b), "-o", str(tmp_path / "o"))
    assert run.returncode == 2
    assert "different CPUs" in run.stderr and "GenuineIntel-6-8F-8" in run.stderr
    b = write_results(ab[1], tmp_path / "c")
    run = invoke("analyze", "compare", str(a), str(b), "-o", str(tmp_path / "o"), "--top", "10")
    assert run.returncode == 0, run.output
    assert "cannot check that both results come from the same CPU" in run.stderr
    written = pd.read_csv(tmp_path / "o" / "compare.csv")
    assert written.loc[0, "event"] == "hot.loop"
    assert png_size(tmp_path / "o" / "compare.png") == (1000, 500)  # 1.5 in + 10 x 0.35 in


def bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    header = tmp_path / "header.csv"
    header.write_text(",".join(csvfile.COLUMNS) + "\n")
    perf = tmp_path / "perf.csv"  # raw perf stat -x output, not a results.csv
    perf.write_text("0.100156243,34.43,msec,task-clock,34426016,100.00,0.344,CPUs utilized\n")
    other = tmp_path / "other.csv"
    other.write_text("EVENT_NAME,VALUE\ncycles,100\n")
    return {
        "missing": (tmp_path / "nope.csv", "no such results file"),
        "empty": (empty, "the file is empty"),
        "header only": (header, "has no rows"),
        "perf output": (perf, "missing column(s) EVENT_NAME"),
        "other tool": (other, "missing column(s) INDEX, TIME"),
    }


@pytest.mark.parametrize("command", ["correlation", "event-detail", "stats", "compare"])
def test_bad_input_is_one_clear_line_and_a_non_zero_exit(tmp_path, command):
    for name, (path, message) in bad_inputs(tmp_path).items():
        args = [str(path), str(path)] if command == "compare" else [str(path)]
        run = invoke("analyze", command, *args, "-o", str(tmp_path / "o"))
        assert run.returncode == 2, (name, run.output)
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("autoprof: error: "), (name, lines)
        assert message in lines[0], (name, lines[0])


def test_results_with_no_counted_value_are_a_clear_error_and_write_nothing(tmp_path):
    frame = results_frame({"a": np.full(12, np.nan), "b": np.full(12, np.nan)})
    path = write_results(frame, tmp_path)
    expected = {
        "correlation": "correlation needs at least 2 events that vary; 0 left (none)",
        "event-detail": "no counted value to plot for: a, b",
        "compare": "no event is in both results with a count: nothing to plot",
    }
    for command, message in expected.items():
        args = [str(path)] * (2 if command == "compare" else 1)
        run = invoke("analyze", command, *args, "-o", str(tmp_path / command))
        assert run.returncode == 2 and message in run.stderr, (command, run.stderr)
        assert not (tmp_path / command).exists() or not any((tmp_path / command).iterdir())


def test_correlation_of_a_single_event_is_a_clear_error(tmp_path):
    path = write_results(results_frame({"only": np.arange(10.0), "zero": np.zeros(10)}), tmp_path)
    run = invoke("analyze", "correlation", str(path))
    assert run.returncode == 2
    assert "needs at least 2 events that vary; 1 left (only)" in run.stderr


@pytest.mark.slow
def test_scripts_run_the_same_command(tmp_path, structured):
    path = write_results(structured, tmp_path)
    proc = subprocess.run(
        [sys.executable, str(REPO / "analyze" / "stats.py"), str(path), "-o", str(tmp_path / "o")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "o" / "stats.csv").is_file()
    proc = subprocess.run(
        [sys.executable, str(REPO / "analyze" / "correlation.py"), str(tmp_path / "nope.csv")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"autoprof: error: {tmp_path / 'nope.csv'}: no such results file"


def test_an_autoperf_results_file_is_analysed(samples_dir, tmp_path):
    path = samples_dir / "autoperf-results.csv"
    frame = data.load(path)
    table = stats.event_table(frame)
    assert len(table) == pd.read_csv(path)["EVENT_NAME"].nunique()
    assert table["repeats"].eq(1).all()  # autoperf has no REPEAT column: one repeat
    run = invoke("analyze", "stats", str(path), "-o", str(tmp_path))
    assert run.returncode == 0, run.output


def test_long_event_names_fit_in_every_figure(ab):
    """Intel event names run past 60 characters: no label may be cut off or squeeze a plot."""
    signal = RNG.normal(size=50)
    series = {f"{LONG}.{i}": signal * (i + 1) + RNG.normal(size=50) for i in range(8)}
    result = correlation.analyse(data.prepare(results_frame(series)))
    figure = png.heatmap(result)
    assert drawn_outside(figure) == [0, 0, 0, 0]
    cells = [t.get_text() for t in figure.axes[0].texts]  # 8 events: coefficients shown
    assert len(cells) == 64 and "1.00" in cells
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert all(len(label) <= png.HEATMAP_LABEL_CHARS and "…" in label for label in labels)
    renamed = [
        frame.assign(EVENT=frame[data.EVENT].cat.rename_categories(lambda e: f"{LONG}.{e}"))
        for frame in ab
    ]
    assert drawn_outside(png.changes(compare.analyse(*renamed))) == [0, 0, 0, 0]
    detail = event_detail.analyse(data.prepare(results_frame(series)), list(series)[:3])
    assert drawn_outside(png.timeline(detail)) == [0, 0, 0, 0]


def test_a_single_event_is_enough_for_stats_event_detail_and_compare(tmp_path):
    path = write_results(results_frame({"only": np.arange(1.0, 11.0)}), tmp_path)
    for command in (["stats"], ["event-detail"], ["compare", str(path)]):
        run = invoke("analyze", *command, str(path), "-o", str(tmp_path / command[0]))
        assert run.returncode == 0, (command, run.output)
    assert pd.read_csv(tmp_path / "stats" / "stats.csv")["event"].tolist() == ["only"]
    assert png_size(tmp_path / "event-detail" / "event_detail.png") == (1000, 300)
    assert pd.read_csv(tmp_path / "compare" / "compare.csv")["ratio"].tolist() == [1.0]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "case", "message"),
    [
        ("stats", "empty", "the file is empty"),
        ("correlation", "single event", "needs at least 2 events that vary; 1 left (only)"),
        ("event_detail", "other tool", "missing column(s) INDEX, TIME"),
        ("compare", "perf output", "missing column(s) EVENT_NAME"),
    ],
)
def test_scripts_give_one_clear_line_on_bad_input(tmp_path, script, case, message):
    inputs = {name: path for name, (path, _) in bad_inputs(tmp_path).items()}
    inputs["single event"] = write_results(
        results_frame({"only": np.arange(10.0)}), tmp_path / "one"
    )
    args = [str(inputs[case])] * (2 if script == "compare" else 1)
    proc = subprocess.run(
        [sys.executable, str(REPO / "analyze" / f"{script}.py"), *args, "-o", str(tmp_path / "o")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autoprof: error: "), lines
    assert message in lines[0]


def test_stats_total_mean_and_intervals_agree_and_say_their_unit(tmp_path):
    """Issue #41: "total" was a mean over repeats, "mean" divided by the distinct interval
    numbers (303) while "samples" counted rows (301). Now total x executions = mean x intervals,
    intervals counts what mean divides by, and each event has its unit."""
    from autoprof.testing.synthetic_out import make_out

    out = make_out(tmp_path / "out", runs=1, repeats=3, intervals=20, cpus=2)
    frame = data.load(out / "results.csv")
    keep = ~((frame["REPEAT"] == 2) & (frame["INDEX"] >= 17))  # 3 idle intervals in repeat 2
    table = stats.event_table(frame[keep].reset_index(drop=True))
    by_interval = frame[keep].groupby(["EVENT_NAME", "REPEAT", "INDEX"], observed=True)
    sums = by_interval["SAMPLE_VALUE"].sum(min_count=1).dropna()  # intervals with a number
    assert table.loc["task-clock", "intervals"] == 20 * 3 - 3
    for event, row in table.iterrows():
        executions = row["runs"] * row["repeats"]
        assert row["intervals"] == len(sums[event])
        assert row["total"] * executions == pytest.approx(row["mean"] * row["intervals"])
        assert row["cv"] == pytest.approx(sums[event].std(ddof=0) / abs(sums[event].mean()))
    assert table.loc["task-clock", "unit"] == "msec"
    assert "total x executions = mean x intervals" in stats.COLUMNS_NOTE


def test_stats_says_an_uncounted_events_intervals_are_of_several_runs():
    """Issue #41: "2 of 198 intervals" for 3 repeats, as `runs=['run0001-rep1', ...]`."""
    from autoprof.results.sanity_report import Report, Uncounted

    report = Report()
    runs = ["run0001-rep1", "run0001-rep2", "run0001-rep3", "run0002-rep1"]
    report.events.idle_intervals.append(Uncounted("x", "cpu", 2, 198, runs))
    [detail] = stats.sanity_from_report(report)["detail"]
    assert detail == (
        "uncounted in 2 of 198 intervals of 4 runs together, pmu=cpu, "
        "run0001-rep1 run0001-rep2 run0001-rep3 +1"
    )
