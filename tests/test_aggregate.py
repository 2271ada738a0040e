"""aggregate: an out/ folder built from real perf runs of a small C program with known
breakpoint counts (compiled here), plus the failures a profile can leave behind."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from autoprof.catalog.facts import MachineFacts
from autoprof.perf.unsupported import Unsupported
from autoprof.results import aggregate, csvfile
from autoprof.results.sanity_report import RunId
from autoprof.run import outdir
from autoprof.run.options import ProfileOptions
from autoprof.testing.cli import invoke
from autoprof.util.status import RowStatus, RunStatus

PROGRAM = r"""
#include <stdlib.h>
#include <unistd.h>
static volatile long a[512] __attribute__((aligned(4096)));
/* argv: addresses, base, exit code. Address i (a[8 * i]) gets 2 * base * (i + 1) writes,
   half before and half after a 250 ms sleep (perf -I 100 then shows idle intervals). */
static void burst(int k, long base) {
    for (int i = 0; i < k; i++)
        for (long j = 0; j < base * (i + 1); j++) a[8 * i] = j;
}
int main(int argc, char **argv) {
    int k = atoi(argv[1]); long base = atol(argv[2]);
    burst(k, base); usleep(250000); burst(k, base);
    return argc > 3 ? atoi(argv[3]) : 0;
}
"""
ADDRESSES = 6
BASE = 100


def expected(i: int) -> int:
    return 2 * BASE * (i + 1)


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> tuple[Path, int]:
    for tool in ("cc", "perf", "nm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found (make system-deps installs it)")
    folder = tmp_path_factory.mktemp("prog")
    (folder / "w.c").write_text(PROGRAM)
    subprocess.run(["cc", "-O1", "-no-pie", "-o", folder / "w", folder / "w.c"], check=True)
    nm = subprocess.run(["nm", folder / "w"], capture_output=True, text=True, check=True).stdout
    base = next(int(f[0], 16) for f in map(str.split, nm.splitlines()) if f[-1] == "a")
    probe = subprocess.run(
        ["perf", "stat", "-x,", "-e", f"mem:{base:#x}:w", str(folder / "w"), "1", "1"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"perf cannot count breakpoints here: {probe.stderr.strip()[:200]}")
    return folder / "w", base


def bp(base: int, i: int) -> outdir.EventRef:
    spec = f"mem:{base + 64 * i:#x}:w"
    return outdir.EventRef(name=spec, pmu="breakpoint", spec=spec, label=spec)


def sw(name: str, pmu: str = "software") -> outdir.EventRef:
    return outdir.EventRef(name=name, pmu=pmu, spec=name, label=name)


def perf_run(out: Path, run: int, repeat: int, events, workload, status=RunStatus.OK, **kw):
    """Run perf the way `profile` does and record the run folder."""
    folder = outdir.run_dir(out, run, repeat)
    folder.mkdir(parents=True)
    argv = ["perf", "stat", "-x,", "-I", "100", "-o", str(folder / outdir.PERF_OUTPUT)]
    for ref in events:
        argv += ["-e", ref.spec]
    argv += ["--", *map(str, workload)]
    proc = subprocess.run(argv, capture_output=True, text=True, env={"LC_ALL": "C"})
    (folder / outdir.STDERR).write_text(proc.stderr)
    record = outdir.RunRecord(
        run=run, repeat=repeat, events=list(events), perf_argv=argv, status=status, **kw
    )
    if record.workload_exit is None:
        record.workload_exit = proc.returncode
    outdir.write_run_record(folder, record)
    return proc


@pytest.fixture(scope="module")
def profile(program, tmp_path_factory) -> Path:
    """A profile of 4 planned runs x 2 repeats with every kind of trouble in it."""
    exe, base = program
    out = tmp_path_factory.mktemp("out")
    (out / outdir.RUNS).mkdir()
    run1 = [*(bp(base, i) for i in range(4)), sw("task-clock"), sw("instructions", "cpu")]
    run2 = [bp(base, 4), bp(base, 5), sw("sched:sched_switch", "tracepoint")]
    planned = [[*run1, bp(base, 6)], run2, [sw("page-faults")], [sw("task-clock")]]
    runs = [{"events": [{"name": e.name, "pmu": e.pmu} for e in r]} for r in planned]
    plan = {"cpu": "test", "lower_bound": 4, "runs": runs, "excluded": []}
    manifest = outdir.Manifest(
        id="0b7c1f5e-test",
        autoprof_version="0.1.0",
        created="2026-01-01T00:00:00Z",
        command=[str(exe)],
        machine=MachineFacts("test", "test", "host", "6.1", "6.1", False, False, 2),
        plan=plan,
        options=ProfileOptions(repeat=2),
    )
    outdir.write_manifest(out, manifest)
    # the runner first tried a fifth breakpoint with run 1; perf refused it with ENOSPC
    fifth = bp(base, 6)
    refused = perf_run(out, 1, 1, [*run1, fifth], [exe, ADDRESSES, BASE])
    assert refused.returncode != 0
    reason = next(x for x in refused.stderr.splitlines() if "No space left" in x)
    shutil.rmtree(outdir.run_dir(out, 1, 1))
    unsupported = [Unsupported(fifth.name, fifth.pmu, reason)]
    perf_run(out, 1, 1, run1, [exe, ADDRESSES, BASE], unsupported=unsupported)
    perf_run(out, 2, 1, run2, [exe, ADDRESSES, BASE])
    perf_run(out, 2, 2, run2, [exe, ADDRESSES, BASE])
    perf_run(
        out,
        3,
        1,
        [sw("page-faults")],
        [exe, 1, 1, 1],
        status=RunStatus.WORKLOAD_FAILED,
        workload_exit=1,
    )
    # run 1 repeat 2: perf.csv is garbage; run 3 repeat 2: run.json is not JSON
    perf_run(out, 1, 2, run1[:1], [exe, 1, 1])
    (outdir.run_dir(out, 1, 2) / outdir.PERF_OUTPUT).write_bytes(b"\x00\xffnot perf at all\n")
    perf_run(out, 3, 2, [sw("page-faults")], [exe, 1, 1])
    (outdir.run_dir(out, 3, 2) / outdir.RUN_RECORD).write_text("{not json")
    # run 4 repeat 1 was interrupted: its counts are partial and will be redone on resume
    perf_run(out, 4, 1, [sw("task-clock")], [exe, 1, 1], status=RunStatus.INTERRUPTED)
    return out


@pytest.fixture(scope="module")
def aggregated(profile) -> aggregate.Aggregation:
    return aggregate.aggregate(profile)


@pytest.mark.slow  # aggregates a real profile of the test program
def test_breakpoint_totals_equal_the_known_counts(aggregated, program):
    _, base = program
    frame = aggregated.frame
    ok = frame[frame["STATUS"] == RowStatus.OK]
    totals = ok.groupby(["EVENT_NAME", "RUN", "REPEAT"])["SAMPLE_VALUE"].sum()
    for i in range(4):
        assert totals[(f"mem:{base + 64 * i:#x}:w", 1, 1)] == expected(i)
    for i in (4, 5):
        for repeat in (1, 2):
            assert totals[(f"mem:{base + 64 * i:#x}:w", 2, repeat)] == expected(i)


@pytest.mark.slow  # aggregates a real profile of the test program
def test_rows_follow_the_results_contract(aggregated):
    frame = aggregated.frame
    assert list(frame.columns) == csvfile.COLUMNS
    assert set(frame["STATUS"]) <= set(list(RowStatus))
    clock = frame[(frame["EVENT_NAME"] == "task-clock") & (frame["RUN"] == 1)]
    assert clock["INDEX"].is_monotonic_increasing and clock["INDEX"].is_unique
    assert clock["TIME"].is_monotonic_increasing
    # rows without a value stay out of results.csv (autoperf's tools crash on their empty TIME)
    assert frame["SAMPLE_VALUE"].notna().all() and frame["TIME"].notna().all()
    assert set(frame["STATUS"]) <= {RowStatus.OK, RowStatus.MULTIPLEXED}
    assert clock["VALUE_UNIT"].eq("msec").all()
    assert clock["UNIT"].eq("software").all() and clock["PMU"].eq("software").all()
    assert 4 not in set(frame["RUN"])  # the interrupted run is not a result


@pytest.mark.slow  # aggregates a real profile of the test program
def test_idle_intervals_and_unsupported_events_are_reported(aggregated, program):
    _, base = program
    events = aggregated.report.events
    idle = {e.event for e in events.idle_intervals}
    assert f"mem:{base:#x}:w" in idle and "task-clock" in idle
    unsupported = {e.event: e for e in events.not_supported}
    assert unsupported["instructions"].reason == "perf printed <not supported>"
    refused = unsupported[f"mem:{base + 64 * 6:#x}:w"]
    assert "No space left on device" in refused.reason
    frame = aggregated.frame
    assert frame[frame["EVENT_NAME"] == f"mem:{base + 64 * 6:#x}:w"].empty  # no value, no row
    assert events.multiplexed == []


@pytest.mark.slow  # aggregates a real profile of the test program
def test_failed_missing_and_broken_runs_are_reported(aggregated):
    report = aggregated.report
    runs = report.runs
    # run 1 repeat 2 finished, but its perf.csv is garbage: a broken run, not an ok one (#29)
    assert (runs.expected, runs.finished, runs.ok) == (8, 5, 3)
    assert [(b.run, b.repeat) for b in runs.broken] == [(1, 2)]
    assert [(f.run, f.repeat, f.status) for f in runs.failed] == [(3, 1, RunStatus.WORKLOAD_FAILED)]
    assert runs.failed[0].workload_exit == 1
    assert runs.missing == [RunId(3, 2), RunId(4, 1), RunId(4, 2)]
    broken = {b.path for b in report.broken_files}
    assert broken == {"runs/run0001-rep2/perf.csv", "runs/run0003-rep2/run.json"}
    # the failed workload's counts are kept
    faults = aggregated.frame[aggregated.frame["EVENT_NAME"] == "page-faults"]
    assert faults["RUN"].eq(3).all() and faults["SAMPLE_VALUE"].sum() > 0


@pytest.mark.slow  # aggregates a real profile of the test program
def test_cli_writes_results_and_report(profile, tmp_path):
    target = tmp_path / "r.csv"
    proc = invoke("aggregate", str(profile), "-o", str(target))
    # the profile has a broken run and a broken file: the rest is written, status 3 says so
    assert proc.returncode == 3, proc.stderr
    assert "skipped 1 broken run" in proc.stderr and "holds the rest (status 3)" in proc.stderr
    assert "sanity report" in proc.stdout
    written = csvfile.read_csv(target)
    report = json.loads((profile / outdir.REPORT).read_text())
    assert len(written) == report["rows"]
    assert written["STATUS"].isin(list(RowStatus)).all()
    # the digest of the very bytes written: what tells an upload they need no check
    assert report["results_sha256"] == hashlib.sha256(target.read_bytes()).hexdigest()


def test_cli_refuses_a_folder_that_is_not_a_profile(tmp_path, cli_run):
    proc = cli_run("aggregate", tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"autoprof: error: {tmp_path} is not a profile folder (no manifest.json, no runs/)"
    ]


def test_run_folders_sort_numerically_and_rep1_never_takes_rep10s(tmp_path):
    """results.csv rows follow this order and the store's export of a split run sorts by
    (RUN, REPEAT): rep10 must come after rep9, not after rep1; re-running rep1 clears its own
    parts only, never rep10's."""
    keys = [(2, 1, 1), (1, 10, 1), (1, 2, 1), (1, 9, 2), (1, 9, 1), (10, 1, 1), (1, 1, 1)]
    for run, repeat, part in keys:
        outdir.run_dir(tmp_path, run, repeat, part).mkdir(parents=True)
    (tmp_path / outdir.RUNS / "run-notes").mkdir()
    names = [p.name for p in outdir.run_folders(tmp_path)]
    assert names == [outdir.run_folder_name(*key) for key in sorted(keys)] + ["run-notes"]
    assert [p.name for p in outdir.part_folders(tmp_path, 1, 9)] == [
        "run0001-rep9",
        "run0001-rep9-part2",
    ]
    assert [p.name for p in outdir.part_folders(tmp_path, 1, 1)] == ["run0001-rep1"]


