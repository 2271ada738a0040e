"""Metric values from results frames built by hand: same-run vs cross-run, thresholds, the
TMA tree, flags for out-of-range and multiplexed inputs."""

from __future__ import annotations

import pandas as pd
import pytest

from autoprof.analysis import data
from autoprof.analysis import metrics as analysis
from autoprof.metrics import catalog as metric_catalog
from autoprof.metrics.tree import Node, tree_lines


def frame(rows):
    """rows: (event, run, index, value[, status]); one CPU, 0.1 s intervals."""
    records = [
        {
            "EVENT_NAME": event,
            "INDEX": index,
            "TIME": 0.1 * (index + 1),
            "SAMPLE_VALUE": value,
            "RUN": run,
            "REPEAT": 1,
            "PMU": "cpu",
            "PERCENT_RUNNING": 100.0 if len(rest) == 0 else 50.0,
            "STATUS": rest[0] if rest else "ok",
        }
        for event, run, index, value, *rest in rows
    ]
    return data.prepare(pd.DataFrame(records))


@pytest.fixture
def skx(intel_dir):
    return metric_catalog.load(intel_dir, "SKX").metrics


def test_tma_level1_same_run_with_smt_off(skx):
    # two intervals in run 1: slots = 4 * THREAD = 4 * 1,000,000; IDQ not delivered 1,200,000
    rows = [
        ("IDQ_UOPS_NOT_DELIVERED.CORE", 1, 0, 500_000),
        ("IDQ_UOPS_NOT_DELIVERED.CORE", 1, 1, 700_000),
        ("CPU_CLK_UNHALTED.THREAD", 1, 0, 400_000), ("CPU_CLK_UNHALTED.THREAD", 1, 1, 600_000),
        ("IDQ_UOPS_NOT_DELIVERED.CYCLES_0_UOPS_DELIV.CORE", 2, 0, 100_000),
        ("IDQ_UOPS_NOT_DELIVERED.CYCLES_0_UOPS_DELIV.CORE", 2, 1, 150_000),
        ("CPU_CLK_UNHALTED.THREAD", 2, 0, 500_000), ("CPU_CLK_UNHALTED.THREAD", 2, 1, 500_000),
    ]  # fmt: skip
    chosen = [skx["Frontend_Bound"], skx["Fetch_Latency"]]
    values = analysis.compute(frame(rows), chosen, {"HYPERTHREADING_ON": 0, "THREADS_PER_CORE": 1})
    fe, fetch = values["Frontend_Bound"], values["Fetch_Latency"]
    assert fe.value == pytest.approx(100 * 1_200_000 / 4_000_000)  # 30 %
    assert fe.scope == "same-run" and fe.run == 1 and fe.crossed
    assert list(fe.series) == pytest.approx([100 * 500_000 / 1_600_000, 100 * 700_000 / 2_400_000])
    # Fetch_Latency reads CPU_CLK_UNHALTED.THREAD from its own run (2): 4 * 250,000 / 4 * 1e6
    assert fetch.value == pytest.approx(25.0) and fetch.scope == "same-run" and fetch.run == 2
    assert fetch.crossed  # 25 > 10 and its parent 30 > 15
    table = analysis.table(values).set_index("METRIC")
    assert table.loc["Fetch_Latency", "THRESHOLD"] == "crossed"
    lines = tree_lines(
        [
            Node(v.metric.name, v.metric.parent, v.value, v.metric.unit, v.crossed)
            for v in values.values()
        ]
    )
    assert "Frontend_Bound" in lines[0] and "Fetch_Latency" in lines[1] and "<==" in lines[1]


def test_cross_run_flags_and_missing(skx):
    rows = [
        ("INST_RETIRED.ANY", 1, 0, 2_000_000),
        ("CPU_CLK_UNHALTED.THREAD", 2, 0, 1_000_000),
        ("IDQ_UOPS_NOT_DELIVERED.CORE", 2, 0, 9_000_000, "multiplexed"),
    ]
    chosen = [skx["Info_Thread_IPC"], skx["Frontend_Bound"], skx["cpi"]]
    values = analysis.compute(frame(rows), chosen, {"HYPERTHREADING_ON": 0})
    ipc = values["Info_Thread_IPC"]
    assert ipc.value == 2.0 and ipc.scope == "cross-run" and ipc.run is None and not ipc.flag
    fe = values["Frontend_Bound"]
    assert fe.value == pytest.approx(225.0)
    assert fe.flag == "multiplexed input; outside 0-100%"
    assert values["cpi"].value == 0.5
    rows.pop(0)
    missing = analysis.compute(frame(rows), [skx["cpi"]], {})["cpi"]
    assert missing.missing == ["INST_RETIRED.ANY: not in the results"]
    assert pd.isna(analysis.table({"cpi": missing})["VALUE"].iloc[0])


def test_percore_event_read_per_thread_is_flagged(intel_dir):
    spr = metric_catalog.load(intel_dir, "SPR").metrics
    metric = spr["Info_Thread_Slots_Utilization"]  # ( a ) / ( b / 2 ) if smt_on else 1
    rows = [("TOPDOWN.SLOTS", 1, 0, 4_000_000)]
    on = analysis.compute(frame(rows), [metric], {"HYPERTHREADING_ON": 1})[metric.name]
    assert on.value == 2.0 and on.flag == ":percore event read per thread"
    off = analysis.compute(frame(rows), [metric], {"HYPERTHREADING_ON": 0})[metric.name]
    assert off.value == 1.0 and off.flag == ""


def test_metrics_result_renders_the_tree_as_text_and_the_table_as_csv(skx, tmp_path):
    from rich.console import Console

    from autoprof.analysis import renderers

    rows = [
        ("IDQ_UOPS_NOT_DELIVERED.CORE", 1, 0, 1_200_000),
        ("CPU_CLK_UNHALTED.THREAD", 1, 0, 1_000_000),
    ]
    values = analysis.compute(frame(rows), [skx["Frontend_Bound"]], {"HYPERTHREADING_ON": 0})
    result = analysis.Metrics(values, "SKX")
    assert result.notes()[0].startswith("1 of 1 metrics computed (1 same-run, 0 cross-run)")
    text = tmp_path / "tree.txt"
    assert renderers.render(result, text, tmp_path, Console()) == [text]
    shown = text.read_text()
    assert "Top-down tree (SKX)" in shown and "Frontend_Bound" in shown and "30.0" in shown
    assert "[bold]" not in shown  # the markup is rendered, not written
    table = tmp_path / "m.csv"
    renderers.render(result, table, tmp_path, Console())
    written = pd.read_csv(table).set_index("METRIC")
    assert written.loc["Frontend_Bound", "VALUE"] == pytest.approx(30.0)
