"""`autoprof report`: per-function samples of several events, on a live recording of the
hotspots example (three functions of known relative cost) and checked against perf report."""

from __future__ import annotations

import csv
import io
import re
import subprocess
from pathlib import Path

import pytest

from autoprof.functions.render import CsvRenderer
from autoprof.functions.table import base_event, build
from autoprof.perf.script import Frame, Sample
from autoprof.testing.cli import invoke


def perf_report_totals(data: Path) -> dict[str, tuple[int, int]]:
    """event -> (samples, event count), summed from `perf report`'s per-process rows (its
    "# Samples:" header rounds to 1K)."""
    argv = ["perf", "report", "--stdio", "-i", str(data), "--no-children", "--sort", "comm"]
    argv += ["-F", "sample,period", "-g", "none"]
    text = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    totals: dict[str, tuple[int, int]] = {}
    event = None
    for line in text.splitlines():
        if m := re.match(r"# Samples: .* of event '([^']+)'", line):
            event = m.group(1)
            totals[event] = (0, 0)
        elif event and (m := re.match(r"\s+(\d+)\s+(\d+)\s+\S", line)):
            samples, count = totals[event]
            totals[event] = (samples + int(m.group(1)), count + int(m.group(2)))
    return totals


def read_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.slow
def test_report_ranks_the_three_functions_and_sums_to_perf_report(
    hotspots_recording: Path,
):
    result = invoke("report", str(hotspots_recording), "--csv", "-")
    assert result.returncode == 0, result.output
    rows = read_csv(result.output)
    by_name = {row["symbol"]: row for row in rows}
    clock = {name: int(by_name[name]["cpu-clock"]) for name in ("heavy", "medium", "touch")}
    assert clock["heavy"] > clock["medium"] > clock["touch"] > 0
    assert 1.1 < clock["heavy"] / clock["medium"] < 2.2  # 3 : 2 units of the same work
    faults = {row["symbol"]: float(row["page-faults %"]) for row in rows}
    assert max(faults, key=faults.get) == "touch"
    # the columns sum to perf's own totals, samples and weights
    totals = perf_report_totals(hotspots_recording / "perf.data")
    for event in ("cpu-clock", "page-faults"):
        samples, count = totals[event]
        assert sum(int(r[f"{event} samples"]) for r in rows) == samples
        assert sum(int(r[event]) for r in rows) == count
    assert abs(sum(float(r["cpu-clock %"]) for r in rows) - 100) < 0.01


@pytest.mark.slow
def test_terminal_table_and_other_groupings(hotspots_recording: Path):
    table = invoke("report", str(hotspots_recording), "--top", "3")
    assert table.returncode == 0, table.output
    assert "heavy" in table.output and "3 of" in table.output
    dso = invoke("report", str(hotspots_recording), "--by", "dso", "--csv", "-")
    assert "hotspots" in {row["dso"] for row in read_csv(dso.output)}
    bad = invoke("report", str(hotspots_recording), "--sort", "cycles")
    assert bad.returncode != 0 and "cycles: not sampled" in bad.output


def sample(event: str, period: int, *frames: str) -> Sample:
    return Sample("p", None, "1", period, event, tuple(Frame(f, dso="/bin/p") for f in frames))


def test_ratios_where_both_events_were_sampled():
    samples = [
        sample("cycles:u", 300, "main", "f"),
        sample("instructions:u", 100, "main", "f"),
        sample("cycles:u", 50, "main", "g"),
    ]
    table = build(samples, sort="cycles:u")
    assert [r.key for r in table.rows] == ["f", "g"]
    assert table.ratios == [("cycles:u", "instructions:u", "cycles/instr")]
    f, g = table.rows
    assert table.ratio(f, "cycles:u", "instructions:u") == 3.0
    assert table.ratio(g, "cycles:u", "instructions:u") is None  # no instructions sampled in g
    rows = read_csv(CsvRenderer().render(table))
    assert rows[0]["cycles/instr"] == "3" and rows[1]["cycles/instr"] == ""
    assert base_event("sched:sched_switch") == "sched:sched_switch"


@pytest.mark.parametrize("event", ["instructions", "cycles"])
def test_a_traces_table_is_titled_by_what_the_trace_counted(tmp_path: Path, event: str):
    """A kept trace graph's weights are every instruction (or its cycles), not samples: the
    table says so in its title and caption; a sampled recording's says samples."""
    from autoprof.flame import kept
    from autoprof.flame.fold import Folded

    folded = Folded({("calls", "main", "leaf"): 300, ("calls", "main"): 100}, event=event)
    kept.save(tmp_path / "trace", folded, tmp_path / "calls.log", [tmp_path / "calls"], False)
    shown = invoke("report", str(tmp_path / "trace"))
    assert shown.returncode == 0, shown.output
    text = " ".join(shown.stdout.split())  # rich wraps the title and caption to the table
    assert f"self {event} by symbol" in text and "samples" not in text
    assert f"weights are the {event} the trace counted" in text


def test_the_terminal_table_gives_a_clock_events_weight_in_ns():
    """Issue #41: report's cpu-clock weights are nanoseconds, shown without a unit."""
    from rich.console import Console

    from autoprof.functions.render import TopRenderer

    table = build([sample("cpu-clock:u", 250000, "main", "f"), sample("page-faults", 3, "main")])
    console = Console(width=200, record=True, file=io.StringIO())
    TopRenderer(5, "t", console).draw(table, console)
    shown = console.export_text()
    assert "cpu-clock:u (ns)" in shown and "page-faults (" not in shown
    assert read_csv(CsvRenderer().render(table))[0]["cpu-clock:u"] == "250000"  # CSV: bare
