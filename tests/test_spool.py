"""Issue #40: a run's output files exist only when it wrote to them (a file made per stream per
run was half of a run's CPU on this VM's filesystem), and what a process writes never lands in
another run's file: not one the workload left running, not one a dead profiler left behind."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from autoprof.run import outdir, spool
from autoprof.testing import cli


def _profile(out: Path, *command: str, repeat: int = 2) -> None:
    proc = cli.process(
        "profile", "-e", "task-clock", "--repeat", str(repeat), "-o", str(out), "--", *command
    )
    assert proc.returncode == 0, proc.stderr


def _until(check, seconds: float = 60.0) -> None:
    """Poll `check` until true (a deadline, not a fixed wait: the machine may be loaded)."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_only_what_was_written_has_a_file(tmp_path):
    out = tmp_path / "out"
    marker = tmp_path / "marker"  # the first run makes it and writes to stderr; the second not
    script = f'echo "out $$"; [ -e {marker} ] || {{ touch {marker}; echo err >&2; }}'
    _profile(out, "sh", "-c", script)
    first, second = outdir.run_folders(out)
    assert (first / outdir.STDOUT).read_text().startswith("out ")
    assert (second / outdir.STDOUT).read_text().startswith("out ")
    assert (first / outdir.STDOUT).read_text() != (second / outdir.STDOUT).read_text()
    assert (first / outdir.STDERR).read_text() == "err\n"
    assert not (second / outdir.STDERR).exists()  # the second run wrote nothing there
    assert not any(out.glob(f"*{spool.SUFFIX}"))  # none left once the profile ended


def test_a_silent_workload_leaves_no_output_file(tmp_path):
    out = tmp_path / "out"
    _profile(out, "true", repeat=3)
    for folder in outdir.run_folders(out):
        assert sorted(p.name for p in folder.iterdir()) == [outdir.PERF_OUTPUT, outdir.RUN_RECORD]


def test_what_a_left_process_writes_later_stays_in_its_own_run(tmp_path):
    """The workload exits at once, leaving a child that writes its run's number after the run
    ended (the spool is still open in it, empty): each line lands in the run it came from."""
    out = tmp_path / "out"
    counter = tmp_path / "n"
    script = f"n=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 )); echo $n > {counter}; " + (
        "(sleep 0.3; echo late $n) & exit 0"
    )
    _profile(out, "sh", "-c", script, repeat=3)
    folders = outdir.run_folders(out)

    def all_written() -> bool:
        return all(
            (f / outdir.STDOUT).exists() and (f / outdir.STDOUT).read_text() for f in folders
        )

    _until(all_written)
    assert [(f / outdir.STDOUT).read_text() for f in folders] == [f"late {n}\n" for n in (1, 2, 3)]


def test_a_dead_profilers_spool_reaches_no_run(tmp_path):
    out = tmp_path / "out"
    _profile(out, "sh", "-c", "echo mine", repeat=1)
    Path(spool.spool_path(out, outdir.STDOUT)).write_text("left by a profiler that died\n")
    _profile(out, "sh", "-c", "echo mine", repeat=2)  # resumes: run 2 is new
    for folder in outdir.run_folders(out):
        assert (folder / outdir.STDOUT).read_text() == "mine\n"
    assert not Path(spool.spool_path(out, outdir.STDOUT)).exists()


def test_held_is_the_kernels_answer(tmp_path):
    path = tmp_path / "s.spool"
    path.write_text("")
    assert not spool.held(path)
    writer = subprocess.Popen(
        ["sh", "-c", "exec 3>>s.spool; read x"], cwd=tmp_path, stdin=subprocess.PIPE
    )
    try:
        _until(
            lambda: any(
                os.path.realpath(f"/proc/{writer.pid}/fd/{fd}") == str(path)
                for fd in os.listdir(f"/proc/{writer.pid}/fd")
            )
        )
        assert spool.held(path)
    finally:
        writer.communicate(b"\n")
    assert not spool.held(path)


def test_the_live_output_of_a_run_under_way_is_its_spool(tmp_path):
    out, folder = tmp_path / "out", tmp_path / "out" / "runs" / "run0001-rep1"
    folder.mkdir(parents=True)
    assert spool.live(out, folder, outdir.STDOUT) == out / "stdout.spool"
    (folder / outdir.STDOUT).write_text("done")
    assert spool.live(out, folder, outdir.STDOUT) == folder / outdir.STDOUT
