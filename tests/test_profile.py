"""End to end with real perf: the example workload's writes are counted by hardware
breakpoints, so every number below is known before the run."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from autoprof.catalog.host import breakpoint_event
from autoprof.catalog.model import Event
from autoprof.examples import expected_writes, slot_addresses
from autoprof.results import csvfile
from autoprof.run import outdir
from autoprof.run.options import ProfileOptions
from autoprof.run.runner import (
    Runner,
    Task,
    TaskEnded,
    TaskRetried,
    TaskSkipped,
    TaskStarted,
    stop_leftovers,
)
from autoprof.testing.cli import process
from autoprof.util.status import RunStatus
from tests.conftest import still_running

pytestmark = pytest.mark.skipif(
    shutil.which("perf") is None or shutil.which("cc") is None, reason="needs perf and cc"
)

SOFTWARE = ["task-clock", "page-faults", "context-switches"]


def watch_args(binary: Path) -> list[str]:
    args = []
    for address in slot_addresses(binary):
        args += ["-e", f"mem:{address}:w"]
    for name in SOFTWARE:
        args += ["-e", name]
    return args


def totals(out: Path) -> dict[str, float]:
    frame = csvfile.read_csv(out / outdir.RESULTS)
    return frame.groupby("EVENT_NAME")["SAMPLE_VALUE"].sum().to_dict()


def check_exact(out: Path, binary: Path, n: int, repeat: int = 1) -> None:
    counted = totals(out)
    for address, want in zip(slot_addresses(binary), expected_writes(n), strict=True):
        assert counted[f"mem:{address}:w"] == want * repeat, address


@pytest.mark.slow
def test_twelve_watchpoints_take_three_runs_and_count_exactly(writes, tmp_path):
    out = tmp_path / "out"
    # --retries: a VM now and then leaves a debug register armed (a SIGTRAP perf did not claim)
    argv = ["profile", *watch_args(writes), "--retries", "2", "-o", str(out)]
    proc = process(*argv, "--", str(writes), "3000")
    assert proc.returncode == 0, proc.stderr
    manifest = outdir.read_manifest(out)
    assert len(manifest.plan["runs"]) == 3 == manifest.plan["lower_bound"]
    assert manifest.machine.perf_version and manifest.machine.kernel
    for folder in outdir.run_folders(out):
        record = outdir.read_run_record(folder)
        assert record.status == RunStatus.OK and record.perf_argv[:2][-1] == "stat"
        assert (folder / outdir.PERF_OUTPUT).stat().st_size > 0
        assert "wrote 12 slots" in (folder / outdir.STDOUT).read_text()
    agg = process("aggregate", str(out))
    assert agg.returncode == 0, agg.stderr
    check_exact(out, writes, 3000)
    frame = csvfile.read_csv(out / outdir.RESULTS)
    assert set(SOFTWARE) <= set(frame["EVENT_NAME"])
    assert list(frame.columns[:9]) == csvfile.AUTOPERF_COLUMNS


@pytest.mark.slow
def test_interrupted_profile_resumes_without_rerunning(writes, tmp_path):
    out = tmp_path / "out"
    args = [
        sys.executable,
        "-m",
        "autoprof",
        "profile",
        *watch_args(writes),
        "--repeat",
        "2",
        # a VM now and then leaves a debug register armed: the workload dies of a SIGTRAP perf
        # did not claim, and the run is counted again (each attempt journaled)
        "--retries",
        "2",
        "-o",
        str(out),
        "--",
        str(writes),
        "6000",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    journal = out / outdir.JOURNAL
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (journal.exists() and journal.read_text()):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted" in stderr and "Traceback" not in stderr
    first = [json.loads(line) for line in journal.read_text().splitlines()]
    assert 1 <= len(first) < 6
    resumed = subprocess.run(args, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    resuming = r"resuming: (\d) of 6 runs (?:is|are) done already; measuring the other (\d)\n"
    said = re.search(resuming, resumed.stderr)
    assert said and int(said[1]) + int(said[2]) == 6
    assert f"measured {said[2]} run" in resumed.stderr and f"{said[1]} w" in resumed.stderr
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    assert entries[: len(first)] == first
    keys = {(e["run"], e["repeat"]) for e in entries}
    assert keys == {(r, p) for r in (1, 2, 3) for p in (1, 2)}
    again = {(e["run"], e["repeat"]) for e in entries[len(first) :]}
    assert not again & {(e["run"], e["repeat"]) for e in first}  # none of them ran again
    assert process("aggregate", str(out)).returncode == 0
    check_exact(out, writes, 6000, repeat=2)


@pytest.mark.slow
def test_failing_workload_is_recorded_and_the_rest_collected(writes, tmp_path):
    out, state = tmp_path / "out", tmp_path / "state"
    proc = process(
        "profile", *watch_args(writes), "-o", str(out), "--", str(writes), "500", str(state), "2"
    )
    assert proc.returncode == 2
    assert "1 of 3 runs failed (run.repeat 2.1; 2.1: workload exited with status 1)" in proc.stderr
    assert proc.stderr.endswith(f"kept in {out}/: autoprof aggregate {out} reads them\n")
    assert "next:" not in proc.stderr  # before the error, as if all went well
    assert proc.stderr.count("autoprof: error") == 1
    records = {
        outdir.read_run_record(f).run: outdir.read_run_record(f) for f in outdir.run_folders(out)
    }
    assert records[2].status == RunStatus.WORKLOAD_FAILED and records[2].workload_exit == 1
    assert records[1].status == records[3].status == RunStatus.OK
    assert process("aggregate", str(out)).returncode == 0
    report = json.loads((out / outdir.REPORT).read_text())
    assert [(f["run"], f["status"]) for f in report["runs"]["failed"]] == [
        (2, RunStatus.WORKLOAD_FAILED)
    ]
    counted = totals(out)
    ok_runs = {e.name for r in (records[1], records[3]) for e in r.events}
    for address, want in zip(slot_addresses(writes), expected_writes(500), strict=True):
        if f"mem:{address}:w" in ok_runs:
            assert counted[f"mem:{address}:w"] == want


@pytest.mark.slow
def test_retries_run_a_failed_run_again_and_keep_the_failed_attempt(writes, tmp_path):
    """The 2nd invocation fails on purpose; with --retries 1 run 2 runs again (invocation 3)."""
    out, state = tmp_path / "out", tmp_path / "state"
    proc = process(
        "profile", *watch_args(writes), "--retries", "1", "-o", str(out),
        "--", str(writes), "500", str(state), "2",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "run 2 rep 1: workload-failed" in proc.stderr and "attempt 2 of 2" in proc.stderr
    records = [outdir.read_run_record(f) for f in outdir.run_folders(out)]
    assert [(r.run, r.status, r.attempt) for r in records] == [
        (1, RunStatus.OK, 1),
        (2, RunStatus.OK, 2),
        (3, RunStatus.OK, 1),
    ]
    kept = outdir.read_run_record(out / outdir.ATTEMPTS / "run0002-rep1-attempt1")
    assert kept.status == RunStatus.WORKLOAD_FAILED and kept.attempt == 1
    journal = [json.loads(line) for line in (out / outdir.JOURNAL).read_text().splitlines()]
    assert [(e["run"], e["status"]) for e in journal if e["run"] == 2] == [
        (2, RunStatus.WORKLOAD_FAILED),
        (2, RunStatus.OK),
    ]
    assert process("aggregate", str(out)).returncode == 0
    report = json.loads((out / outdir.REPORT).read_text())
    assert report["runs"]["failed"] == []
    assert report["runs"]["retried"] == [{"run": 2, "repeat": 1, "attempt": 2}]
    check_exact(out, writes, 500)


@pytest.mark.needs_perf
def test_the_runner_tells_its_listener_typed_events(tmp_path):
    """Issue #41: each event is a record of its kind, carrying the run record where the kind
    has one: a task fails once (retried, with the failed attempt), then ends well; run
    again, the journal skips it."""
    failed_once = tmp_path / "failed-once"
    command = ["sh", "-c", f"test -e {failed_once} || {{ touch {failed_once}; exit 3; }}"]
    task = Task(1, 1, (Event("task-clock", "software", "task-clock"),))
    options = ProfileOptions(interval_ms=None, retries=1)
    seen: list = []
    Runner(tmp_path, command, options, on_event=seen.append).run_all([task])
    assert [type(e) for e in seen] == [TaskStarted, TaskRetried, TaskEnded]
    assert all(e.task == task for e in seen)
    retried, ended = seen[1].record, seen[2].record
    assert (retried.status, retried.attempt) == (RunStatus.WORKLOAD_FAILED, 1)
    assert (ended.status, ended.attempt) == (RunStatus.OK, 2)
    again: list = []
    Runner(tmp_path, command, options, on_event=again.append).run_all([task])
    assert again == [TaskSkipped(task)]


@pytest.mark.slow
def test_anchor_is_counted_in_every_run_and_normalises_correlation(writes, tmp_path):
    out = tmp_path / "out"
    args = [*watch_args(writes)[:24], "--anchor", "task-clock", "--interval", "10"]
    dry = process("profile", *args, "--dry-run", "-o", str(out), "--", str(writes), "3000")
    assert dry.returncode == 0 and len(dry.stdout.splitlines()) == 3
    assert all(" -e task-clock " in line for line in dry.stdout.splitlines())
    proc = process("profile", *args, "--retries", "2", "-o", str(out), "--", str(writes), "3000")
    assert proc.returncode == 0, proc.stderr
    assert outdir.read_manifest(out).options.anchor == "task-clock"
    assert process("aggregate", str(out)).returncode == 0
    frame = csvfile.read_csv(out / outdir.RESULTS)
    assert set(frame.loc[frame["EVENT_NAME"] == "task-clock", "RUN"]) == {1, 2, 3}
    check_exact(out, writes, 3000)
    corr = process(
        "analyze", "correlation", str(out / outdir.RESULTS), "--anchor", "task-clock",
        "--min-overlap", "3", "-o", str(tmp_path / "corr"),
    )  # fmt: skip
    assert corr.returncode == 0, corr.stderr
    matrix = pd.read_csv(tmp_path / "corr" / "correlation_matrix.csv", index_col=0)
    assert {f"mem:{a}:w" for a in slot_addresses(writes)} & set(matrix.columns)
    # a breakpoint anchor takes one of the 4 debug registers in every run: planned, and said
    hardware = process("profile", *args[:-4], "--anchor", "mem:0x1000:w", "--dry-run", "--", "true")
    assert hardware.returncode == 0, hardware.stderr
    assert all(" -e mem:0x1000:w " in line for line in hardware.stdout.splitlines())
    assert "anchor mem:0x1000:w takes one of breakpoint's 4 generic counters" in hardware.stderr


@pytest.mark.slow
def test_perf_left_by_a_killed_profiler_is_stopped(writes, tmp_path):
    """perf has a session of its own (a timeout stops perf and workload together), so it
    outlives `autoprof profile` killed with SIGKILL once it counts (killed before, while the
    workload is held, perf ends at its broken control channel); `stop_leftovers` (which a
    resumed profile and a queue worker call) stops it. `writes 4000000` runs ~50 s on a quiet
    machine (longer on a loaded one), so its end within the 30 s we wait for it is the stop's
    doing."""
    out = tmp_path / "out"
    args = ["profile", *watch_args(writes)[:8], "-o", str(out), "--", str(writes)]
    proc = subprocess.Popen([sys.executable, "-m", "autoprof", *args, "4000000"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until perf counts: the workload no longer held
        noted = next((r for r in outdir.left_running(out) if r.perf_pid), None)
        pid = noted.perf_pid if noted else None
        if noted and pid and Path(f"/proc/{pid}/comm").read_text().strip() == "perf":
            with contextlib.suppress(OSError):
                state = Path(f"/proc/{noted.workload_pid}/stat").read_text().rsplit(")", 1)[1]
                if state.split()[0] not in ("t", "T"):
                    break
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert still_running(pid)  # perf (and its workload) outlived the profiler, untouched
    assert stop_leftovers(out) == [pid]
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists()
    assert stop_leftovers(out) == []  # nothing left, nothing else touched


def test_no_room_splits_the_run_and_bad_events_are_unsupported(writes, tmp_path):
    """Five breakpoints in one run: perf gets ENOSPC for the fifth, which runs apart."""
    addresses = slot_addresses(writes)
    events = [breakpoint_event(f"mem:{a}:w") for a in addresses[:5]]
    bogus = Event("no_such:event", "tracepoint", "no_such:event")
    runner = Runner(tmp_path, [str(writes), "100"], ProfileOptions(interval_ms=None))
    parts = runner.run_task(Task(1, 1, (*events, bogus)))
    assert [len(p.events) for p in parts] == [4, 1]
    assert all(p.status == RunStatus.OK for p in parts)
    assert parts[0].unsupported[0].name == "no_such:event"
    assert "syntax" in parts[0].unsupported[0].reason
    assert (tmp_path / "runs" / "run0001-rep1-part2" / outdir.PERF_OUTPUT).exists()


@pytest.mark.slow
def test_crash_timeout_and_refusals(writes, tmp_path):
    out = tmp_path / "out"
    crash = process(
        "profile", "-e", "task-clock", "-o", str(out), "--", "sh", "-c", "kill -SEGV $$"
    )
    assert crash.returncode == 2 and "Traceback" not in crash.stderr
    record = outdir.read_run_record(outdir.run_folders(out)[0])
    assert record.status == RunStatus.WORKLOAD_FAILED and "SIGSEGV" in record.error
    other = process("profile", "-e", "task-clock", "-o", str(out), "--", "true")
    assert other.returncode == 2 and "another command" in other.stderr
    slow = process(
        "profile", "-e", "task-clock", "--timeout", "0.5", "-o", str(tmp_path / "slow"), "--",
        "sleep", "30",
    )  # fmt: skip
    assert slow.returncode == 2
    assert outdir.read_run_record(outdir.run_folders(tmp_path / "slow")[0]).status == "timeout"
    missing = process(
        "profile", "-e", "task-clock", "-o", str(tmp_path / "m"), "--", "no-such-program-xyz"
    )
    assert missing.returncode == 2 and "command not found" in missing.stderr


@pytest.mark.slow
def test_dry_run_prints_exactly_the_argv_that_runs(writes, tmp_path):
    """Software events, two repeats: breakpoints could be split off at run time (ENOSPC when
    another process holds the debug registers), which would change the argv legitimately."""
    out = tmp_path / "o"
    events = [arg for name in SOFTWARE for arg in ("-e", name)]
    args = [*events, "--repeat", "2", "-o", str(out), "--", str(writes), "50"]
    proc = process("profile", "--dry-run", *args)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(lines) == 2
    assert all(line.startswith("LC_ALL=C ") and " stat -x , " in line for line in lines)
    assert not out.exists()
    assert "WORKLOAD_PID" in proc.stderr  # the note says what the placeholders stand for
    assert process("profile", *args).returncode == 0
    records = [outdir.read_run_record(f) for f in outdir.run_folders(out)]
    executed = []
    for record in records:  # the values only the run knew, where the dry run said which
        argv = record.perf_argv
        assert argv[-4:-2] == ["-p", str(record.workload_pid)], argv
        assert re.fullmatch(r"fd:\d+,\d+", argv[-1]), argv
        executed.append([*argv[:-4], "-p", "WORKLOAD_PID", "--control", "fd:CTL_FD,ACK_FD"])
    assert [shlex.split(line)[1:] for line in lines] == executed
    assert not any("/bin/sh" in argv for argv in executed)  # perf counts the command alone


@pytest.mark.slow
def test_demo_checks_every_breakpoint_count_and_can_run_again(writes, tmp_path):
    """Into its default folder (out/demo) from a fresh checkout's folder, which has no out/ yet
    (`make demo`), then again."""
    out = tmp_path / "out" / "demo"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for _ in range(2):  # the second demo replaces the first one's output
        proc = process("demo", "--writes", "300", env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "12 of 12 breakpoint counts exact" in proc.stdout
    assert len(outdir.run_folders(out)) == 3


@pytest.mark.needs_perf
def test_a_resume_says_what_it_skipped_and_what_it_measured(tmp_path):
    """Issue #41: `profile` into a folder that held the profile said "profiling ... x 2" and
    "next:" whether it measured anything or not."""
    out = tmp_path / "out"
    args = ("profile", "-e", "task-clock", "--repeat", "2", "-o", str(out), "--", "true")
    first = process(*args)
    assert (
        first.returncode == 0
        and "resuming" not in first.stderr
        and "done already" not in first.stderr
    )
    again = process(*args)
    assert again.returncode == 0
    assert (
        "resuming: all 2 runs are done already: nothing to measure (--force runs them"
        in again.stderr
    )
    assert (
        ": nothing measured, all 2 runs were done already; next: autoprof aggregate" in again.stderr
    )
    journal = out / outdir.JOURNAL
    journal.write_text(journal.read_text().splitlines(keepends=True)[0])
    half = process(*args)
    assert "resuming: 1 of 2 runs is done already; measuring the other 1\n" in half.stderr
    assert ": measured 1 run, 1 was done already; next: autoprof aggregate" in half.stderr
    # a power cut that kept the journal's entry but emptied the run's record: run again
    (outdir.run_dir(out, 1, 1) / outdir.RUN_RECORD).write_text("")
    lost = process(*args)
    assert "resuming: 1 of 2 runs is done already; measuring the other 1\n" in lost.stderr
    assert outdir.read_run_record(outdir.run_dir(out, 1, 1)).status == RunStatus.OK
    forced = process(*args[:-2], "--force", "--", "true")
    assert forced.returncode == 0 and "done already" not in forced.stderr
