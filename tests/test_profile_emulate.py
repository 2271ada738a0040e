"""`profile --emulate`: a profile counted by an emulator on this PMU-less VM. Its counts are the
same on every run of a deterministic program, its events carry the hardware events' names and
the emulator as their PMU (results.csv, the store), aggregate, analyze and the gates read them
as any count, and the emulation's slowdown is measured and said."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from autoprof.emulate import cachegrind
from autoprof.errors import AutoprofError
from autoprof.queue.spec import JobSpec, Refused
from autoprof.run import outdir, planning
from autoprof.testing.cli import CliResult, invoke
from autoprof.web.form import JobRequest

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

# a deterministic loop: N iterations, a store, a load and a branch each
PROGRAM = r"""
#include <stdlib.h>
int main(int argc, char **argv) {
    static volatile int a[4096];
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++) a[i & 4095] += a[(i * 7) & 4095];
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("emulated")
    source, binary = folder / "loop.c", folder / "loop"
    source.write_text(PROGRAM)
    subprocess.run(["cc", "-O1", "-o", binary, source], check=True)
    return binary


def rows(out: Path) -> list[dict[str, str]]:
    with (out / outdir.RESULTS).open() as fh:
        return list(csv.DictReader(fh))


def profiled(out: Path, *args: str | Path) -> CliResult:
    proc = invoke("profile", "--emulate", "-o", out, *args)
    assert proc.returncode == 0, proc.stderr
    aggregated = invoke("aggregate", out)
    assert aggregated.returncode == 0, aggregated.stderr
    return proc


@needs_valgrind
def test_an_emulated_profile_counts_the_same_on_every_run(tmp_path, program):
    first, second = tmp_path / "first", tmp_path / "second"
    said = profiled(first, "--repeat", "3", "--", program, "100000")
    profiled(second, "--repeat", "2", "--", program, "100000")
    found = rows(first)
    # every event cachegrind counts (none named), by the hardware events' names, emulated
    assert [r["EVENT_NAME"] for r in found[: len(cachegrind.COUNTERS)]] == list(cachegrind.COUNTERS)
    assert {r["PMU"] for r in found} == {"cachegrind"}
    assert {(r["STATUS"], r["PERCENT_RUNNING"], r["INDEX"], r["TIME"]) for r in found} == {
        ("ok", "100", "0", "")
    }
    counts: dict[str, set[float]] = {}
    for row in found + rows(second):
        counts.setdefault(row["EVENT_NAME"], set()).add(float(row["SAMPLE_VALUE"]))
    assert all(len(values) == 1 for values in counts.values()), counts  # identical, 5 runs
    (instructions,) = counts["instructions:u"]
    (loads,) = counts["L1-dcache-loads:u"]
    (stores,) = counts["L1-dcache-stores:u"]
    (branches,) = counts["branches:u"]
    assert instructions > 100_000 * 5 and loads > 100_000 * 2 and stores > 100_000
    assert branches > 100_000
    manifest = json.loads((first / outdir.MANIFEST).read_text())
    assert manifest["options"]["emulate"] is True and manifest["options"]["interval_ms"] is None
    kept = outdir.read_emulated(outdir.run_dir(first, 1, 1))
    assert kept.engine == "cachegrind" and kept.slowdown is not None and kept.slowdown > 1
    assert "counted under cachegrind (emulated counts" in said.stderr
    assert "x slower than natively" in said.stderr


