"""aggregate on the faults users meet (issue 17 items 6, 7, 8) and results.csv for autoperf's
tools (issue 10): profile folders made of real perf output recorded on this VM
(tests/data/perf61, see its README), and live `perf stat -a` / `unshare -r` runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autoprof.catalog import machine
from autoprof.catalog.facts import MachineFacts
from autoprof.perf import stat_csv
from autoprof.results import aggregate, csvfile
from autoprof.run import outdir
from autoprof.testing.cli import invoke, one_error_line
from autoprof.util.status import RowStatus, RunStatus
from tests.helpers import PROFILE

DATA = Path(__file__).parent / "data" / "perf61"


def ref(name: str, pmu: str = "software", spec: str | None = None) -> outdir.EventRef:
    spec = spec or name
    label = name if ",name=" in spec else spec
    return outdir.EventRef(name=name, pmu=pmu, spec=spec, label=label)


def make_profile(out: Path, runs: list[tuple[list[outdir.EventRef], bytes | None, str]], **kw):
    """A profile folder: one run per (events, perf.csv bytes or None, status), planned as is
    (plus `extra_planned` runs that never ran)."""
    planned = [{"events": [{"name": e.name, "pmu": e.pmu} for e in events]} for events, *_ in runs]
    planned += [{"events": []}] * kw.pop("extra_planned", 0)
    plan = {"cpu": "test", "lower_bound": len(planned), "runs": planned}
    facts = MachineFacts("test", "test", "host", "6.1", "6.1", False, False, 2)
    facts.topology = kw.pop("topology", [])
    manifest = outdir.Manifest("test-id", "0.1.0", "", ["true"], facts, plan)
    out.mkdir(exist_ok=True)
    outdir.write_manifest(out, manifest)
    for number, (events, perf_csv, status) in enumerate(runs, 1):
        folder = outdir.run_dir(out, number, 1)
        folder.mkdir(parents=True)
        interval = perf_csv is not None and _interval(perf_csv)
        argv = ["perf", "stat", "-x", ",", *(["-I", "100"] if interval else []), "--", "true"]
        if perf_csv is not None:
            (folder / outdir.PERF_OUTPUT).write_bytes(perf_csv)
        record = outdir.RunRecord(number, 1, events, argv, status=status)
        outdir.write_run_record(folder, record)
    return out


def _interval(perf_csv: bytes) -> bool:
    """Whether perf wrote this with -I (as the run's argv must then say)."""
    try:
        return stat_csv.parse(perf_csv).interval
    except stat_csv.StatCsvError:
        return False


# item 6: an expected event with no row is "not counted", always


def test_header_only_perf_csv_reports_every_event_not_counted(tmp_path):
    header_only = (DATA / "enospc.csv").read_bytes()  # perf's real output: its header alone
    assert stat_csv.parse(header_only).frame.empty
    events = [ref("task-clock"), ref("page-faults")]
    out = make_profile(tmp_path / "out", [(events, header_only, RunStatus.OK)])
    report = aggregate.aggregate(out).report
    assert {e.event for e in report.events.not_counted} == {"task-clock", "page-faults"}
    assert report.rows == 0


# item 7: perf's `:u` names map back to the planned events, the modifier recorded


@pytest.mark.parametrize("name", ["rootless_interval.csv", "rootless_totals.csv"])
def test_rootless_modifier_names_map_to_the_planned_events(tmp_path, name):
    events = [
        ref("task-clock"),
        ref("syscalls:sys_enter_write", "tracepoint"),
        ref("page-faults"),
        ref("msr/tsc/", "msr"),
        ref("PAGE_FAULTS.RAW", "software", "software/config=2,config1=0/"),
        ref("TSC.NAMED", "msr", "msr/tsc,name=TSC.NAMED/"),
    ]
    data = (DATA / name).read_bytes()
    events = [e for e in events if e.label.encode() in data]
    out = make_profile(tmp_path / "out", [(events, data, RunStatus.OK)])
    result = aggregate.aggregate(out)
    frame, report = result.frame, result.report
    assert set(frame["EVENT_NAME"]) <= {e.name for e in events}
    assert "task-clock" in set(frame["EVENT_NAME"])
    assert frame["PMU"].notna().all()
    printed = {m.event: (m.printed, m.modifier) for m in report.events.modifiers}
    assert printed["task-clock"] == ("task-clock:u", "u")
    assert printed["syscalls:sys_enter_write"] == ("syscalls:sys_enter_writeu", "u")
    assert {m.modifier for m in report.events.modifiers} == {"u"}
    assert {m.event for m in report.events.modifiers} == {e.name for e in events}
    assert report.events.not_counted == []  # mapped, so not mistaken for missing


def test_rootless_live_run_maps_modifiers(tmp_path):
    if shutil.which("unshare") is None or shutil.which("perf") is None:
        pytest.skip("unshare or perf not found")
    target = tmp_path / "perf.csv"
    argv = ["perf", "stat", "-x,", "-o", str(target), "-e", "task-clock"]
    probe = subprocess.run(["unshare", "-r", *argv, "--", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no user namespace here: {probe.stderr.decode()[:200]}")
    out = make_profile(tmp_path / "out", [([ref("task-clock")], target.read_bytes(), "ok")])
    report = aggregate.aggregate(out).report
    assert report.events_measured == 1
    assert [m.printed for m in report.events.modifiers] == ["task-clock:u"]


# item 8: honest run counts, good lines kept, non-zero exit when nothing usable came out


def test_every_run_failed_exits_non_zero_with_one_line(tmp_path):
    header_only = (DATA / "enospc.csv").read_bytes()
    runs = [([ref("task-clock")], header_only, RunStatus.PERF_FAILED)] * 2
    out = make_profile(tmp_path / "out", runs)
    proc = invoke("aggregate", out)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        f"autoprof: error: nothing usable in {out}: 0 of 2 runs ok, 2 failed, "
        "no counted value (see report.json)"
    ]
    assert "runs finished" not in proc.stdout and "0 of 2" in proc.stdout
    report = json.loads((out / outdir.REPORT).read_text())  # the report is kept
    assert report["runs"]["ok"] == 0 and report["runs"]["finished"] == 2


def test_no_run_finished_exits_non_zero(tmp_path):
    out = make_profile(tmp_path / "out", [], extra_planned=6)
    (out / outdir.RUNS).mkdir()
    proc = invoke("aggregate", out)
    assert proc.returncode != 0
    assert "0 of 6 runs ok, 6 missing" in proc.stderr


def test_only_broken_files_exits_non_zero(tmp_path):
    runs = [([ref("task-clock")], b"\x00\xffnot perf at all\n", RunStatus.OK)]
    out = make_profile(tmp_path / "out", runs)
    proc = invoke("aggregate", out)
    assert proc.returncode != 0
    assert "1 broken files" in proc.stderr


def _whole_lines(data: bytes) -> int:
    lines = data.split(b"\n")[:-1]  # the text after the last newline is not a whole line
    return sum(1 for x in lines if x.strip() and not x.lstrip().startswith(b"#"))


@pytest.mark.slow  # parses every prefix of the file: thousands of parses
@pytest.mark.parametrize("name", ["interval_idle.csv", "interval_percpu.csv", "totals.csv"])
def test_a_cut_last_line_never_costs_the_whole_lines(name):
    data = (DATA / name).read_bytes()
    interval = name.startswith("interval")
    for cut in range(data.index(b"\n\n") + 2, len(data)):
        part = data[:cut]
        try:
            parsed = stat_csv.parse(part, ",", interval)
        except stat_csv.StatCsvError:
            assert _whole_lines(part) == 0, cut
            continue
        assert len(parsed.frame) >= _whole_lines(part), cut


def test_cli_keeps_the_good_lines_of_a_cut_file(tmp_path):
    data = (DATA / "interval_idle.csv").read_bytes()
    cut = data[: data.index(b"\n", data.index(b"0.200")) + 8]  # 4 whole lines, then a cut
    events = [ref("mem:0x406000:w", "breakpoint"), ref("task-clock"), ref("msr/tsc/", "msr")]
    events.append(ref("instructions", "cpu"))
    out = make_profile(tmp_path / "out", [(events, cut, RunStatus.OK)])
    proc = invoke("aggregate", out)
    assert proc.returncode == 3, proc.stderr  # written, with a line skipped (#41)
    assert proc.stderr.splitlines() == [
        f"autoprof: warning: {out}: skipped 1 broken file (runs/run0001-rep1/perf.csv: "
        "line 8: partial last line (interrupted run?)); results.csv holds the rest (status 3)"
    ]
    frame = csvfile.read_csv(out / outdir.RESULTS)
    assert len(frame) == 3  # the counted lines of the first interval (instructions: no value)
    report = json.loads((out / outdir.REPORT).read_text())
    assert [b["error"] for b in report["broken_files"]] == [
        "line 8: partial last line (interrupted run?)"
    ]


def test_upload_refuses_a_profile_whose_runs_all_failed(tmp_path):
    header_only = (DATA / "enospc.csv").read_bytes()
    out = make_profile(tmp_path / "out", [([ref("task-clock")], header_only, "perf-failed")])
    assert invoke("aggregate", out).returncode != 0
    proc = invoke("upload", out, "--store", tmp_path / "store.db")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[0] == (
        f"autoprof: error: {out}: nothing to upload: 0 of 1 runs ok, 1 failed, "
        "no counted value (see report.json)"
    )


# issue 10: SOCKET/CORE/NODE from the topology; no empty samples; --exact-only


def lscpu() -> dict[int, tuple[int, int, int]]:
    """CPU -> (core, socket, node) as `lscpu -p` prints them."""
    text = subprocess.run(["lscpu", "-p=CPU,CORE,SOCKET,NODE"], capture_output=True, text=True)
    rows = [x.split(",") for x in text.stdout.splitlines() if x and not x.startswith("#")]
    return {int(r[0]): (int(r[1]), int(r[2]), int(r[3] or 0)) for r in rows}


@pytest.mark.slow  # a real system-wide profile
def test_system_wide_profile_fills_socket_core_node_from_sysfs(tmp_path):
    if shutil.which("lscpu") is None or shutil.which("perf") is None:
        pytest.skip("lscpu or perf not found")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "autoprof", "profile", "-a", "-e", "task-clock", "-o", str(out)]
    run = subprocess.run([*argv, "--", "sleep", "0.25"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    manifest = outdir.read_manifest(out)
    assert manifest.machine.topology == machine.topology()
    assert invoke("aggregate", out).returncode == 0
    frame = csvfile.read_csv(out / outdir.RESULTS)
    assert frame["CPU"].notna().all() and frame["SOCKET"].notna().all()
    truth = lscpu()
    assert set(frame["CPU"]) == set(truth)
    seen = frame.drop_duplicates("CPU").set_index("CPU")
    for cpu, (_, socket, node) in truth.items():
        assert (seen.loc[cpu, "SOCKET"], seen.loc[cpu, "NODE"]) == (socket, node)
    # lscpu numbers cores machine-wide, the kernel (and perf's S0-C3) per socket: the same
    # CPUs must share a core either way
    ours = {cpu: (seen.loc[cpu, "SOCKET"], seen.loc[cpu, "CORE"]) for cpu in truth}
    for a in truth:
        for b in truth:
            assert (ours[a] == ours[b]) == (truth[a][0] == truth[b][0])


def test_manifest_without_topology_still_aggregates(tmp_path):
    data = (DATA / "interval_percpu.csv").read_bytes()
    out = make_profile(tmp_path / "out", [([ref("task-clock")], data, RunStatus.OK)])
    manifest = json.loads((out / outdir.MANIFEST).read_text())
    del manifest["machine"]["topology"]  # as written before topology was recorded
    (out / outdir.MANIFEST).write_text(json.dumps(manifest))
    frame = aggregate.aggregate(out).frame
    assert frame["CPU"].notna().all() and frame["SOCKET"].isna().all()


def test_exact_only_keeps_rows_counted_all_the_time(tmp_path):
    # real -a -A output with one line's percent running edited to 57.31 (this VM's software
    # events never multiplex): exact-only drops it, the default keeps it marked
    lines = (DATA / "interval_percpu.csv").read_text().splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if ",task-clock," in x)
    lines[at] = lines[at].replace(",100.00,", ",57.31,")
    events = [ref("task-clock"), ref("context-switches"), ref("sched:sched_switch", "tracepoint")]
    events += [ref("msr/tsc/", "msr"), ref("instructions", "cpu")]
    out = make_profile(tmp_path / "out", [(events, "".join(lines).encode(), RunStatus.OK)])
    assert invoke("aggregate", out).returncode == 0
    every = csvfile.read_csv(out / outdir.RESULTS)
    assert invoke("aggregate", out, "--exact-only").returncode == 0
    exact = csvfile.read_csv(out / outdir.RESULTS)
    assert len(every) == len(exact) + 1
    assert set(exact["STATUS"]) == {RowStatus.OK}
    assert list(every["STATUS"]).count(RowStatus.MULTIPLEXED) == 1
    assert "instructions" not in set(every["EVENT_NAME"])  # <not supported>: no sample


def test_aggregate_says_what_it_skipped_and_exits_3(tmp_path):
    """A run whose perf.csv is missing, a journal line that is garbage: the rest is aggregated,
    one line says what was skipped, and the status (3) tells a script so (#41); a folder that
    does not exist is one line of its own."""
    data = (DATA / "interval_idle.csv").read_bytes()
    events = [ref("mem:0x406000:w", "breakpoint"), ref("task-clock"), ref("msr/tsc/", "msr")]
    events.append(ref("instructions", "cpu"))
    out = make_profile(tmp_path / "out", [(events, data, RunStatus.OK)] * 2)
    (outdir.run_dir(out, 2, 1) / outdir.PERF_OUTPUT).unlink()
    with (out / outdir.JOURNAL).open("a") as journal:
        journal.write("garbage{\n")
    lines = (out / outdir.JOURNAL).read_text().count("\n")
    proc = invoke("aggregate", out)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.splitlines() == [
        f"autoprof: warning: {out}: skipped 1 broken run (run 2 rep 1: perf.csv is missing); "
        f"1 unreadable line of journal.jsonl ({lines}); results.csv holds the rest (status 3)"
    ]
    assert set(csvfile.read_csv(out / outdir.RESULTS)["RUN"]) == {1}
    whole = make_profile(tmp_path / "whole", [(events, data, RunStatus.OK)])
    assert invoke("aggregate", whole).returncode == 0
    missing = invoke("aggregate", tmp_path / "nosuchdir")
    assert missing.returncode == 2
    assert missing.stderr == (
        f"autoprof: error: {tmp_path / 'nosuchdir'}: no such folder (give the -o folder of "
        "autoprof profile)\n"
    )


# aggregate of a corrupt manifest and of garbage perf.csv files (issue #29)

GARBAGE = {
    "text": b"hello world\nthis is not perf\n",
    "bytes": bytes(range(1, 256)) * 8,  # \r, quotes, separators: once "pandas read 18 lines"
    "zeros": b"\x00" * 4096 + b"\n",
}


@pytest.mark.parametrize("manifest", ["{bad", "", None])
def test_aggregate_of_a_corrupt_manifest_fails_and_keeps_everything(cli_run, tmp_path, manifest):
    """Without its plan nothing says which runs were expected ("runs ok 2 of ?", rc 0): one
    line, status 2, and the folder as it was (an earlier results.csv and report.json too)."""
    out = tmp_path / "out"
    shutil.copytree(PROFILE, out)
    if manifest is None:
        (out / "manifest.json").unlink()
    else:
        (out / "manifest.json").write_text(manifest)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    line = one_error_line(cli_run("aggregate", out))
    assert "manifest" in line and "nothing aggregated" in line and str(out / "runs") in line
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    upload = one_error_line(cli_run("upload", out, "--store", tmp_path / "s.db"))
    assert "manifest" in upload


def _garbled(tmp_path: Path, kinds: list[str | None]) -> Path:
    """The recorded profile's first run, repeated once per kind (None: its real perf.csv)."""
    out = tmp_path / "out"
    shutil.copytree(PROFILE, out)
    (out / "results.csv").unlink()
    (out / "report.json").unlink()
    real = next((out / "runs").iterdir())
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["options"]["repeat"] = len(kinds)
    manifest["plan"]["runs"] = manifest["plan"]["runs"][:1]  # its run 2 never finished
    (out / "manifest.json").write_text(json.dumps(manifest))
    for repeat, kind in enumerate(kinds, 1):
        folder = out / "runs" / f"run0001-rep{repeat}"
        if repeat > 1:
            shutil.copytree(real, folder)
            record = json.loads((folder / "run.json").read_text())
            (folder / "run.json").write_text(json.dumps(dict(record, repeat=repeat)))
        if kind is not None:
            (folder / "perf.csv").write_bytes(GARBAGE[kind])
    return out


def test_garbage_perf_csv_files_are_broken_runs_with_a_reason(cli_run, tmp_path):
    """Three runs of garbage: "runs ok 3 of 3" said before, with pandas' line count as the
    reason. Now each run is broken, in words about the file."""
    out = _garbled(tmp_path, list(GARBAGE))
    run = cli_run("aggregate", out)
    assert run.returncode == 2
    assert "0 of 3 runs ok, 3 broken" in run.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["runs"]["ok"] == 0
    assert [b["repeat"] for b in report["runs"]["broken"]] == [1, 2, 3]
    for broken in report["runs"]["broken"]:
        assert broken["reason"].startswith("perf.csv holds no count of perf's: ")
    assert "pandas" not in json.dumps(report)
    assert report["events"]["not_counted"] == []  # the files are at fault, not the events
    assert "runs broken" in run.stdout


def test_one_broken_run_leaves_the_others_ok(cli_run, tmp_path):
    out = _garbled(tmp_path, [None, "text", None])
    run = cli_run("aggregate", out)
    assert run.returncode == 3, run.stderr  # written, one run skipped (#41)
    assert "skipped 1 broken run (run 1 rep 2: " in run.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["runs"]["ok"] == 2 and report["runs"]["finished"] == 3
    assert [(b["run"], b["repeat"]) for b in report["runs"]["broken"]] == [(1, 2)]
    assert "line 1: 1 fields" in report["runs"]["broken"][0]["reason"]
