"""Record real profiles on this machine (perf record -e cpu-clock) and fold, diff and render
them through the CLI. Skips where perf or a C compiler is missing or perf may not sample."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autoprof.flame.diff import changes, diff_tree
from autoprof.flame.fold import fold
from autoprof.flame.source import load
from autoprof.perf.script import parse
from autoprof.testing.cli import process

PROGRAM = r"""
#include <stdlib.h>
static volatile long sink;
__attribute__((noinline)) void work_a(long n) { for (long i = 0; i < n; i++) sink += i % 7; }
__attribute__((noinline)) void work_b(long n) { for (long i = 0; i < n; i++) sink += i % 5; }
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    int times_b = atoi(argv[2]);
    work_a(n);
    for (int i = 0; i < times_b; i++) work_b(n);
    return 0;
}
"""
N = "40000000"
pytestmark = pytest.mark.slow  # real perf record runs


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    if shutil.which("perf") is None or shutil.which("cc") is None:
        pytest.skip("perf and cc are needed (make system-deps installs them)")
    folder = tmp_path_factory.mktemp("prog")
    (folder / "work.c").write_text(PROGRAM)
    exe = folder / "work"
    subprocess.run(
        # -O0: Debian's gcc drops the frame pointer of leaf functions at -O1 and above, and
        # perf's frame-pointer unwinding then skips their caller (main)
        ["cc", "-O0", "-g", "-fno-omit-frame-pointer", "-o", str(exe), str(folder / "work.c")],
        check=True,
    )
    probe = subprocess.run(
        ["perf", "record", "-q", "-e", "cpu-clock", "-o", str(folder / "probe.data"), "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"perf cannot sample here: {probe.stderr.strip()[:200]}")
    return exe


def test_fold_a_live_recording(program: Path, tmp_path: Path):
    data = tmp_path / "perf.data"
    record = ["perf", "record", "-q", "-F", "999", "-g", "-e", "cpu-clock", "-o", str(data)]
    subprocess.run([*record, str(program), N, "1"], check=True)
    text = subprocess.run(
        ["perf", "script", "-i", str(data)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    periods = [int(m.group(1)) for line in text if (m := re.search(r":\s+(\d+) cpu-clock:", line))]
    folded = fold(parse(text))
    assert periods and folded.total == sum(periods)
    assert folded.sample_count == len(periods)
    for work in ("work_a", "work_b"):
        assert any(stack[-2:] == ("main", work) for stack in folded.stacks)
    # reading the perf.data itself (autoprof runs perf script) folds to the same stacks
    assert load(data).stacks == folded.stacks


def test_record_then_diff_shows_the_doubled_function_as_most_grown(program: Path, tmp_path: Path):
    # work_b runs once, then four times: its share of the samples goes from about 1/2 to 4/5.
    # cpu-clock counts a VM's stolen time too, so the margin is wide (delta > 0.15, not 0.3).
    for name, times_b in (("before", "1"), ("after", "4")):
        proc = process(
            "record", "-F", "999", "-e", "cpu-clock", "-o", str(tmp_path / name), "--",
            str(program), N, times_b,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        info = json.loads((tmp_path / name / "record.json").read_text())
        assert info["command"] == [str(program), N, times_b]
        assert info["status"] == "ok"
    svg = tmp_path / "diff.svg"
    proc = process(
        "flamegraph", "--diff", str(tmp_path / "before"), str(tmp_path / "after"), "-o", str(svg)
    )
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.split()[0] == "grew" and first.split()[3] == "work_b", proc.stdout
    top = changes(diff_tree(load(tmp_path / "before"), load(tmp_path / "after")))[0]
    assert top.name == "work_b" and top.delta > 0.15
    assert "<svg" in svg.read_text()


def test_record_refuses_bad_perf_options(program: Path, tmp_path: Path):
    # an event perf knows but cannot sample for one process: perf's own reason, kept
    proc = process("record", "-e", "msr/tsc/", "-o", str(tmp_path / "r"), "--", "true")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("autoprof: error: perf record failed")
    assert "Traceback" not in proc.stderr
    assert json.loads((tmp_path / "r" / "record.json").read_text())["status"] == "perf-failed"
    # an event of no catalog never reaches perf (as `profile` refuses it)
    proc = process("record", "-e", "no-such-event", "-o", str(tmp_path / "u"), "--", "true")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("autoprof: error: unknown event 'no-such-event' for ")
    assert not (tmp_path / "u").exists()
