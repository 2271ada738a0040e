"""Regression gates for CI (`bench --baseline --fail-if`, `analyze compare --fail-if`) and
exact counts without a PMU (`bench --emulate`): a C program's changed build that retires 2%
more instructions fails the gate, the unchanged one passes it every time, a noisy wall-time
gate fails only when the change is significant."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from autoprof.analysis import gate
from autoprof.analysis.gate import Sample
from autoprof.emulate import cachegrind, qemu
from autoprof.errors import AutoprofError
from autoprof.testing.cli import invoke, process

needs_valgrind = pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("cc") is None,
    reason="needs valgrind and a C compiler (apt-get install valgrind gcc)",
)
needs_qemu_arm = pytest.mark.skipif(
    shutil.which("qemu-aarch64") is None or shutil.which("aarch64-linux-gnu-as") is None,
    reason="needs qemu-aarch64 and an aarch64 assembler (apt-get install qemu-user "
    "binutils-aarch64-linux-gnu)",
)
LOOP_S = Path(__file__).parent / "pmu_lane" / "loop.S"

# a loop whose iterations (N, set when it is built) retire ~11 instructions each
PROGRAM = r"""
#include <stdio.h>
int main(void) {
    static volatile int a[4096];
    long s = 0;
    for (long i = 0; i < N; i++) { a[i & 4095] += (int)i; s += a[(i * 7) & 4095]; }
    printf("%ld\n", s);
    return 0;
}
"""


def build(tmp: Path, name: str, n: int) -> Path:
    source = tmp / f"{name}.c"
    source.write_text(PROGRAM)
    binary = tmp / name
    subprocess.run(["cc", "-O1", f"-DN={n}", "-o", binary, source], check=True)
    return binary


def test_gates_parse_and_refuse_bad_ones():
    found = gate.parse("instructions:u > +1%")
    assert (found.metric, found.above, found.threshold) == ("instructions:u", True, 0.01)
    assert gate.parse("wall>5%").metric == "wall_s"
    assert gate.parse("max-rss > +20%").metric == "max_rss_kib"
    assert gate.parse("instructions:u < -10.5%").threshold == pytest.approx(-0.105)
    for bad in ("wall", "wall > 5", "wall >= 5%", "> 5%", "wall > five%"):
        with pytest.raises(AutoprofError, match="expected METRIC"):
            gate.parse(bad)


def test_exact_counts_compare_exactly():
    rule = gate.parse("instructions:u > +1%")
    base = Sample([1_000_000.0] * 3, source="cachegrind")
    assert gate.evaluate(rule, base, Sample([1_020_000.0] * 3, source="cachegrind")).failed
    held = gate.evaluate(rule, base, Sample([1_009_999.0] * 3, source="cachegrind"))
    assert not held.failed and held.exact and held.low == held.high == held.change
    # hardware counts with no spread (breakpoints): exact too
    steady = gate.evaluate(rule, Sample([100.0, 100.0]), Sample([102.0, 102.0]))
    assert steady.exact and steady.failed
    with pytest.raises(AutoprofError, match=r"emulated \(cachegrind\) in the baseline only"):
        gate.evaluate(rule, base, Sample([1.0, 1.0], source="cpu"))


def test_noisy_metrics_fail_only_when_significant():
    rng = np.random.default_rng(7)
    rule = gate.parse("wall > +5%")
    base = list(1.0 + rng.normal(0, 0.2, 10))
    noisy = gate.evaluate(rule, Sample(base), Sample(list(1.1 + rng.normal(0, 0.2, 10))))
    assert not noisy.failed  # +10% estimated, but the interval reaches below +5%
    assert noisy.low < 0.05 < noisy.high
    tight = list(1.0 + rng.normal(0, 0.005, 10))
    slower = gate.evaluate(rule, Sample(tight), Sample(list(1.1 + rng.normal(0, 0.005, 10))))
    assert slower.failed and slower.low > 0.05
    faster = gate.evaluate(
        gate.parse("wall < -5%"), Sample(tight), Sample([t * 0.8 for t in tight])
    )
    assert faster.failed


def test_a_missing_metric_is_bad_input():
    with pytest.raises(AutoprofError, match="has no cycles"):
        gate.check([gate.parse("cycles > 1%")], {"wall_s": Sample([1.0])}, {}, ("a", "b"))


def test_cachegrind_summary_is_read_and_processes_added(tmp_path):
    header = "desc: I1 cache: 32768 B\ncmd: ./p\nevents: Ir Dr Dw Bc Bcm Bi Bim\n"
    (tmp_path / f"{cachegrind.OUT}.1").write_text(
        header + "fl=a.c\n1 5 1 0\nsummary: 10 4 2 3 1 1 0\n"
    )
    (tmp_path / f"{cachegrind.OUT}.2").write_text(header + "summary: 5 1 1 1 0 0 0\n")
    names = ["instructions:u", "L1-dcache-loads:u", "branches:u", "branch-misses:u"]
    assert cachegrind.read(tmp_path, names) == {
        "instructions:u": 15.0,
        "L1-dcache-loads:u": 5.0,
        "branches:u": 5.0,
        "branch-misses:u": 1.0,
    }
    argv = cachegrind.argv(["./p"], ["instructions:u"], tmp_path)
    assert "--cache-sim=no" in argv and "--branch-sim=no" in argv and argv[-2:] == ["--", "./p"]


def test_qemu_blocks_are_counted_by_their_translation():
    log = (
        b"----------------\nIN: \n0x00400078:  f9400be1  ldr x1, [sp, #0x10]\n"
        b"0x0040007c:  f94003e9  ldr x9, [sp]\n\n"
        b"Trace 0: 0x7fe5 [0000000001009331/0000000000400078/00000001/00000200] \n"
        b"----------------\nIN: \n0x004000f4:  91000484  add x4, x4, #1\n"
        b"0x004000f8:  54ffff81  b.ne #0x4000f4\n0x004000fc:  d4000001  svc #0\n\n"
        + b"Trace 0: 0x7fe6 [0000000001009331/00000000004000f4/00000001/00000200] \n"
        * 4
    )
    tally = qemu.Tally()
    tally.add(log)
    assert tally.instructions == 2 + 3 * 4 and tally.unknown == 0


@needs_qemu_arm
def test_qemu_counts_the_pmu_lanes_loop_exactly(tmp_path):
    """The PMU lane's loop (5 N + 5 digits(N) + 15 user-mode instructions, which the lane's bare
    perf counts exactly on its Arm PMU) counted by QEMU user mode on this x86-64 VM."""
    obj, loop = tmp_path / "loop.o", tmp_path / "loop"
    subprocess.run(["aarch64-linux-gnu-as", "-o", obj, LOOP_S], check=True)
    subprocess.run(["aarch64-linux-gnu-ld", "-static", "-o", loop, obj], check=True)
    out = tmp_path / "bench.json"
    proc = invoke("bench", "--emulate", "-n", "2", "--warmup", "0", "--export-json", out,
                  "--", loop, "100000")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["emulator"] == "qemu" and data["events"][0]["pmu"] == "qemu"
    counts = [r["counts"]["instructions:u"] for r in data["commands"][0]["repetitions"]]
    assert counts == [5 * 100_000 + 5 * 6 + 15] * 2
    assert "x slower than natively" in proc.stderr + proc.stdout


@needs_valgrind
@pytest.mark.slow
def test_a_build_retiring_2_percent_more_fails_the_gate_and_the_same_passes(tmp_path):
    same, more = build(tmp_path, "same", 1_000_000), build(tmp_path, "more", 1_020_000)
    base = tmp_path / "base.json"
    emulate = ("bench", "--emulate", "-n", "2", "--warmup", "0")
    saved = process(*emulate, "--save", base, "--", same)
    assert saved.returncode == 0, saved.stderr
    document = json.loads(base.read_text())
    assert document["emulator"] == "cachegrind"
    counts = [r["counts"]["instructions:u"] for r in document["commands"][0]["repetitions"]]
    assert len(set(counts)) == 1 and counts[0] > 10_000_000  # identical on every run
    summary, verdicts = tmp_path / "summary.md", tmp_path / "gates.json"
    gated = ("--baseline", base, "--fail-if", "instructions:u > +1%", "--summary", summary)
    failed = process(*emulate, *gated, "--summary-json", verdicts, "--", more)
    assert failed.returncode == 1, failed.stderr
    text = summary.read_text()
    assert "| `instructions:u > +1%` |" in text and "**FAIL**" in text
    change = json.loads(verdicts.read_text())["gates"][0]["change"]
    assert 0.019 < change < 0.021 and f"{change:+.2%}" in text
    for _ in range(20):
        held = process(*emulate, *gated, "--", same)
        assert held.returncode == 0, held.stdout + held.stderr
    assert summary.read_text().count("all 1 gates hold") == 20  # appended, as GitHub's is
    # the same two results through `analyze compare`
    now = tmp_path / "now.json"
    assert process(*emulate, "--export-json", now, "--", more).returncode == 0
    compared = process("analyze", "compare", base, now, "--fail-if", "instructions:u > +1%")
    assert compared.returncode == 1 and "instructions:u > +1%" in compared.stderr
    held = process("analyze", "compare", base, now, "--fail-if", "instructions:u > +3%")
    assert held.returncode == 0, held.stderr


def test_bad_gate_input_exits_2(tmp_path):
    proc = invoke("bench", "--baseline", tmp_path / "none.json", "--fail-if", "wall > 5%",
                  "--", "true")  # fmt: skip
    assert proc.returncode == 2 and "no such file" in proc.stderr
    for commands in (["true"], ["true", "--", "true", "--", "true"]):
        proc = invoke("bench", "--fail-if", "wall > 5%", "--", *commands)
        assert proc.returncode == 2 and "-- BASE -- NEW" in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.needs_perf
@pytest.mark.slow
def test_a_wall_time_gate_holds_on_the_same_program_under_load(tmp_path):
    """Two busy loops load the CPU the program is pinned to (and the VM's other users load it
    too): a 5% wall-time gate on two builds of the same program in one bench holds in every
    check, because the two run interleaved (a load that comes or goes falls on both) and the
    gate fails only on a significant change: at --confidence 0.999, an unchanged program fails
    a check with probability below 0.05%. The same gate, in the same conditions, fails a build
    doing 5x the work: it is not blind."""
    program = build(tmp_path, "same", 10_000_000)
    slower = build(tmp_path, "slower", 50_000_000)
    # program and loops share one CPU (bench --pin, the loops' affinity): a heavy load
    cpu = str(max(os.sched_getaffinity(0)))
    burners = [
        subprocess.Popen(["taskset", "-c", cpu, "sh", "-c", "while :; do :; done"])
        for _ in range(2)
    ]
    gated = ("bench", "-n", "20", "--warmup", "0", "--no-startup-correction", "--pin", cpu,
             "--confidence", "0.999", "--fail-if", "wall > +5%")  # fmt: skip
    try:
        held = [process(*gated, "--", program, "--", program) for _ in range(5)]
        caught = process(*gated, "--", program, "--", slower)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    for check in held:
        assert check.returncode == 0, check.stdout + check.stderr
        assert re.search(r"wall > \+5% .* \(99\.9%\) +pass", check.stderr), check.stderr
    assert caught.returncode == 1, caught.stdout + caught.stderr
    assert "gate failed: wall > +5%" in caught.stdout + caught.stderr


def test_a_gate_against_a_saved_baseline_says_what_a_time_gate_cannot_see(tmp_path):
    """A time gate against a baseline from another moment notes that the machine may have
    changed in between, and names the way that does not suffer from it."""
    base, now = Sample([1.0, 1.1, 0.9]), Sample([1.0, 1.2, 0.95])
    report = gate.check([gate.parse("wall > +5%")], {"wall_s": base}, {"wall_s": now}, ("a", "b"))
    assert report.notes and "-- BASE -- NEW" in report.notes[0]
    paired = gate.check([gate.parse("wall > +5%")], {"wall_s": base}, {"wall_s": now},
                        ("a", "b"), paired=True)  # fmt: skip
    assert paired.notes == []


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux only")
def test_max_rss_comes_from_the_command_not_from_autoprof(tmp_path):
    """A program that touches 40 MiB reports at least that; `true` reports far less than
    autoprof's own size (the helper forks it: exec keeps the forking process's peak)."""
    from autoprof.benchmark import rusage

    python = shutil.which("python3") or "python3"
    big = rusage.run(
        [python, "-I", "-S", "-c", "b = bytearray(40 << 20); b[::4096] = b'x' * len(b[::4096])"],
        60,
        "big",
    )
    small = rusage.run(["true"], 60, "true")
    assert big.returncode == small.returncode == 0
    assert big.max_rss_kib > 40 * 1024 > 4 * small.max_rss_kib


CI = Path(__file__).parent.parent / "docs" / "ci"
MAKEFILE = "prog: prog.c\n\tcc -O1 -DN=$(N) -o prog prog.c\n"


def _repository(tmp: Path, base_n: int, head_n: int) -> tuple[Path, str]:
    """A git repository whose base commit builds the program with `base_n` iterations and
    whose head (checked out) with `head_n`; its path and the base's sha."""
    repo = tmp / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    (repo / "prog.c").write_text(PROGRAM)
    for n in (base_n, head_n):
        (repo / "Makefile").write_text(f"N = {n}\n" + MAKEFILE)
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", f"N={n}"], check=True)
    base = subprocess.run([*git, "rev-parse", "HEAD~1"], capture_output=True, text=True)
    return repo, base.stdout.strip()