def test_fast_writer_gives_pandas_text_form_for_every_kind_of_float(tmp_path):
    """results.csv is written by pyarrow in chunks; its text must stay the one pandas' csv writer
    gives (the bytes `runs export` reproduces): repr for floats, integers for whole counts."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(7)
    values = np.concatenate(
        [
            rng.random(3000) * 10.0 ** rng.integers(-8, 20, 3000),
            np.round(rng.random(1000) * 1000, 2),
            rng.integers(0, 2**60, 1000).astype(float),
            [0.0, -0.5, 1e-4, 9.999e-5, 1e9, 1e9 + 0.5, 2.0**53, 2.0**53 + 2, 1e16, 1e22, np.nan],
        ]
    )
    n = len(values)
    frame = csvfile.empty_frame().reindex(range(n))
    frame["EVENT_NAME"] = "task-clock"
    frame["INDEX"] = np.arange(n) // 3
    frame["TIME"] = np.abs(values[::-1]) / 7
    frame["SAMPLE_VALUE"] = values
    frame["PERCENT_RUNNING"] = np.where(np.arange(n) % 5 == 0, 100.0, np.abs(values) % 100)
    frame["CPU"] = np.arange(n) % 4
    frame["RUN"], frame["REPEAT"], frame["STATUS"] = 1, 1, RowStatus.OK
    frame["UNIT"] = np.where(np.arange(n) % 2 == 0, "software", None)
    frame = csvfile.normalize(frame)
    csvfile.write_csv(frame, tmp_path / "fast.csv")
    header = ",".join(csvfile.COLUMNS).encode() + b"\n"
    slow = header + csvfile._quoted_csv(pa.Table.from_pandas(frame, preserve_index=False))
    assert (tmp_path / "fast.csv").read_bytes() == slow
