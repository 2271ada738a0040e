"""Nothing left running, nothing silently missing (issue 17 items 1, 2, 3, 5, 7, 9).

Signals go by PID to real `autoprof profile` / `autoprof record` processes started in a session
of their own; afterwards no process of that session's group, nor of the group a run's workload
leads with its perf, may live.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoprof.catalog import machine
from autoprof.perf.unsupported import Unsupported
from autoprof.results import csvfile
from autoprof.run import outdir
from autoprof.testing.cli import invoke, process
from autoprof.util.status import RunStatus

pytestmark = pytest.mark.needs_perf

AUTOPROF = [sys.executable, "-m", "autoprof"]
# a workload that ignores Ctrl-C (and, in the second form, SIGTERM too) and burns a CPU
DEAF = "trap '' INT; while :; do :; done"
DEAFER = "trap '' INT TERM; while :; do :; done"


def live_processes(pgid: int) -> list[str]:
    """The live (not zombie) processes of process group `pgid`, as "pid comm", from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        state, _ppid, group = text[text.rindex(")") + 2 :].split()[:3]
        if int(group) == pgid and state != "Z":
            found.append(f"{stat.parent.name} {text[text.index('(') + 1 : text.rindex(')')]}")
    return found


def poll(condition, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def reaper():
    """The process groups a test started: whatever of them still lives after the test is
    killed, so that a failing test leaves nothing spinning."""
    groups: list[int] = []
    yield groups
    for group in groups:
        if live_processes(group):
            os.killpg(group, signal.SIGKILL)


def start(reaper: list[int], *args: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [*AUTOPROF, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    reaper.append(proc.pid)
    return proc


def assert_nothing_left(*groups: int) -> None:
    """No live process in any of `groups`."""
    left = {g: live_processes(g) for g in groups}
    assert not any(left.values()), left


def perf_group(reaper: list[int], out: Path) -> int:
    """The process group of run 1 (led by the workload, with its perf), once both run."""

    def pid():
        return next((r.workload_pid for r in outdir.left_running(out) if r.workload_pid), None)

    group = poll(pid, what="the workload to start")
    reaper.append(group)
    poll(lambda: len(live_processes(group)) >= 2, what="perf and the workload")
    return group


@pytest.mark.slow  # a real profile, stopped by a signal or a timeout
def test_timeout_stops_a_workload_that_ignores_sigint(tmp_path, reaper):
    out = tmp_path / "out"
    proc = start(
        reaper,
        "profile",
        "--timeout",
        "1",
        "-e",
        "task-clock",
        "-o",
        str(out),
        "--",
        "sh",
        "-c",
        DEAF,
    )
    group = perf_group(reaper, out)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "timeout" in stderr and "Traceback" not in stderr
    assert outdir.read_run_record(outdir.run_dir(out, 1, 1)).status == RunStatus.TIMEOUT
    assert_nothing_left(group, proc.pid)


@pytest.mark.slow  # a real profile, stopped by a signal or a timeout
@pytest.mark.parametrize(
    ("sig", "workload"),
    [(signal.SIGTERM, DEAFER), (signal.SIGHUP, DEAF), (signal.SIGINT, "sleep 100")],
)
def test_a_signal_stops_the_profile_and_its_whole_process_group(tmp_path, reaper, sig, workload):
    out = tmp_path / "out"
    proc = start(reaper, "profile", "-e", "task-clock", "-o", str(out), "--", "sh", "-c", workload)
    group = perf_group(reaper, out)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    name = signal.Signals(sig).name
    assert proc.returncode == 128 + sig, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("autoprof:")]
    assert lines == [
        f"autoprof: error: interrupted by {name}; finished runs are kept in {out}/: "
        "run the same command again to resume"
    ]
    record = outdir.read_run_record(outdir.run_dir(out, 1, 1))
    assert record.status == RunStatus.INTERRUPTED and record.error == f"interrupted by {name}"
    assert_nothing_left(group, proc.pid)


def perf_child(proc: subprocess.Popen) -> int:
    """The pid of the perf that `proc` (autoprof record, bench) started, from /proc: its child,
    or a descendant (bench starts perf from its rusage helper)."""

    def children(pid: int) -> list[int]:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
            return [int(c) for t in tasks for c in (t / "children").read_text().split()]
        except OSError:
            return []

    def child():
        todo = children(proc.pid)
        while todo:
            pid = todo.pop(0)
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "perf":
                    return pid
            except OSError:
                continue
            todo += children(pid)
        return None

    return poll(child, what="perf record to start")


def counting(pid: int) -> bool:
    """`pid` holds perf events open (it samples)."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
        return any(os.readlink(fd) == "anon_inode:[perf_event]" for fd in fds)
    except OSError:
        return False


@pytest.mark.slow  # a real profile, stopped by a signal or a timeout
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 0)])
def test_record_a_stops_on_sigterm_and_ends_normally_on_sigint(tmp_path, reaper, sig, code):
    out = tmp_path / "rec"
    proc = start(reaper, "record", "-a", "-o", str(out))
    perf = perf_child(proc)
    reaper.append(os.getpgid(perf))
    poll(lambda: counting(perf), what="perf record to open its events")
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr and "workload" not in stderr
    info = json.loads((out / "record.json").read_text())
    assert info["status"] == "ok" and info["stopped_by"] == signal.Signals(sig).name
    assert (out / "perf.data").stat().st_size > 0
    assert_nothing_left(perf, proc.pid)  # perf's own group, and autoprof's


@pytest.mark.slow  # a real system-wide perf record
def test_record_a_duration_ends_by_itself(tmp_path):
    out = tmp_path / "rec"
    started = time.monotonic()
    proc = process("record", "-a", "--duration", "0.5", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 30
    info = json.loads((out / "record.json").read_text())
    assert info["status"] == "ok" and info["stopped_by"] == "SIGINT"
    refused = process("record", "--duration", "1", "-o", str(out), "--", "true")
    assert refused.returncode == 2 and "applies to -p PID and -a" in refused.stderr


@pytest.mark.slow  # a real profile
def test_an_event_perf_refuses_is_not_supported_and_the_rest_counted(tmp_path):
    bare = subprocess.run(
        ["perf", "stat", "-e", "ftrace:function", "--", "true"], capture_output=True, text=True
    )
    if bare.returncode == 0:
        pytest.skip("perf may enable ftrace:function here (paranoid -1?): nothing is refused")
    assert "No permission to enable ftrace:function event" in bare.stderr
    out = tmp_path / "out"
    proc = process(
        "profile", "-e", "ftrace:function", "-e", "task-clock", "-o", str(out), "--", "sleep", "0.3"
    )  # longer than perf's 100 ms interval: a row for each counted event
    assert proc.returncode == 0, proc.stderr
    record = outdir.read_run_record(outdir.run_dir(out, 1, 1))
    assert record.status == RunStatus.OK
    assert [e.name for e in record.events] == ["task-clock"]
    assert record.unsupported == [
        Unsupported(
            "ftrace:function", "tracepoint", "No permission to enable ftrace:function event"
        )
    ]
    agg = process("aggregate", str(out))
    assert agg.returncode == 0, agg.stderr
    frame = csvfile.read_csv(out / outdir.RESULTS)
    # no value, no sample row: the report says why
    assert set(frame["EVENT_NAME"]) == {"task-clock"} and set(frame["STATUS"]) == {"ok"}
    assert frame.loc[frame["EVENT_NAME"] == "task-clock", "SAMPLE_VALUE"].sum() > 0
    report = json.loads((out / outdir.REPORT).read_text())
    assert [e["event"] for e in report["events"]["not_supported"]] == ["ftrace:function"]


def rootless(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["unshare", "-r", *AUTOPROF, *args], capture_output=True, text=True)


@pytest.fixture
def user_namespace():
    probe = subprocess.run(["unshare", "-r", "true"], capture_output=True)
    if shutil.which("unshare") is None or probe.returncode != 0:
        pytest.skip("cannot create a user namespace here (unshare -r)")
    paranoid = machine.perf_event_paranoid()
    if paranoid is None or paranoid < 2:
        pytest.skip(f"kernel.perf_event_paranoid={paranoid}: no user-only fallback to detect")


def test_rootless_container_is_detected_and_a_refused_up_front(user_namespace, tmp_path):
    proc = rootless("profile", "-e", "task-clock", "-o", str(tmp_path / "o"), "--", "true")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "user namespace" in line]
    assert len(lines) == 1 and "user space only" in lines[0], proc.stderr
    wide = rootless("profile", "-a", "-e", "task-clock", "-o", str(tmp_path / "a"), "--", "true")
    assert wide.returncode == 2 and not (tmp_path / "a").exists()
    assert wide.stderr.count("\n") == 1 and "refused in a user namespace" in wide.stderr
    rec = rootless("record", "-a", "--duration", "1", "-o", str(tmp_path / "r"))
    assert rec.returncode == 2 and "refused in a user namespace" in rec.stderr


def test_cpus_the_machine_lacks_are_refused_naming_its_cpus(tmp_path):
    online = Path("/sys/devices/system/cpu/online").read_text().strip()
    last = max(int(part.split("-")[-1]) for part in online.split(","))
    wanted = f"{last + 1}-{last + 5}"
    args = ["--cpu-list", wanted, "-e", "task-clock", "-o", str(tmp_path / "o")]
    proc = invoke("profile", *args, "--", "true")  # refused before perf starts: in-process
    assert proc.returncode == 2 and not (tmp_path / "o").exists()
    assert f"this machine has CPUs {online}" in proc.stderr and proc.stderr.count("\n") == 1


def test_another_cpus_catalog_and_an_impossible_reserve_are_refused(intel_dir, tmp_path):
    here = machine.cpu_id()
    if here.startswith("GenuineIntel-6-55-"):
        pytest.skip("this machine is a Skylake-X: --cpu SKX describes it")
    catalog = ["--events-dir", str(intel_dir), "--cpu", "SKX"]
    args = [*catalog, "-e", "INST_RETIRED.ANY", "-o", str(tmp_path / "o")]
    proc = invoke("profile", *args, "--", "true")  # refused before perf starts: in-process
    assert proc.returncode == 2 and not (tmp_path / "o").exists()
    assert f"is not this machine ({here})" in proc.stderr
    reserve = invoke("schedule", *catalog, "--reserve", "8")
    assert reserve.returncode == 2
    assert "the cpu PMU has 4 generic counters, at most 3 can be reserved" in reserve.stderr
    fine = process("schedule", *catalog, "--reserve", "3", "--json")
    assert fine.returncode == 0, fine.stderr


@pytest.mark.slow  # a real benchmark, stopped by a signal
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_a_bench_and_keeps_its_repetitions(tmp_path, reaper, sig):
    """perf and a workload deaf to SIGINT stop with the benchmark; the repetitions finished
    before the signal are written to the exports asked for."""
    mark, exported, rows = tmp_path / "started", tmp_path / "b.json", tmp_path / "b.csv"
    proc = start(
        reaper, "bench", "-n", "3", "--warmup", "0", "--no-startup-correction",
        "-e", "task-clock", "--export-json", str(exported), "--export-csv", str(rows),
        "--", "sleep", "0.01", "--", "sh", "-c", f"touch {mark}; {DEAF}",
    )  # fmt: skip
    poll(mark.exists, what="the second command to start")
    group = perf_child(proc)
    reaper.append(group)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("autoprof:")]
    # the commands run interleaved: the first repetition of the first, then the second's
    assert lines == [
        f"autoprof: error: interrupted by {signal.Signals(sig).name} after 1 timed "
        f"repetitions (kept in {exported}, {rows})"
    ]
    document = json.loads(exported.read_text())
    assert document["interrupted"] == signal.Signals(sig).name
    assert [len(c["repetitions"]) for c in document["commands"]] == [1, 0]
    # header + 3 times, max RSS, task-clock
    assert len(rows.read_text().splitlines()) == 1 + 5
    assert_nothing_left(group, proc.pid)


@pytest.mark.needs_perf
@pytest.mark.slow  # a real profile that waits for its timeout
def test_a_single_run_that_times_out_says_so(cli_run, tmp_path):
    run = cli_run("profile", "-e", "task-clock", "--timeout", "1", "-o", tmp_path / "out",
                  "--", "sleep", "60")  # fmt: skip
    assert run.returncode == 2
    error = run.stderr.strip().splitlines()[-1]
    assert error == (
        "autoprof: error: the run failed (timed out after --timeout 1 s: perf and the command "
        f"were stopped); its output is kept in {tmp_path / 'out'}/"
    )
    assert "next:" not in run.stderr  # nothing to aggregate
