"""Nothing counted that bare perf would not count (issue #28, point 2), on this machine's software
events: `autoprof profile` against bare `perf stat` of the same command.

The personality ADDR_NO_RANDOMIZE (`setarch -R`, inherited by autoprof, perf and the workload)
makes a program's page faults the same run after run, so the counts compare exactly: user-mode
page faults equal bare perf's; all modes lack only the end of the exec that bare perf counts
after its enable_on_exec point (2 page faults: the ELF loader zeroing the partial .bss pages of
the program and of its dynamic loader). The Arm lane (test_pmu_lane.py) shows the same for
instructions on a real PMU.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autoprof.catalog import machine
from autoprof.errors import AutoprofError
from autoprof.perf import launch, process
from autoprof.results import csvfile
from autoprof.run import outdir
from autoprof.testing import cli
from autoprof.util.status import RunStatus

pytestmark = pytest.mark.skipif(
    shutil.which("perf") is None or shutil.which("setarch") is None, reason="needs perf, setarch"
)
FIXED = ["setarch", "-R"]  # no address space randomisation: the same page faults every run
EVENTS = ("page-faults:u", "page-faults")


def bare(command: list[str]) -> dict[str, float]:
    proc = subprocess.run(
        [*FIXED, "perf", "stat", "-x,", "-e", ",".join(EVENTS), "--", *command],
        capture_output=True,
        text=True,
    )
    rows = [line.split(",") for line in proc.stderr.splitlines() if line.count(",") >= 4]
    return {row[2]: float(row[0]) for row in rows}


@functools.cache
def perfs_workload_env() -> dict[str, str]:
    """The environment bare perf gives the command it starts: this one with perf's own
    additions (PATH led by perf's exec path, PERF_BUILDID_DIR, PREFIX). autoprof gives its
    workload the user's environment unchanged; a profile compared with bare perf runs in
    perf's, or the two stacks differ in size (a page fault more or fewer where that crosses a
    page: it did under pytest-xdist, whose variables moved the environment's end)."""
    proc = subprocess.run(
        ["perf", "stat", "-o", os.devnull, "--", "env", "-0"], capture_output=True, check=True
    )
    pairs = (item.decode().partition("=") for item in proc.stdout.split(b"\0") if item)
    return {name: value for name, _, value in pairs}


def profiled(tmp_path: Path, command: list[str], *args: str) -> tuple[dict[str, float], Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)  # -o's folder must exist (a typo is refused)
    out = tmp_path / "out"
    events = [arg for name in EVENTS for arg in ("-e", name)]
    proc = subprocess.run(
        [*FIXED, sys.executable, "-m", "autoprof", "profile", *events, *args, "-o", str(out),
         "--", *command],
        capture_output=True,
        text=True,
        env=perfs_workload_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    agg = cli.invoke("aggregate", str(out))
    assert agg.returncode == 0, agg.stderr
    frame = csvfile.read_csv(out / outdir.RESULTS)
    assert set(frame["STATUS"]) == {"ok"} and (frame["PERCENT_RUNNING"] == 100).all()
    return frame.groupby("EVENT_NAME")["SAMPLE_VALUE"].sum().to_dict(), out


@pytest.mark.slow  # six real profiles
@pytest.mark.parametrize(
    "command",
    [["true"], ["sh", "-c", "/bin/true; /bin/true; /bin/true"]],
    ids=["true", "children"],
)
def test_page_faults_are_bare_perfs(tmp_path, command):
    """`true` (shorter than perf's first interval: bare `perf stat -I` prints nothing for it),
    and a shell whose children run `true`: counting is inherited. Without ASLR a program
    faults the same pages run after run, but on a loaded machine now and then one more or
    fewer (page cache, a shell's children racing their parent to shared pages after fork):
    three runs of each, medians compared."""
    want = [bare(command) for _ in range(3)]
    got = [profiled(tmp_path / str(i), command)[0] for i in range(3)]

    def median(runs: list[dict[str, float]], event: str) -> float:
        return statistics.median(run[event] for run in runs)

    user, every = (median(got, e) - median(want, e) for e in ("page-faults:u", "page-faults"))
    if len(command) == 1:
        assert user == 0, (got, want)
    else:  # the children's own faults are in: far more than the shell's alone
        assert abs(user) <= 2, (got, want)
        assert median(got, "page-faults:u") > bare(["sh", "-c", ":"])["page-faults:u"] + 100
    assert -2 <= every <= 0, (got, want)  # the end of the exec: bare perf counts it


@pytest.mark.slow
def test_exit_status_and_signal_are_the_workloads_own_in_interval_mode(tmp_path):
    """perf stat -I exits 0 whatever the workload did; autoprof reaps the workload itself."""
    for script, status, error in (
        ("exit 3", 3, "workload exited with status 3"),
        ("kill -USR1 $$", -10, "workload killed by SIGUSR1"),
    ):
        out = tmp_path / str(status)
        proc = cli.process(
            "profile", "-e", "task-clock", "--interval", "10", "-o", str(out), "--", "sh", "-c",
            script,
        )  # fmt: skip
        assert proc.returncode == 2 and "the run failed" in proc.stderr
        record = outdir.read_run_record(outdir.run_folders(out)[0])
        assert (record.workload_exit, record.error) == (status, error)
        assert record.perf_exit == 0 and "-p" in record.perf_argv


@pytest.mark.slow
def test_a_system_wide_profile_of_a_command_counts_every_cpu(tmp_path):
    out = tmp_path / "out"
    proc = cli.process(
        "profile", "-a", "-e", "context-switches", "-o", str(out), "--", "sleep", "0.3"
    )
    assert proc.returncode == 0, proc.stderr
    record = outdir.read_run_record(outdir.run_folders(out)[0])
    assert record.workload_exit == 0 and "-p" not in record.perf_argv and "-a" in record.perf_argv
    lines = (outdir.run_folders(out)[0] / outdir.PERF_OUTPUT).read_text().splitlines()
    cpus = {line.split(",")[1] for line in lines if "context-switches" in line}
    assert len(cpus) == len(machine.cpu_list(Path("/sys/devices/system/cpu/online").read_text()))


def test_a_program_that_cannot_run_is_one_line(tmp_path):
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    for command, said in (
        ([str(script)], f"autoprof: error: cannot run {script}: Permission denied"),
        (["no-such-program-xyz"], "autoprof: error: command not found: no-such-program-xyz"),
    ):
        proc = cli.process(
            "profile", "-e", "task-clock", "-o", str(tmp_path / "out"), "--", *command
        )
        assert proc.returncode == 2 and proc.stderr.strip() == said


@pytest.mark.slow
def test_the_command_runs_in_the_users_environment(tmp_path):
    """perf needs the C locale to print numbers autoprof parses; the command gets the
    environment bare perf would give it (a locale changes what a program does: busybox sh ran
    2,013 fewer instructions under LC_ALL=C on the Arm lane), less autoprof's own settings."""
    out = tmp_path / "out"
    env = {**os.environ, "LC_ALL": "C.UTF-8", "AUTOPROF_STORE": "secret", "MARK": "kept"}
    proc = cli.process(
        "profile", "-e", "task-clock", "-o", str(out), "--", "sh", "-c", "env", env=env
    )
    assert proc.returncode == 0, proc.stderr
    printed = (outdir.run_folders(out)[0] / outdir.STDOUT).read_text().splitlines()
    assert "LC_ALL=C.UTF-8" in printed and "MARK=kept" in printed
    assert not any(line.startswith("AUTOPROF_") for line in printed)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_a_kernel_that_refuses_ptrace_traceme_is_one_line(tmp_path):
    """Under a tracer (strace -f attaches every child at its fork) the kernel refuses the
    command's PTRACE_TRACEME, as it does with kernel.yama.ptrace_scope=3."""
    proc = subprocess.run(
        ["strace", "-f", "-qq", "-o", "/dev/null", sys.executable, "-m", "autoprof", "profile",
         "-e", "task-clock", "-o", str(tmp_path / "out"), "--", "true"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    errors = [line for line in proc.stderr.splitlines() if line.startswith("autoprof: error")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert errors == [
        "autoprof: error: cannot start true held at its exec: PTRACE_TRACEME refused "
        "(a seccomp filter, or autoprof itself under a tracer?)"
    ]


@pytest.mark.slow
def test_pythons_own_locale_does_not_reach_the_command(tmp_path):
    """In the C locale Python sets LC_CTYPE=C.UTF-8 in its own environment at start-up (PEP
    538); the command must not inherit what the user never set."""
    out = tmp_path / "out"
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/")}
    proc = cli.process(
        "profile", "-e", "task-clock", "-o", str(out), "--", "sh", "-c", "env", env=env
    )
    assert proc.returncode == 0, proc.stderr
    printed = (outdir.run_folders(out)[0] / outdir.STDOUT).read_text().splitlines()
    assert not any(line.startswith(("LC_", "LANG")) for line in printed), printed


def test_a_workload_left_without_its_perf_is_stopped_by_its_identity(tmp_path):
    """A profiler killed before perf acked leaves the workload alone (perf dies on the broken
    ack pipe, and the kernel lets a tracee go when its tracer dies): run.json names it by pid
    and start time, so the next profile or worker stops it, and never a process that merely
    got its pid again."""
    left = subprocess.Popen(["sleep", "60"], process_group=0)
    try:
        started = process.start_time(left.pid)
        assert started is not None
        assert process.stop_leftovers([], [(left.pid, started + 1)]) == []  # another process
        assert left.poll() is None
        assert process.stop_leftovers([], [(left.pid, started)]) == [left.pid]
        assert left.wait(timeout=30) == -9
    finally:
        left.kill()
        left.wait()


SWITCH_OFF = """
import os, sys
mine = os.getpgid(0)
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        if os.getpgid(int(pid)) != mine or b"--control" not in argv:
            continue
        ctl = argv[argv.index(b"--control") + 1].decode().split(":")[1].split(",")[0]
        fd = os.open(f"/proc/{pid}/fd/{ctl}", os.O_WRONLY)
    except (OSError, ValueError, IndexError) as err:
        print("refused:", err)
        continue
    os.write(fd, b"disable\\n")
    print("disabled perf", pid)
pages = bytearray(64 << 20)  # 16,384 pages touched after the attempt
for i in range(0, len(pages), 4096):
    pages[i] = 1
"""


def test_a_workload_cannot_switch_its_own_counting_off(tmp_path):
    """perf's control channel is a socketpair: the workload (same user: root under a root
    profile) cannot reopen it through /proc/PERF/fd/N and write `disable` (issue #38, point 5).
    With pipes it could, and its 16,384 page faults after that went uncounted."""
    out = tmp_path / "out"
    proc = cli.invoke(
        "profile", "-e", "page-faults", "-o", str(out), "--", sys.executable, "-c", SWITCH_OFF
    )
    assert proc.returncode == 0, proc.stderr
    said = (outdir.run_dir(out, 1, 1) / outdir.STDOUT).read_text()
    assert "refused:" in said and "disabled perf" not in said, said
    assert cli.invoke("aggregate", str(out)).returncode == 0
    frame = csvfile.read_csv(out / outdir.RESULTS)
    assert frame["SAMPLE_VALUE"].sum() > 16384


STEAL_AND_SWITCH_OFF = """
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
parent = os.getppid()  # the profiler: its end of perf's control channel
pidfd = os.pidfd_open(parent)
for name in os.listdir(f"/proc/{parent}/fd"):
    try:
        if not os.readlink(f"/proc/{parent}/fd/{name}").startswith("socket:"):
            continue
    except OSError:
        continue
    fd = libc.syscall(438, pidfd, int(name), 0)  # pidfd_getfd: a copy of the profiler's fd
    if fd >= 0:
        os.write(fd, b"disable\\n")
        print("disabled", flush=True)
time.sleep(0.3)  # perf reads it from its event loop
pages = bytearray(64 << 20)  # 16,384 pages touched, not counted
for i in range(0, len(pages), 4096):
    pages[i] = 1
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="takes the profiler's descriptor: needs root")
def test_a_run_whose_counting_was_switched_off_is_flagged(tmp_path):
    """A workload of the same user (root) takes the profiler's end of perf's control channel
    (pidfd_getfd) and writes `disable`: perf said "Events disabled", its 16,384 page faults
    went uncounted, and the run was `ok` (issue #38, point 5). It is perf-failed now, so
    `--retries` runs it again and aggregate reports it."""
    out = tmp_path / "out"
    argv = ["-e", "page-faults", "-o", str(out), "--", sys.executable, "-c", STEAL_AND_SWITCH_OFF]
    proc = cli.invoke("profile", *argv)
    folder = outdir.run_dir(out, 1, 1)
    if "disabled" not in (folder / outdir.STDOUT).read_text():
        pytest.skip("pidfd_getfd refused here (kernel before 5.6, or ptrace restricted)")
    assert "Events disabled" in (folder / outdir.STDERR).read_text()
    record = outdir.read_run_record(folder)
    assert record.status == RunStatus.PERF_FAILED, record
    assert record.error is not None and "counting was switched off" in record.error
    assert proc.returncode == 2 and "switched off" in proc.stderr.splitlines()[-1]


HELD = (
    "grep -E '^Cpus_allowed_list' /proc/$$/status; echo \"$0|$1|$MARK\";"
    " [ -e /proc/$$/fd/100 ] && echo kept"
)


def _status(pid: int) -> dict[str, str]:
    rows = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(row.split(":\t", 1) for row in rows if ":\t" in row)


@pytest.mark.parametrize("native", [True, False], ids=["launcher", "python"])
def test_the_workload_is_held_at_its_own_exec_then_runs_as_itself(tmp_path, native):
    """Both ways of starting a workload (the native launcher, vfork'd; Python's fork with a
    preexec_fn) give the same process: held in a ptrace stop at its own program's exec, traced
    by this thread, with its own argv, its environment, the CPUs asked for and the descriptor
    kept at a fixed number (the region marker channel's), then counted by the perf attached."""
    if native and launch.native_launcher() is None:
        pytest.skip("the native launcher is not built (make install, with a C compiler)")
    ours, theirs = socket.socketpair()
    kept = fcntl.fcntl(theirs.fileno(), fcntl.F_DUPFD_CLOEXEC, 100)
    cpu = min(os.sched_getaffinity(0))
    out = tmp_path / "stdout"
    with out.open("wb") as stdout:
        held = launch.Launch.spawn(
            ["sh", "-c", HELD, "zero", "one"],
            env={**os.environ, "MARK": "kept"},
            stdout=stdout,
            stderr=stdout,
            cpus=frozenset({cpu}),
            pass_fds=(kept,),
            native=native,
        )
    os.close(kept)
    try:
        status = _status(held.pid)
        assert status["State"].startswith("t") and status["TracerPid"] == str(
            threading.get_native_id()
        )
        assert Path(f"/proc/{held.pid}/exe").resolve() == Path(shutil.which("sh")).resolve()
        cmdline = Path(f"/proc/{held.pid}/cmdline").read_bytes().split(b"\0")[:-1]
        assert cmdline == [b"sh", b"-c", HELD.encode(), b"zero", b"one"]
        perf_out = tmp_path / "perf.csv"
        held.start_perf(
            ["perf", "stat", "-x,", "-e", "task-clock", "-o", str(perf_out)],
            attach=True,
            env={**os.environ, "LC_ALL": "C"},
        )
        assert held.release(time.monotonic() + 60)
        held.wait_exit(60)
        assert held.finish() == 0 and held.workload_status == 0
    finally:
        held.stop()
        ours.close()
        theirs.close()
    assert out.read_text().splitlines() == [f"Cpus_allowed_list:\t{cpu}", "zero|one|kept", "kept"]
    assert "task-clock" in perf_out.read_text()


def test_the_launcher_is_built_where_a_compiler_is():
    """`make install` builds it (the test targets run it first)."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler: autoprof forks workloads from Python")
    assert launch.native_launcher() == str(launch.LAUNCHER)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
@pytest.mark.parametrize("native", [True, False], ids=["launcher", "python"])
def test_ptrace_refused_is_one_line_either_way(native):
    """Under a tracer the kernel refuses PTRACE_TRACEME, from the launcher as from Python."""
    if native and launch.native_launcher() is None:
        pytest.skip("the native launcher is not built (make install, with a C compiler)")
    code = (
        "import os, sys\nfrom autoprof.errors import AutoprofError\n"
        "from autoprof.perf.launch import Launch\n"
        "try:\n    Launch.spawn(['true'], env=os.environ, native=sys.argv[1] == 'y')\n"
        "except AutoprofError as err:\n    print(err)\n"
    )
    proc = subprocess.run(
        ["strace", "-f", "-qq", "-o", "/dev/null", sys.executable, "-c", code,
         "y" if native else "n"],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.stdout.splitlines() == [
        "cannot start true held at its exec: PTRACE_TRACEME refused "
        "(a seccomp filter, or autoprof itself under a tracer?)"
    ], proc.stderr


def test_the_launcher_says_why_it_did_not_exec(tmp_path):
    """Its exit status before the exec: CPUs the kernel refuses, a program it cannot exec
    (exec's errno), a call of another protocol (a launcher older or newer than launch.py)."""
    if launch.native_launcher() is None:
        pytest.skip("the native launcher is not built (make install, with a C compiler)")
    with pytest.raises(AutoprofError, match=r"^cannot run true on CPUs 4000: the kernel refused"):
        launch.Launch.spawn(["true"], env=os.environ, cpus=frozenset({4000}))
    script = tmp_path / "no-interpreter"
    script.write_text("#!/no/such/interpreter\n")
    script.chmod(0o755)
    with pytest.raises(AutoprofError, match=rf"^cannot run {script}: No such file or directory$"):
        launch.Launch.spawn([str(script)], env=os.environ)
    argv = [str(launch.LAUNCHER), "autoprof-launcher/0", "-", "/bin/true", "true"]
    other = subprocess.run(argv, timeout=60)
    assert other.returncode == 253
