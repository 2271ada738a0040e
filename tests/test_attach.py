"""Attached profiles with real perf: `writes --ticks 100` writes its slots at a rate set by the
clock, so every group's counts per second are known whatever the group and the moment."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

from autoprof.errors import AutoprofError
from autoprof.examples import slot_addresses
from autoprof.perf.command import attach_argv, interval_count
from autoprof.run import attach, outdir
from autoprof.testing.cli import invoke, process

HZ = 100  # ticks a second; slot i is written i+1 times a tick


def watch_args(binary: Path) -> list[str]:
    return [a for address in slot_addresses(binary) for a in ("-e", f"mem:{address}:w")]


@pytest.fixture
def ticker(writes):
    """The example program writing its slots HZ times a second until stopped."""
    procs = []

    def start() -> subprocess.Popen:
        proc = subprocess.Popen([str(writes), "--ticks", str(HZ)])
        procs.append(proc)
        time.sleep(0.1)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def rates(out: Path, binary: Path) -> pd.Series:
    """Ticks per second seen by each (event, run): writes per second / (slot + 1)."""
    frame = pd.read_csv(out / outdir.RESULTS)
    slot_of = {f"mem:{a}:w": i for i, a in enumerate(slot_addresses(binary))}
    frame = frame[frame["EVENT_NAME"].isin(slot_of)]
    per_run = frame.groupby(["EVENT_NAME", "RUN"]).agg(
        total=("SAMPLE_VALUE", "sum"), seconds=("TIME", "max")
    )
    slots = per_run.index.get_level_values(0).map(slot_of).to_numpy()
    return per_run["total"] / per_run["seconds"] / (slots + 1)


def test_every_group_measured_once_at_a_steady_rate(ticker, writes, tmp_path):
    proc = ticker()
    out = tmp_path / "out"
    run = process(
        "profile", "-p", str(proc.pid), "--duration", "1", "--interval", "200",
        *watch_args(writes), "-e", "task-clock", "--retries", "2", "-o", str(out),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "different moment" in run.stderr
    journal = [json.loads(line) for line in (out / outdir.JOURNAL).read_text().splitlines()]
    assert sorted((j["run"], j["status"]) for j in journal) == [(r, "ok") for r in (1, 2, 3)]
    assert process("aggregate", str(out)).returncode == 0
    seen = rates(out, writes)
    assert len(seen) == 12
    assert (seen.max() - seen.min()) / seen.median() < 0.05, seen
    assert abs(seen.median() - HZ) / HZ < 0.05, seen
    manifest = json.loads((out / outdir.MANIFEST).read_text())
    assert sorted(manifest["attach"]["runs"]) == ["1.1.1", "2.1.1", "3.1.1"]
    assert manifest["command"] == [] and manifest["options"]["pids"] == str(proc.pid)
    # left running and unharmed: not stopped, still writing, ends on our SIGTERM
    assert proc.poll() is None and attach.alive(proc.pid)
    state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    assert state in ("S", "R")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) == -signal.SIGTERM


def test_early_exit_reports_missing_runs_and_resume_finishes(ticker, writes, tmp_path):
    proc = ticker()
    out = tmp_path / "out"
    args = ["--duration", "1", "--interval", "200", *watch_args(writes), "-o", str(out)]
    profiler = subprocess.Popen(
        [sys.executable, "-m", "autoprof", "profile", "-p", str(proc.pid), *args],
        stderr=subprocess.PIPE,
        text=True,
    )
    journal = out / outdir.JOURNAL
    deadline = time.monotonic() + 60
    while not (journal.exists() and journal.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()  # the target dies during the second group
    _, stderr = profiler.communicate(timeout=60)
    assert profiler.returncode != 0
    assert "runs missing (run.repeat 2.1, 3.1)" in stderr, stderr
    assert "--resume" in stderr and "Traceback" not in stderr
    report = process("aggregate", str(out))
    assert json.loads((out / outdir.REPORT).read_text())["runs"]["missing"]

    second = ticker()
    refused = process("profile", "-p", str(second.pid), *args)
    assert refused.returncode != 0 and "add --resume" in refused.stderr
    resumed = process("profile", "-p", str(second.pid), "--resume", *args)
    assert resumed.returncode == 0, resumed.stderr
    report = process("aggregate", str(out))
    assert report.returncode == 0, report.stderr
    assert not json.loads((out / outdir.REPORT).read_text())["runs"]["missing"]
    targets = json.loads((out / outdir.MANIFEST).read_text())["attach"]["targets"]
    assert [t["pids"] for t in targets] == [str(proc.pid), str(second.pid)]
    seen = rates(out, writes)
    assert (seen.max() - seen.min()) / seen.median() < 0.05, seen


@pytest.mark.slow  # a real system-wide profile
def test_system_wide_profile_without_a_command(tmp_path):
    out = tmp_path / "out"
    run = process("profile", "-a", "--duration", "0.3", "-e", "task-clock", "-o", str(out))
    if "perf_event_paranoid" in run.stderr:
        pytest.skip(run.stderr.strip())
    assert run.returncode == 0, run.stderr
    assert process("aggregate", str(out)).returncode == 0
    frame = pd.read_csv(out / outdir.RESULTS)
    assert frame["CPU"].notna().all() and frame["INDEX"].max() == 2  # 3 intervals of 100 ms


def test_cgroup_profile(ticker, tmp_path):
    """System-wide breakpoints compete with other profiles for the debug registers of every
    CPU, so the cgroup's rate is read from context switches: one per tick (it sleeps)."""
    root = Path("/sys/fs/cgroup/unified")
    name = f"autoprof-test-{uuid.uuid4().hex[:8]}"
    try:
        (root / name).mkdir()
    except OSError as err:
        pytest.skip(f"cannot make a cgroup v2 group under {root}: {err}")
    proc = None
    try:
        proc = ticker()
        (root / name / "cgroup.procs").write_text(str(proc.pid))
        out = tmp_path / "out"
        run = process(
            "profile", "--cgroup", name, "--duration", "1", "-e", "context-switches",
            "-e", "task-clock", "-o", str(out),
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert process("aggregate", str(out)).returncode == 0
        frame = pd.read_csv(out / outdir.RESULTS)
        switches = frame[frame["EVENT_NAME"] == "context-switches"]
        assert abs(switches["SAMPLE_VALUE"].sum() / switches["TIME"].max() - HZ) < 0.1 * HZ
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        (root / name).rmdir()


def test_attach_argv_and_option_checks():
    argv = attach_argv(["task-clock", "mem:0x1:w"], "o.csv", 10, pids="12,34", interval_ms=100)
    assert argv[argv.index("-I") :][:4] == ["-I", "100", "--interval-count", "100"]
    assert argv[argv.index("-p") + 1] == "12,34" and "--" not in argv
    cg = attach_argv(["a", "b"], "o.csv", 1, cgroup="web", interval_ms=None)
    assert cg[-2:] == ["-G", "web,web"] and "-a" in cg and "--timeout" in cg
    assert interval_count(0.25, 100) == 3 and interval_count(0.001, 100) == 1
    with pytest.raises(AutoprofError, match="process ids"):
        attach.pid_list("12,abc")
    for args, message in [
        (["-p", "1", "--duration", "1", "--", "true"], "not both"),
        (["-p", "1"], "needs --duration"),
        (["--duration", "1", "--", "true"], "--duration is for attached"),
        ([], "nothing to profile"),
        # --cpu-list counts the CPUs' every process, as -a does: a target, not nothing
        (["--cpu-list", "0"], "-a or --cpu-list without COMMAND) needs --duration"),
        (["-p", "999999999", "--duration", "1", "-e", "task-clock"], "no running process"),
    ]:
        run = invoke("profile", *args)  # refused before perf starts: in-process
        assert run.returncode != 0 and message in run.stderr, (args, run.stderr)


def test_cross_run_pairs_are_the_events_no_run_measured_together():
    from autoprof.analysis import correlation, data

    frame = data.prepare(
        pd.DataFrame(
            {
                "EVENT_NAME": ["a", "b", "c", "c"],
                "INDEX": [0, 0, 0, 0],
                "TIME": [0.1] * 4,
                "SAMPLE_VALUE": [1.0] * 4,
                "RUN": [1, 2, 1, 2],
                "REPEAT": [1] * 4,
                "PMU": ["software"] * 4,
            }
        )
    )
    pairs = correlation.cross_run_pairs(frame, ["a", "b", "c"])
    assert pairs.to_numpy().tolist() == [["a", "b", "1", "2"]]


@pytest.mark.needs_perf
@pytest.mark.slow  # attaches to a real process for its duration
def test_a_one_run_attached_profile_does_not_warn_about_moments(cli_run, tmp_path):
    with subprocess.Popen(["sleep", "60"]) as target:
        try:
            run = cli_run("profile", "-p", target.pid, "--duration", "0.3", "-e", "task-clock",
                          "-o", tmp_path / "out")  # fmt: skip
        finally:
            target.kill()
    assert run.returncode == 0, run.stderr
    assert "different moment" not in run.stderr


@pytest.mark.needs_perf
def test_a_cpu_list_alone_profiles_those_cpus_for_the_duration(tmp_path):
    """`profile --cpu-list 0 --duration S`, no -a: every process on CPU 0, as REFERENCE and
    schedule present it (an alternative to -a)."""
    out = tmp_path / "out"
    done = invoke("profile", "--cpu-list", "0", "--duration", "0.3", "-e", "task-clock",
                  "-o", out)  # fmt: skip
    assert done.returncode == 0, done.output
    assert invoke("aggregate", out).returncode == 0
    rows = pd.read_csv(out / "results.csv")
    assert set(rows["CPU"]) == {0} and set(rows["STATUS"]) == {"ok"}
    assert rows["SAMPLE_VALUE"].sum() > 0