def _run_steps(script: str, repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"  # this autoprof
    return subprocess.run(["bash", "-e", "-c", script], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "PATH": path, **env}, timeout=600)  # fmt: skip


@needs_valgrind
@pytest.mark.slow
@pytest.mark.parametrize("head_n, code", [(1_020_000, 1), (1_000_000, 0)])
def test_the_github_actions_recipe_runs(tmp_path, head_n, code):
    """The workflow's autoprof steps, run as GitHub would: a head retiring 2% more fails."""
    workflow = yaml.safe_load((CI / "github-actions.yml").read_text())
    steps = [s["run"] for s in workflow["jobs"]["gate"]["steps"]
             if s.get("name", "").startswith("autoprof:")]  # fmt: skip
    repo, base = _repository(tmp_path, 1_000_000, head_n)
    summary = tmp_path / "step-summary.md"
    env = {"BASE_SHA": base, "GITHUB_STEP_SUMMARY": str(summary)}
    found = [_run_steps(step, repo, env) for step in steps]
    assert found[0].returncode == 0, found[0].stderr
    assert found[1].returncode == code, found[1].stdout + found[1].stderr
    assert ("**FAIL**" in summary.read_text()) == bool(code)
    # 2% more work holds a 10% wall gate (at 99%: a false alarm in under one push in 200)
    assert found[2].returncode == 0, found[2].stdout + found[2].stderr
    assert "`wall > +10%`" in summary.read_text()