@needs_valgrind
def test_emulated_profiles_gate_exactly_and_store_as_any_run(tmp_path, program):
    base, more = tmp_path / "base", tmp_path / "more"
    profiled(base, "-e", "instructions:u", "--repeat", "2", "--", program, "100000")
    profiled(more, "-e", "instructions:u", "--repeat", "2", "--", program, "110000")
    summary = tmp_path / "gates.json"
    gated = invoke("analyze", "compare", base, more, "--fail-if", "instructions:u > +5%",
                   "--summary-json", summary)  # fmt: skip
    assert gated.returncode == 1, gated.stderr
    (verdict,) = json.loads(summary.read_text())["gates"]
    assert verdict["exact"] and verdict["emulated"] and 0.05 < verdict["change"] < 0.11
    held = invoke("analyze", "compare", base, base, "--fail-if", "instructions:u > +0%")
    assert held.returncode == 0, held.stderr
    store = tmp_path / "store.db"
    stored = invoke("upload", "--store", store, base)
    assert stored.returncode == 0, stored.stderr
    run_id = json.loads((base / outdir.MANIFEST).read_text())["id"]
    exported = invoke("runs", "export", "--store", store, run_id, "-o", tmp_path / "back.csv")
    assert exported.returncode == 0, exported.stderr
    back = list(csv.DictReader((tmp_path / "back.csv").open()))
    assert {(r["EVENT_NAME"], r["PMU"]) for r in back} == {("instructions:u", "cachegrind")}
    assert [r["SAMPLE_VALUE"] for r in back] == [r["SAMPLE_VALUE"] for r in rows(base)]


@needs_valgrind
def test_what_an_emulated_profile_refuses(tmp_path, program):
    for args, said in (
        (("-e", "cycles"), "cannot count cycles"),
        (("-a",), "not with -a"),
        (("--per-thread",), "not with --per-thread"),
        (("--region", "all"), "not with --region"),
        (("--metrics", "all"), "not with --metrics"),
    ):
        proc = invoke("profile", "--emulate", "-o", tmp_path / "out", *args, "--", program, "1")
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith("autoprof: error: ") and said in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1
    dry = invoke("profile", "--emulate", "--dry-run", "-o", tmp_path / "d", "--", program, "1")
    assert dry.returncode == 0 and dry.stdout.startswith("valgrind --tool=cachegrind")
    assert not (tmp_path / "d").exists()


@needs_qemu_arm
def test_an_emulated_profile_counts_the_pmu_lanes_loop_exactly(tmp_path):
    """The PMU lane's loop (5 N + 5 digits(N) + 15 user-mode instructions, which the lane's bare
    perf counts exactly on its Arm PMU) profiled under QEMU user mode on this x86-64 VM."""
    obj, loop = tmp_path / "loop.o", tmp_path / "loop"
    subprocess.run(["aarch64-linux-gnu-as", "-o", obj, LOOP_S], check=True)
    subprocess.run(["aarch64-linux-gnu-ld", "-static", "-o", loop, obj], check=True)
    out = tmp_path / "out"
    profiled(out, "--repeat", "2", "--", loop, "100000")
    found = [(r["EVENT_NAME"], r["PMU"], r["SAMPLE_VALUE"]) for r in rows(out)]
    assert found == [("instructions:u", "qemu", str(5 * 100_000 + 5 * 6 + 15))] * 2


@needs_valgrind
def test_the_queue_and_the_web_form_carry_emulate(program):
    """--emulate is a ProfileOptions field a job spec carries (`submit --emulate`) and the new
    measurement form sets; the worker plans the emulator's events as `profile` does."""
    form = JobRequest.from_form(
        {"tool": "profile", "command": [str(program), "10"], "emulate": "on"}
    )
    request = replace(form.measurement(), profile_id=str(uuid.uuid4()))
    spec = JobSpec.from_json(json.loads(json.dumps(JobSpec.of(request).to_json())))
    assert spec.options["emulate"] is True
    planned = planning.plan(spec.request())
    assert [e.name for e in planned.catalog.events] == list(cachegrind.COUNTERS)
    assert {e.pmu for e in planned.catalog.events} == {"cachegrind"}
    assert len(planned.plan.runs) == 1
    with pytest.raises(AutoprofError, match="choose the profile tool"):
        JobRequest.from_form({"tool": "stat", "command": "true", "emulate": True})
    with pytest.raises(Refused, match="not with --per-thread"):
        JobSpec.from_json(spec.to_json() | {"options": spec.options | {"per_thread": True}})
