"""Issue #23, items 9-14: the runner, the CLI and the files it writes stand up to odd input
(long refused events, unwritable paths, broken files, huge repeats, tiny benchmarks, event names
that are formulas)."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from autoprof.analysis import bench as stats
from autoprof.benchmark.measure import BenchOptions, BenchResult, CommandResult, Repetition
from autoprof.catalog.model import Event
from autoprof.perf import command as perf_command
from autoprof.run import outdir
from autoprof.run.options import MAX_REPEAT, ProfileOptions
from autoprof.run.runner import Runner, Task
from autoprof.testing.cli import invoke, one_error_line
from autoprof.util.status import RunStatus

DATA = Path(__file__).parent / "data" / "perf61"
LONG = "cpu/event=0x3c,umask=0x0,name=CPU_CLK_UNHALTED.THREAD_P_A_VERY_LONG_EVENT_NAME_FOR_TESTING/"
MIDDLE = (
    "msr/tsc,name=A_VERY_LONG_EVENT_NAME_THAT_PERF_CUTS_AT_BOTH_ENDS_OF_ITS_MESSAGE,"
    "nosuchterm=1,period=1000/"
)


# --- 9: perf shortens a long event in its error; the runner still finds it ------------------


@pytest.mark.parametrize(
    ("recorded", "spec"),
    [("long_refused.stderr.txt", LONG), ("long_refused_middle.stderr.txt", MIDDLE)],
)
def test_perf_shortened_event_names_the_event(recorded, spec):
    failure = perf_command.open_failure((DATA / recorded).read_text())
    assert failure is not None and failure.event != spec  # perf 6.1 cut it: `...THREAD_P_..`
    assert perf_command.shown_as(failure.event, spec)
    assert not perf_command.shown_as(failure.event, "task-clock")
    assert not perf_command.shown_as(failure.event, spec[:40])  # too short to have been cut
    assert not perf_command.shown_as("..", "anything")


@pytest.mark.needs_perf
def test_long_refused_event_keeps_the_software_events_of_its_run(tmp_path):
    """This VM has no PMU: perf refuses the `cpu/` event with a shortened name; the run is
    counted again without it, and task-clock and page-faults are kept."""
    events = (
        Event("LONG.HARDWARE", "cpu", LONG),
        Event("task-clock", "software", "task-clock"),
        Event("page-faults", "software", "page-faults"),
    )
    parts = Runner(tmp_path, ["true"], ProfileOptions(interval_ms=None)).run_task(
        Task(1, 1, events)
    )
    assert [p.status for p in parts] == [RunStatus.OK]
    assert [u.name for u in parts[0].unsupported] == ["LONG.HARDWARE"]
    counted = (outdir.run_dir(tmp_path, 1, 1) / outdir.PERF_OUTPUT).read_text()
    assert "task-clock" in counted and "page-faults" in counted


# --- 12: a huge --repeat is refused, and tasks are made lazily ------------------------------


def test_huge_repeat_is_one_line():
    result = invoke("profile", "--repeat", "1000000000", "-e", "task-clock", "--", "true")
    assert result.returncode == 2
    assert result.stderr.startswith("autoprof: error: ") and str(MAX_REPEAT) in result.stderr
    assert result.stderr.count("\n") == 1


def test_planned_pairs_are_made_lazily():
    pairs = outdir.planned(10**6, MAX_REPEAT, part=2, parts=3)
    assert next(pairs) == (1, 2) and next(pairs) == (1, 5)  # 10^10 pairs: none made ahead
    assert outdir.planned_count(10**6, MAX_REPEAT, 2, 3) == -(-(10**10 - 1) // 3)


# --- 13: bench: no negative times, ratio intervals stay positive ----------------------------


def test_ratio_interval_of_noisy_short_runs_stays_positive():
    a = [0.002, 0.0001, 0.004, 0.0002, 0.003]
    b = [0.0001, 0.006, 0.0002, 0.0001, 0.005]
    r = stats.ratio("wall_s", a, b)
    assert 0 < r.low < r.ratio < r.high  # r +- half reached below zero
    assert r.low * r.high == pytest.approx(r.ratio**2)  # symmetric on the log scale


def test_runs_shorter_than_start_up_are_too_short_to_measure():
    reps = [Repetition(i, w, 0.0, 0.0) for i, w in enumerate([0.0, 0.0002, 0.0], 1)]
    result = BenchResult([], {}, BenchOptions(), [CommandResult(["true"], reps)], startup_s=0.001)
    found = stats.warnings(result)
    assert len(found) == 1 and "2 of 3 runs" in found[0] and "too short to measure" in found[0]


@pytest.mark.needs_perf
@pytest.mark.slow
def test_bench_of_an_empty_program_reports_no_negative_time(tmp_path):
    out = tmp_path / "bench.json"
    result = invoke("bench", "-n", "5", "--export-json", out, "--", "true", "--", "true")
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    walls = [r["wall_s"] for c in data["commands"] for r in c["repetitions"]]
    assert min(walls) >= 0, walls  # half of them are below the median `true` subtracted
    ratio = next(r for r in data["commands"][1]["ratio_to_first"] if r["metric"] == "wall_s")
    assert ratio["low"] is None or ratio["low"] > 0, ratio  # None: no interval (a mean of 0)
    assert np.isfinite(walls).all()


# --- 10: one line where a traceback was --------------------------------------------------

PROFILE = Path(__file__).parent / "data" / "profile-ed64973"


@pytest.fixture
def under_a_file(tmp_path) -> Path:
    """A path no one may write, root included: its parent is a regular file."""
    (tmp_path / "file").write_text("")
    return tmp_path / "file" / "x"


def test_unwritable_outputs_are_one_line(tmp_path, under_a_file):
    results = str(PROFILE / "results.csv")
    store = f"sqlite:///{tmp_path / 'store.db'}"
    assert invoke("upload", PROFILE, "--store", store).returncode == 0
    run_id = "20fd6379"
    for args in [
        ("aggregate", PROFILE, "-o", under_a_file),
        ("analyze", "stats", results, "-o", under_a_file),
        ("runs", "export", run_id, "-o", under_a_file, "--store", store),
    ]:
        one_error_line(invoke(*args), str(under_a_file.parent), "Not a directory")


@pytest.mark.needs_perf
def test_unwritable_outputs_of_measuring_commands_are_one_line(under_a_file):
    for args in [
        ("profile", "-e", "task-clock", "-o", under_a_file, "--", "true"),
        ("record", "-o", under_a_file, "--", "true"),
        ("memory", "-o", under_a_file, "--", "true"),
        ("bench", "-n", "2", "--export-json", under_a_file, "--", "true"),
    ]:
        one_error_line(invoke(*args), str(under_a_file), "Not a directory")


def test_an_events_file_that_is_not_utf8_is_one_line(tmp_path):
    events = tmp_path / "events.txt"
    events.write_bytes(b"task-clock\n\xff\xfe\n")
    one_error_line(invoke("profile", "--events", events, "--", "true"), "not UTF-8", "0xff")


def test_a_deeply_nested_manifest_is_one_line(tmp_path):
    out = tmp_path / "out"
    shutil.copytree(PROFILE, out)
    (out / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    one_error_line(invoke("upload", out, "--store", f"sqlite:///{tmp_path / 's.db'}"), "nested")
    one_error_line(invoke("aggregate", out), "nested too deeply")  # #29: refused, as upload does


def test_click_usage_errors_are_one_line():
    one_error_line(invoke("profile", "--no-such-flag"), "--no-such-flag", "autoprof profile --help")
    one_error_line(invoke("no-such-command"), "no-such-command")


# --- 14: names that are formulas: refused when not planned, quoted for spreadsheets ----------

FORMULA = '=HYPERLINK("http://x.example/?a,b","click")'


def renamed(tmp_path: Path, old: str, new: str, plan: bool) -> Path:
    """A copy of the recorded profile whose runs (and, with `plan`, whose plan) call the event
    `old` by the name `new`, as an edited file would; results.csv and report.json removed."""
    out = tmp_path / "out"
    shutil.copytree(PROFILE, out)
    (out / "results.csv").unlink()
    (out / "report.json").unlink()
    paths = list((out / "runs").glob("*/run.json")) + ([out / "manifest.json"] if plan else [])
    for path in paths:
        data = json.loads(path.read_text())
        events = list(data.get("events", []))  # the same event objects, in a new list
        for run in data.get("plan", {}).get("runs", []):
            events += run["events"]
        for event in events:
            if event["name"] == old:
                event["name"] = new
        path.write_text(json.dumps(data))
    return out


def test_aggregate_refuses_events_not_in_the_plan(tmp_path):
    out = renamed(tmp_path, "task-clock", FORMULA, plan=False)
    error = one_error_line(invoke("aggregate", out), "1 events not in the plan", repr(FORMULA))
    assert "left out of" in error
    assert "HYPERLINK" not in (out / "results.csv").read_text()
    assert "mem:0x10000:w" in (out / "results.csv").read_text()  # the planned events stay
    assert json.loads((out / "report.json").read_text())["unknown_events"] == [FORMULA]


def test_upload_refuses_results_with_events_not_in_the_plan(tmp_path):
    out = tmp_path / "out"
    shutil.copytree(PROFILE, out)
    text = (out / "results.csv").read_text().replace("\ntask-clock,", '\n"=1+2",')
    (out / "results.csv").write_text(text)
    store = f"sqlite:///{tmp_path / 's.db'}"
    one_error_line(invoke("upload", out, "--store", store), "not in the plan", "'=1+2'")
    assert "no run" in invoke("runs", "export", "20fd6379", "--store", store).stderr


def test_planned_quoted_names_aggregate_and_export_excel_safe(tmp_path):
    """A planned name with `"` and `,` (pandas' duplicate categories error before) goes through
    aggregate, upload and export; --excel-safe quotes it for spreadsheets."""
    import csv

    from autoprof.results import csvfile

    out = renamed(tmp_path, "task-clock", FORMULA, plan=True)
    assert invoke("aggregate", out).returncode == 0
    frame = csvfile.read_csv(out / "results.csv")
    assert FORMULA in set(frame["EVENT_NAME"])
    store = f"sqlite:///{tmp_path / 's.db'}"
    assert invoke("upload", out, "--store", store).returncode == 0
    raw, safe = tmp_path / "raw.csv", tmp_path / "safe.csv"
    assert invoke("runs", "export", "20fd6379", "-o", raw, "--store", store).returncode == 0
    assert (
        invoke(
            "runs", "export", "20fd6379", "-o", safe, "--excel-safe", "--store", store
        ).returncode
        == 0
    )
    assert raw.read_bytes() == (out / "results.csv").read_bytes()
    names = {row["EVENT_NAME"] for row in csv.DictReader(safe.open())}
    assert "'" + FORMULA in names and FORMULA not in names and "mem:0x10000:w" in names


def test_spreadsheet_cells():
    from autoprof.util import spreadsheet

    assert spreadsheet.cell("=1+2") == "'=1+2"
    assert spreadsheet.cell("@SUM(A1)") == "'@SUM(A1)"
    assert spreadsheet.cell("+cmd") == "'+cmd" and spreadsheet.cell("-cmd") == "'-cmd"
    assert spreadsheet.cell("-12.5") == "-12.5" and spreadsheet.cell("+3") == "+3"  # numbers
    assert spreadsheet.cell("task-clock") == "task-clock"
    assert spreadsheet.csv_text('a,b\n"=x,y",-1\n') == 'a,b\n"\'=x,y",-1\n'


def test_bench_csv_export_excel_safe(tmp_path):
    from autoprof.commands.bench import _export

    reps = [Repetition(1, -0.0, 0.0, 0.0)]
    result = BenchResult([], {}, BenchOptions(), [CommandResult(["=calc", "-x"], reps)])
    path = tmp_path / "bench.csv"
    _export(result, {}, None, path, excel_safe=True)
    lines = path.read_text().splitlines()
    assert lines[1].startswith("'=calc -x,1,wall_s,-0.0,") and len(lines) == 4


# --- 11: aggregate streams a run's perf.csv in chunks of whole intervals --------------------


def _profile_of(out: Path, runs: list[tuple[list[tuple[str, str]], bytes]]) -> Path:
    """A profile folder of real perf 6.1 -I output: one run per (events (name, pmu), perf.csv)."""
    from autoprof.catalog.facts import MachineFacts
    from autoprof.perf.unsupported import Unsupported

    plan = {"runs": [{"events": [{"name": n, "pmu": p} for n, p in ev]} for ev, _ in runs]}
    machine = MachineFacts("test", "test", "host", "6.1", "6.1", False, False, 2)
    out.mkdir()
    outdir.write_manifest(out, outdir.Manifest("id", "0.1.0", "", ["true"], machine, plan))
    argv = ["perf", "stat", "-x", ",", "-I", "100", "--", "true"]
    for number, (events, perf_csv) in enumerate(runs, 1):
        folder = outdir.run_dir(out, number, 1)
        folder.mkdir(parents=True)
        (folder / outdir.PERF_OUTPUT).write_bytes(perf_csv)
        refs = [outdir.EventRef(n, p, n, n) for n, p in events]
        record = outdir.RunRecord(number, 1, refs, argv, status=RunStatus.OK)
        record.unsupported = [Unsupported("instructions", "cpu", "refused")]
        outdir.write_run_record(folder, record)
    return out


def test_chunked_aggregation_equals_the_whole_file(tmp_path, monkeypatch):
    from autoprof.perf import stat_arrow
    from autoprof.results import aggregate

    idle = (DATA / "interval_idle.csv").read_bytes()  # idle intervals between counted ones
    lines = [x for x in (DATA / "interval_percpu.csv").read_text().splitlines() if "," in x]
    stamps = sorted({x.split(",")[0] for x in lines})
    many = "".join(  # 40 copies of the recording's intervals, times advancing
        f"{float(x.split(',')[0]) + 10 * k:15.9f},{x.split(',', 1)[1]}\n"
        for k in range(40)
        for x in lines
    ).encode()
    assert len(stamps) > 1
    sw = [("task-clock", "software"), ("msr/tsc/", "msr"), ("instructions", "cpu")]
    runs = [
        ([("mem:0x406000:w", "breakpoint"), *sw, ("never-printed", "software")], idle),
        ([*sw, ("context-switches", "software"), ("sched:sched_switch", "tracepoint")], many),
    ]
    whole = _profile_of(tmp_path / "whole", runs)
    small = _profile_of(tmp_path / "small", runs)
    pieces = list(stat_arrow.chunks(small / "runs" / "run0002-rep1" / "perf.csv", ",", True, 300))
    assert len(pieces) > 20 and b"".join(pieces) == many
    for before, after in itertools.pairwise(pieces):  # an interval is never split
        assert after.split(b",")[0] != before.split(b"\n")[-2].split(b",")[0]
    aggregate.aggregate_to(whole)
    monkeypatch.setattr(stat_arrow, "CHUNK_BYTES", 300)  # a chunk is an interval or two
    aggregate.aggregate_to(small)
    assert (small / "results.csv").read_bytes() == (whole / "results.csv").read_bytes()
    report, reference = (json.loads((o / "report.json").read_text()) for o in (small, whole))
    assert report.pop("results") != reference.pop("results") and report == reference
    idle_events = {e["event"] for e in report["events"]["idle_intervals"]}
    assert {"task-clock", "msr/tsc/", "mem:0x406000:w"} <= idle_events  # 2 of 4 counted
    assert [e["event"] for e in report["events"]["not_counted"]] == ["never-printed"]