@needs_valgrind
@pytest.mark.slow
def test_the_gitlab_ci_recipe_runs(tmp_path):
    job = yaml.safe_load((CI / "gitlab-ci.yml").read_text())["perf-gate"]
    repo, base = _repository(tmp_path, 1_000_000, 1_020_000)
    done = _run_steps("\n".join(job["script"]), repo, {"CI_MERGE_REQUEST_DIFF_BASE_SHA": base})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "instructions:u > +1%" in (repo / "perf-gate.md").read_text()
    assert all((repo / p).exists() for p in job["artifacts"]["paths"])


@needs_valgrind
def test_a_baseline_kept_in_the_store_is_found_by_its_tag(tmp_path):
    program = build(tmp_path, "same", 100_000)
    store = ("--store", tmp_path / "runs.db")
    emulate = ("bench", "--emulate", "-n", "2", "--warmup", "0")
    saved = invoke(*emulate, "--save", "store:", *store, "--tag", "branch=main", "--", program)
    assert saved.returncode == 0 and "stored run" in saved.stdout + saved.stderr, saved.stderr
    gated = ("--baseline", "store:branch=main", *store, "--fail-if", "instructions:u > +0%")
    held = invoke(*emulate, *gated, "--", program)
    assert held.returncode == 0, held.stdout + held.stderr
    missing = invoke(*emulate, "--baseline", "store:branch=dev", *store, "--fail-if", "wall > 1%",
                     "--", program)  # fmt: skip
    assert missing.returncode == 2 and "no stored run tagged branch=dev" in missing.stderr
