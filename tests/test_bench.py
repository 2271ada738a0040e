"""`autoprof bench`: real perf runs (sleep, the breakpoint-counted example) and the statistics."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from autoprof.analysis import bench as stats
from autoprof.benchmark import measure
from autoprof.commands.bench import split_commands
from autoprof.errors import AutoprofError
from autoprof.examples import expected_writes, slot_addresses
from autoprof.run import planning
from autoprof.run.request import Request
from autoprof.testing.cli import invoke, process

needs_msr = pytest.mark.skipif(
    shutil.which("perf") is None
    or not Path("/sys/bus/event_source/devices/msr/events/tsc").exists(),
    reason="needs perf and the msr PMU (msr/tsc/)",
)


def test_commands_are_split_at_double_dashes():
    assert split_commands(("sleep", "1", "--", "sleep", "2")) == [["sleep", "1"], ["sleep", "2"]]
    assert split_commands(("--", "true")) == [["true"]]
    with pytest.raises(AutoprofError, match="no command"):
        split_commands(("--",))


def test_outliers_and_cold_start():
    steady = [1.00, 1.01, 0.99, 1.00, 1.02, 0.98, 1.00, 1.01]
    assert stats.summarize("wall_s", steady).outliers == []
    assert not stats.cold_start(steady)
    cold = [1.6, *steady[1:]]
    assert stats.summarize("wall_s", cold).outliers == [1]
    assert stats.cold_start(cold)


def test_ratio_interval_and_exact_counts():
    rng = np.random.default_rng(1)
    a = list(1.0 + rng.normal(0, 0.01, 20))
    b = list(3.0 + rng.normal(0, 0.03, 20))
    r = stats.ratio("x", a, b)
    assert r.low < 3.0 < r.high and r.high - r.low < 0.05
    assert r.p_value < 1e-10
    exact = stats.ratio("mem", [1000.0] * 5, [2000.0] * 5)
    assert (exact.ratio, exact.low, exact.high) == (2.0, 2.0, 2.0)
    assert exact.note.startswith("exact change")
    assert (exact.difference, exact.difference_low, exact.difference_high) == (1000.0,) * 3
    shifted = stats.ratio("x", a, [v + 0.5 for v in a])  # the same spread, 0.5 more
    assert shifted.difference == pytest.approx(0.5)
    half = shifted.difference_high - shifted.difference
    assert 0 < half < 0.02 and shifted.difference_low == pytest.approx(0.5 - half)


def test_paired_ratios_take_a_shared_load_off():
    """Pairs measured together share a load (here a factor from 1x to 3x per pair, as a busy
    machine's): their ratio's interval is the pairs', narrow, where Welch's (which sees only
    each side's spread) is wide; a real 10% change is significant paired and not unpaired."""
    rng = np.random.default_rng(7)
    load = rng.uniform(1.0, 3.0, 20)
    a = list(load * (1 + rng.normal(0, 0.01, 20)))
    b = list(1.1 * load * (1 + rng.normal(0, 0.01, 20)))
    paired, welch = stats.ratio("x", a, b, paired=True), stats.ratio("x", a, b)
    assert paired.ratio == welch.ratio  # the same estimate: the ratio of the means
    assert 1.0 < paired.low < 1.1 < paired.high < 1.2 and paired.p_value < 1e-10
    assert welch.low < 1.0 < welch.high and welch.p_value > 0.05
    assert paired.difference_low > 0 > welch.difference_low
    # sides of unequal length (an interrupted bench) are not pairs: Welch's
    short = stats.ratio("x", a, b[:-1], paired=True)
    assert short.low < 1.0 < short.high


@pytest.mark.needs_perf
def test_commands_run_interleaved(tmp_path):
    """Repetition k of every command, then k + 1 (warm-ups too), so that a load that comes or
    goes during the bench falls on every command alike."""
    log = tmp_path / "order"
    events = measure.one_run_events(planning.plan(Request(events=["task-clock"])))
    options = measure.BenchOptions(runs=3, warmup=1, startup_correction=False)
    commands = [["sh", "-c", f"echo {name} >> {log}"] for name in "AB"]
    measure.bench(commands, events, options)
    order = log.read_text().split()
    # a run perf lost ran again: the same command twice in a row, once
    assert [name for i, name in enumerate(order) if order[i - 1 : i] != [name]] == list("AB") * 4


def _stopwatch(first: list[str], second: list[str], repeat: int) -> tuple[list[float], list[float]]:
    """Wall times of two commands run alternately, each timed around its own process."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for argv, into in zip((first, second), times, strict=True):
            start = time.perf_counter()
            subprocess.run(argv, check=True)
            into.append(time.perf_counter() - start)
    return times


@pytest.mark.needs_perf
@pytest.mark.slow
def test_sleep_ratio_is_two_and_significant(tmp_path):
    """The issue's acceptance: sleep 0.05 vs sleep 0.1, 10 runs each.

    What the statistics promise, whatever the load: Welch's interval of the difference holds the
    true difference of the two commands' mean wall times. That true difference is not exactly
    50 ms: each `sleep d` takes d plus a wake-up latency that, on a VM, grows with d (the guest's
    timer fires late in proportion; CI once measured 50.31 ms, interval 50.05-50.58 ms at
    99.9 %). So the test measures the same difference a second, independent way (a stopwatch
    around the same two commands, interleaved) and asks the two estimates to agree within their
    combined 99.9 % half-widths (a test that would fail one run in twenty at 95 % promises
    nothing). On a busy machine one `sleep 0.05` took 106 ms (issue #28): that widens both
    intervals, it does not move the truth out of them. The ratio is (0.1 + L) / (0.05 + L),
    below 2 by as much as L is large, so only its interval's own consistency is checked."""
    out = tmp_path / "bench.json"
    proc = process(
        "bench", "-n", "10", "--export-json", str(out), "--", "sleep", "0.05", "--", "sleep", "0.1"
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert [len(c["repetitions"]) for c in data["commands"]] == [10, 10]
    wall = next(r for r in data["commands"][1]["ratio_to_first"] if r["metric"] == "wall_s")
    assert 0 < data["startup_s"] < 0.05
    assert wall["low"] <= wall["ratio"] <= wall["high"] and wall["p_value"] < 0.01, wall
    a, b = ([r["wall_s"] for r in c["repetitions"]] for c in data["commands"])
    assert wall["difference"] == pytest.approx(np.mean(b) - np.mean(a), abs=1e-12)
    assert wall["difference_low"] < wall["difference"] < wall["difference_high"], wall
    strict = stats.ratio("wall_s", a, b, confidence=0.999)
    ref_a, ref_b = _stopwatch(["sleep", "0.05"], ["sleep", "0.1"], repeat=10)
    reference = stats.ratio("wall_s", ref_a, ref_b, confidence=0.999)
    gap = abs(strict.difference - reference.difference)
    allowed = math.hypot(
        strict.difference_high - strict.difference, reference.difference_high - reference.difference
    )
    assert gap <= allowed, (strict, reference, a, b, ref_a, ref_b)
    assert "wall_s" in proc.stdout and "95% CI" in proc.stdout and "difference" in proc.stdout


@needs_msr
def test_an_event_given_a_name_is_read_under_the_name_perf_prints(tmp_path):
    """Every catalog event reaches perf with a name= term
    (``cpu/event=0xc0,name=INST_RETIRED.ANY/``) and perf prints that name, not the string it
    was given: the TSC, given both ways, counts under both."""
    out = tmp_path / "bench.json"
    proc = invoke(
        "bench", "-n", "2", "--warmup", "0", "-e", "msr/tsc,name=TSC.TICKS/", "-e", "msr/tsc/",
        "--export-json", str(out), "--", "true",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for rep in json.loads(out.read_text())["commands"][0]["repetitions"]:
        named, plain = rep["counts"]["TSC.TICKS"], rep["counts"]["msr/tsc/"]
        assert named > 0 and abs(named / plain - 1) < 0.05, rep


def test_breakpoints_count_exactly_in_every_repetition(writes, tmp_path):
    addresses = slot_addresses(writes)[:3]
    args = [a for address in addresses for a in ("-e", f"mem:{address}:w")]
    csv_path = tmp_path / "bench.csv"
    proc = process(
        "bench", "-n", "3", "--warmup", "1", *args, "--export-csv", str(csv_path),
        "--", str(writes), "1000", "--", str(writes), "3000",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    with csv_path.open() as fh:
        rows = list(csv.DictReader(fh))
    for n in (1000, 3000):
        for address, want in zip(addresses, expected_writes(n), strict=False):
            got = [
                float(r["value"])
                for r in rows
                if r["command"] == f"{writes} {n}" and r["metric"] == f"mem:{address}:w"
            ]
            assert got == [want] * 3
    assert {r["metric"] for r in rows} >= {"wall_s", "user_s", "sys_s"}


def test_too_many_events_are_refused_with_the_runs_needed(writes):
    args = [a for address in slot_addresses(writes)[:9] for a in ("-e", f"mem:{address}:w")]
    proc = process("bench", *args, "--", str(writes), "10")
    assert proc.returncode != 0
    assert proc.stderr.startswith("autoprof: error: these 9 events do not fit one run")
    assert "need 3 runs" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow  # a real benchmark run under perf
@pytest.mark.needs_perf
def test_failing_command_is_one_line(tmp_path):
    proc = process("bench", "-n", "2", "--warmup", "0", "--", "sh", "-c", "exit 3")
    assert proc.returncode != 0
    assert "exited with status 3" in proc.stderr and "Traceback" not in proc.stderr
    # perf stat exits 0 for a workload killed by a signal, and prints psignal's line
    killed = process("bench", "-n", "2", "--warmup", "0", "--", "sh", "-c", "kill -SEGV $$")
    assert killed.returncode == 2 and "Traceback" not in killed.stderr
    assert killed.stderr.strip().endswith("sh -c 'kill -SEGV $$' was killed by SIGSEGV")


def test_a_run_perf_did_not_wait_for_is_lost_not_read():
    """Real perf 6.1 output of a workload that ended before perf waited for it (perf exited 0
    for `sh -c 'exit 3'`): no rusage at all, 4 microseconds of wall time. Read as figures, it
    would pass for a successful 4-microsecond run."""
    lost = (Path(__file__).parent / "data" / "perf61" / "lost_wait.csv").read_bytes()
    with pytest.raises(measure.LostWorkload):
        measure.read_counts(lost, [])
    # one rusage time alone at 0 is a short process's (all its time went to the other mode)
    one = lost.replace(b"<not counted>,ns,user_time,0,", b"867000,ns,user_time,867000,")
    values, _ = measure.read_counts(one, [])
    assert values["user_s"] == 0.000867 and values["sys_s"] == 0.0


def _perf_delayed(tmp_path: Path, times: int) -> dict[str, str]:
    """An environment whose `perf` is the real one, with `-D 1000` added to its first `times`
    `perf stat` runs: perf then sleeps a second before it waits for the workload, which has
    long ended (the race of the test above, made certain: `sh -c 'exit 0'` takes a few ms,
    some tens on a machine at load 10)."""
    real = shutil.which("perf")
    assert real is not None
    bin_dir, count = tmp_path / "bin", tmp_path / "delayed"
    bin_dir.mkdir(parents=True)
    count.write_text("")
    wrapper = bin_dir / "perf"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = stat ] && [ $(wc -c < {count}) -lt {times} ]; then\n'
        f'  printf x >> {count}; shift; exec {real} stat -D 1000 "$@"\n'
        "fi\n"
        f'exec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


@pytest.mark.needs_perf
def test_a_run_perf_lost_runs_again_and_is_counted(tmp_path):
    out = tmp_path / "bench.json"
    bench = ("bench", "-n", "2", "--warmup", "0", "--no-startup-correction")
    env = _perf_delayed(tmp_path, times=1)
    marker = tmp_path / "prepared"
    prepare = ("--prepare", f"echo x >> {marker}")
    # the workload outlasts perf's start-up even at load 10 (`sh -c 'exit 0'`, a few ms, was
    # lost by perf on its own too, up to LOST_TRIES times in a row), and ends well within the
    # second the delayed perf sleeps: the one loss is the test's
    workload = ("--", "sh", "-c", "sleep 0.3; exit 0")
    proc = invoke(*bench, *prepare, "--export-json", out, *workload, env=env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    lost = data["lost_runs"]  # the provoked loss, and any perf made on its own all the same
    assert lost >= 1 and len(data["commands"][0]["repetitions"]) == 2  # each loss ran again
    assert marker.read_text().count("x") == 2 + lost  # a lost repetition's --prepare ran again
    assert all(r["user_s"] + r["sys_s"] > 0 for r in data["commands"][0]["repetitions"])
    assert f"perf lost {lost} run(s)" in proc.stderr
    # the run perf lost had exited 3 and perf said 0: the run again says 3
    exit3 = ("--", "sh", "-c", "sleep 0.3; exit 3")
    failing = invoke(*bench, *exit3, env=_perf_delayed(tmp_path / "2", 1))
    assert failing.returncode == 2 and "exited with status 3" in failing.stderr, failing.stderr
    always = invoke(*bench, *exit3, env=_perf_delayed(tmp_path / "3", 99))
    assert always.returncode == 2 and "Traceback" not in always.stderr
    last = always.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"autoprof: error: perf lost sh -c 'sleep 0.3; exit 3' {measure.LOST_TRIES} times"
    )


@pytest.mark.needs_perf
def test_json_round_trip_and_prepare(tmp_path):
    marker = tmp_path / "prepared"
    events = measure.one_run_events(planning.plan(Request(events=["task-clock"])))
    options = measure.BenchOptions(
        runs=2, warmup=1, prepare=f"echo x >> {marker}", startup_correction=False
    )
    result = measure.bench([["true"]], events, options)
    # before every repetition, warm-up included, and before a run of one perf lost
    assert marker.read_text().count("x") == 3 + result.lost_runs
    again = measure.from_json(json.loads(json.dumps(measure.to_json(result))))
    assert again.commands == result.commands and again.units == result.units
    assert again.lost_runs == result.lost_runs
    assert [e.spec for e in again.events] == ["task-clock"]
    assert len(measure.rows(result)) == 2 * len(result.metrics)
    later = dict(measure.to_json(result), added_later=1)
    later["commands"][0]["repetitions"][0]["added_later"] = 1
    assert measure.from_json(later).commands == result.commands  # unknown keys are ignored
    with pytest.raises(AutoprofError, match="newer autoprof \\(format 99"):
        measure.from_json(dict(later, format=99))


@pytest.mark.slow  # a real benchmark, uploaded
@pytest.mark.needs_perf
def test_benchmark_folder_is_uploaded_as_a_bench_run(tmp_path):
    out = tmp_path / "bench"
    proc = process("bench", "-n", "2", "--warmup", "0", "-o", str(out), "--", "true")
    assert proc.returncode == 0, proc.stderr
    frame = pd.read_csv(out / "results.csv")
    assert set(frame["EVENT_NAME"]) >= {"wall_s", "user_s", "sys_s", "task-clock"}
    assert sorted(set(frame["REPEAT"])) == [1, 2] and set(frame["RUN"]) == {1}
    store = f"sqlite:///{tmp_path / 'store.db'}"
    assert process("upload", str(out), "--store", store).returncode == 0
    benches = process("runs", "list", "--kind", "bench", "--store", store)
    assert "bench: true" in benches.stdout
    profiles = process("runs", "list", "--kind", "profile", "--store", store)
    assert "bench" not in profiles.stdout
    run_id = benches.stdout.splitlines()[-1].split()[0]
    exported = tmp_path / "export.csv"
    assert process("runs", "export", run_id, "-o", str(exported), "--store", store).returncode == 0
    assert exported.read_bytes() == (out / "results.csv").read_bytes()
    again = process("bench", "-n", "2", "-o", str(out), "--", "true")
    assert again.returncode != 0 and "already holds" in again.stderr
