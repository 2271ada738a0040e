"""Every analysis on results of a real `autoprof profile` on this machine: software events,
tracepoints and hardware breakpoints on the example workload, whose breakpoint counts are known
before the run. The expected numbers come from the workload (expected_writes) or from
results.csv read with plain pandas, never from the analysis code under test.

Two builds of the workload are profiled once per module (--repeat 3, 10 ms intervals): A, and
B, which writes slot 0 twice as often. Five breakpoints take two runs (4 slots per run), so the
events come from runs of different lengths: every watched write traps, so a run lasts about as
long as its slots are written (slots 0, 8, 9, 10: 28 N writes; slot 11: 12 N), about 45 and 22
intervals, both above the correlation's default --min-overlap (10) on a quiet or a busy machine.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from autoprof.analysis import data, event_detail
from autoprof.analysis.correlation import MIN_OVERLAP
from autoprof.examples import build_writes, expected_writes, slot_addresses
from autoprof.run import outdir
from autoprof.testing.cli import invoke
from autoprof.util.records import read_json
from autoprof.util.status import RowStatus
from tests.helpers import png_size

REPO = Path(__file__).resolve().parents[1]
N = 4000  # writes N: slot i is written N * (i + 1) times
SLOTS = [0, 8, 9, 10, 11]  # five breakpoints: two runs, of lengths about 28 : 12
SOFTWARE = ["task-clock", "page-faults", "context-switches"]
NEVER = "syscalls:sys_enter_mkdir"  # the workload never calls it: an all-zero event
TRACEPOINTS = ["syscalls:sys_enter_write", "sched:sched_switch", NEVER]
pytestmark = pytest.mark.slow  # real profiles of two builds


@dataclass
class Profile:
    out: Path
    results: Path
    frame: pd.DataFrame  # results.csv read with plain pandas
    breakpoints: dict[str, int]  # event -> expected writes per execution


def profile(binary: Path, out: Path, slot0_factor: int) -> Profile:
    addresses = slot_addresses(binary)
    watched = {f"mem:{addresses[i]}:w": expected_writes(N, slot0_factor)[i] for i in SLOTS}
    args = [arg for event in [*SOFTWARE, *TRACEPOINTS, *watched] for arg in ("-e", event)]
    command = [sys.executable, "-m", "autoprof"]
    options = ["--interval", "10", "--repeat", "3", "--retries", "2", "-o", str(out)]
    proc = subprocess.run(
        [*command, "profile", *args, *options, "--", str(binary), str(N)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([*command, "aggregate", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    frame = pd.read_csv(out / outdir.RESULTS)
    if (frame.loc[frame["PMU"] == "tracepoint", "STATUS"] == RowStatus.NOT_SUPPORTED).all():
        pytest.skip("tracepoints are not readable here (perf_event_paranoid, tracefs)")
    return Profile(out, out / outdir.RESULTS, frame, watched)


@pytest.fixture(scope="module")
def real(writes, tmp_path_factory) -> tuple[Profile, Profile]:
    """`writes` (conftest) skips where perf, cc or hardware breakpoints are missing."""
    root = tmp_path_factory.mktemp("e2e")
    twice = build_writes(root / "b", slot0_factor=2)
    assert slot_addresses(writes) == slot_addresses(twice)  # same events in both builds
    return profile(writes, root / "out-a", 1), profile(twice, root / "out-b", 2)


def run_of(frame: pd.DataFrame) -> dict[str, int]:
    return frame.groupby("EVENT_NAME")["RUN"].first().to_dict()


def run_lengths(frame: pd.DataFrame) -> dict[int, int]:
    """Intervals of each run: the longest of its repeats."""
    return (frame.groupby(["RUN", "REPEAT"])["INDEX"].max() + 1).groupby("RUN").max().to_dict()


def pandas_series(frame: pd.DataFrame, value: str = "SAMPLE_VALUE") -> pd.DataFrame:
    """The interval series as the issue defines it, built with plain pandas: mean over
    locations per (event, run, repeat, interval), then mean over runs and repeats by INDEX."""
    per = frame.groupby(["EVENT_NAME", "RUN", "REPEAT", "INDEX"])[value].mean()
    return per.groupby(["INDEX", "EVENT_NAME"]).mean().unstack("EVENT_NAME")


def test_the_profile_counts_the_breakpoints_exactly(real):
    for prof in real:
        totals = prof.frame.groupby("EVENT_NAME")["SAMPLE_VALUE"].sum()
        for event, writes in prof.breakpoints.items():
            assert totals[event] == 3 * writes, event  # 3 repeats
        lengths = run_lengths(prof.frame)
        assert len(lengths) == 2 and lengths[1] != lengths[2], lengths


def test_stats_totals_and_samples_match_the_results(real, tmp_path):
    a = real[0]
    run = invoke("analyze", "stats", a.results, "-o", tmp_path)
    assert run.returncode == 0, run.output
    assert "sanity lists from the report.json" in run.output
    table = pd.read_csv(tmp_path / "stats.csv", index_col="event")
    for event, writes in a.breakpoints.items():
        assert table.loc[event, "total"] == writes  # mean over repeats of each run's total
        assert table.loc[event, "repeats"] == 3 and table.loc[event, "pmu"] == "breakpoint"
    counted = a.frame.groupby("EVENT_NAME")["SAMPLE_VALUE"].count()
    rows = a.frame.groupby("EVENT_NAME").size()
    assert table["samples"].to_dict() == counted.to_dict()
    assert table["no_value"].to_dict() == (rows - counted).to_dict()
    assert table.loc[NEVER, "all_zero"] and table["all_zero"].sum() == 1
    summary = pd.read_csv(tmp_path / "stats_summary.csv").set_index("metric")["value"]
    assert int(summary["events"]) == len(SOFTWARE) + len(TRACEPOINTS) + len(SLOTS)
    assert int(summary["all-zero events"]) == 1
    assert (int(summary["runs"]), int(summary["repeats"])) == (2, 3)
    assert int(summary["intervals (max per run)"]) == max(run_lengths(a.frame).values())
    report = read_json(a.out / outdir.REPORT)
    idle = {item["event"] for item in report["events"]["idle_intervals"]}
    assert int(summary["idle intervals events"]) == len(idle)


def test_correlation_over_real_series_of_runs_of_different_lengths(real, tmp_path):
    a = real[0]
    run = invoke("analyze", "correlation", a.results, "-o", tmp_path)
    assert run.returncode == 0, run.output
    matrix = pd.read_csv(tmp_path / "correlation_matrix.csv", index_col="event")
    excluded = pd.read_csv(tmp_path / "correlation_excluded.csv").set_index("event")["reason"]
    assert excluded[NEVER] == "all zero" and f"{NEVER} (all zero)" in run.output
    series = pandas_series(a.frame)
    varying = [e for e in series.columns if series[e].nunique() > 1]
    assert sorted(matrix.index) == sorted(varying) == sorted(matrix.columns)
    assert set(matrix.index) | set(excluded.index) == set(series.columns)
    assert set(a.breakpoints) <= set(matrix.index)
    expected = series[matrix.index].corr(min_periods=MIN_OVERLAP)  # runs aligned by INDEX
    np.testing.assert_allclose(matrix.to_numpy(), expected.to_numpy(), atol=1e-5)
    assert png_size(tmp_path / "correlation_heatmap.png") == (1000, 850)


def test_correlation_needs_enough_common_intervals(real, tmp_path):
    a = real[0]
    lengths = run_lengths(a.frame)
    short, long = sorted(lengths, key=lengths.get)
    need = lengths[short] + 1  # more than the shorter run has
    run = invoke("analyze", "correlation", a.results, "-o", tmp_path, "--min-overlap", need)
    assert run.returncode == 0, run.output
    excluded = pd.read_csv(tmp_path / "correlation_excluded.csv").set_index("event")["reason"]
    matrix = pd.read_csv(tmp_path / "correlation_matrix.csv", index_col="event")
    runs = run_of(a.frame)
    assert {runs[e] for e in matrix.index} == {long}
    in_short = [e for e, r in runs.items() if r == short and e != NEVER]
    assert all(excluded[e] == f"fewer than {need} intervals" for e in in_short), excluded


def test_anchor_needs_the_anchor_in_every_run_of_the_chosen_events(real, tmp_path):
    a = real[0]
    runs = run_of(a.frame)
    other = 3 - runs["task-clock"]  # the run without task-clock
    run = invoke("analyze", "correlation", a.results, "-o", tmp_path, "--anchor", "task-clock")
    assert run.returncode == 2
    assert f"missing in run(s) {other}" in run.stderr and "Traceback" not in run.output
    assert len(run.stderr.strip().splitlines()) == 1
    # the events of task-clock's run, per msec of task-clock
    chosen = [e for e, r in runs.items() if r == runs["task-clock"] and e != NEVER]
    pattern = "^(" + "|".join(re.escape(e) for e in chosen) + ")$"
    args = ["--anchor", "task-clock", "--events", pattern]
    run = invoke("analyze", "correlation", a.results, "-o", tmp_path / "per", *args)
    assert run.returncode == 0, run.output
    excluded = pd.read_csv(tmp_path / "per" / "correlation_excluded.csv")
    assert dict(excluded.to_numpy())["task-clock"] == "constant"  # task-clock / task-clock
    matrix = pd.read_csv(tmp_path / "per" / "correlation_matrix.csv", index_col="event")
    frame = a.frame[a.frame["RUN"] == runs["task-clock"]]
    clock = frame[frame["EVENT_NAME"] == "task-clock"].set_index(["REPEAT", "INDEX"])
    ratio = frame.join(clock["SAMPLE_VALUE"].rename("CLOCK"), on=["REPEAT", "INDEX"])
    ratio["RATIO"] = ratio["SAMPLE_VALUE"] / ratio["CLOCK"].replace(0, np.nan)
    expected = pandas_series(ratio, "RATIO")[matrix.index].corr(min_periods=MIN_OVERLAP)
    np.testing.assert_allclose(matrix.to_numpy(), expected.to_numpy(), atol=1e-5)


def test_event_detail_plots_against_real_seconds(real, tmp_path):
    a = real[0]
    slot11 = next(e for e, w in a.breakpoints.items() if w == 12 * N)
    run = invoke(
        "analyze", "event-detail", a.results, "-e", "task-clock", "-e", slot11, "-o", tmp_path
    )
    assert run.returncode == 0, run.output
    assert png_size(tmp_path / "event_detail.png") == (1000, 500)
    assert (tmp_path / "event_detail.svg").read_text().lstrip().startswith("<?xml")
    intervals = data.per_interval(data.load(a.results))
    lines = event_detail.timelines(intervals, ["task-clock"], rate=True)
    clock = a.frame[a.frame["EVENT_NAME"] == "task-clock"].sort_values(["REPEAT", "INDEX"])
    np.testing.assert_allclose(lines["TIME"], clock["TIME"])  # perf's timestamps, as they are
    for folder in outdir.run_folders(a.out):
        record = outdir.read_run_record(folder)
        last = a.frame.loc[
            (a.frame["RUN"] == record.run) & (a.frame["REPEAT"] == record.repeat), "TIME"
        ].max()
        # seconds of this very run: at least one 10 ms interval, at most the run's wall time (no
        # share of the wall time: a loaded machine stretches perf's start-up, not the counting)
        assert 0.01 <= last <= record.elapsed_s
    # msec of CPU per second of each interval's real length: rate x length gives back perf's
    # count, and one single-threaded process runs at most ~1000 msec/s (perf reads the counters
    # a little after each timestamp: margin). A loaded machine lowers the rate, never raises it.
    length = clock["TIME"] - clock.groupby("REPEAT")["TIME"].shift().fillna(0.0)
    np.testing.assert_allclose(lines["VALUE"] * length.to_numpy(), clock["SAMPLE_VALUE"])
    assert lines["VALUE"].max() <= 1500, lines["VALUE"].describe()


def test_compare_two_builds_finds_the_doubled_breakpoint(real, tmp_path):
    a, b = real
    run = invoke("analyze", "compare", a.results, b.results, "-o", tmp_path)
    assert run.returncode == 0, run.output
    assert "warning" not in run.stderr  # both manifests: the same CPU
    table = pd.read_csv(tmp_path / "compare.csv").set_index("event")
    doubled = next(e for e, w in a.breakpoints.items() if b.breakpoints[e] == 2 * w)
    row = table.loc[doubled]
    assert (row["total_a"], row["total_b"], row["ratio"]) == (N, 2 * N, 2.0)
    assert row["significant"] and row["note"] == "exact change (no variance)"
    for event in set(a.breakpoints) - {doubled}:
        assert table.loc[event, "ratio"] == 1.0 and not table.loc[event, "significant"]
        assert table.loc[event, "note"] == "same in every repeat"
    assert table.loc[NEVER, "note"] == "same in every repeat"  # zero in every repeat
    tested = table["p_value"].notna()
    assert tested.any() and (table.loc[tested, "q_value"] >= table.loc[tested, "p_value"]).all()
    assert np.isnan(table.loc[NEVER, "log2_ratio"])  # 0 / 0: not plotted
    assert png_size(tmp_path / "compare.png") == (1000, 500)  # 1.5 in + 10 bars x 0.35 in


def test_the_scripts_run_on_real_results(real, tmp_path):
    script, results_path = REPO / "analyze" / "correlation.py", real[0].results
    proc = subprocess.run(
        [sys.executable, str(script), str(results_path), "-o", str(tmp_path), "--method=spearman"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    matrix = pd.read_csv(tmp_path / "correlation_matrix.csv", index_col="event")
    # means over repeats summed in another order differ in the last bits; equal means must tie
    series = pandas_series(real[0].frame)[matrix.index].map(lambda v: float(f"{v:.12g}"))
    expected = series.corr(method="spearman", min_periods=MIN_OVERLAP)
    np.testing.assert_allclose(matrix.to_numpy(), expected.to_numpy(), atol=1e-5)  # %.6g
