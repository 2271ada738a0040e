"""`autoprof memory`: the massif parser on real massif output recorded here, and live runs of
the heap example (10 MiB, then 30 MiB, then 20 MiB freed: a 40 MiB peak)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoprof.errors import AutoprofError
from autoprof.examples import build_heap
from autoprof.memory.massif import flatten, parse, site_bytes, top_sites
from autoprof.memory.profile import OTHER, MemoryOptions, summarize, valgrind_argv
from autoprof.testing.cli import invoke

DATA = Path(__file__).parent / "data" / "massif"
MIB = 1024 * 1024


def test_parse_heap_example():
    massif = parse((DATA / "heap.massif.out").read_text())
    assert massif.cmd == "./heap" and massif.time_unit == "i" and not massif.truncated
    assert massif.peak.kind == "peak" and massif.peak.heap == 40 * MIB
    assert [s.index for s in massif.snapshots] == list(range(len(massif.snapshots)))
    assert top_sites(massif) == ["alloc_big (heap.c:25)", "alloc_small (heap.c:18)"]
    assert site_bytes(massif.peak) == {
        "alloc_big (heap.c:25)": 30 * MIB,
        "alloc_small (heap.c:18)": 10 * MIB,
    }
    rows = [(depth, node.bytes) for depth, node in flatten(massif.peak.tree)]
    assert rows == [(0, 40 * MIB), (1, 30 * MIB), (2, 30 * MIB), (1, 10 * MIB), (2, 10 * MIB)]


def test_summary_stacks_add_up_to_the_heap():
    summary = summarize(parse((DATA / "heap.massif.out").read_text()), MemoryOptions())
    assert summary["sites"][-1] == OTHER
    for snap in summary["snapshots"]:
        assert sum(snap["sites"].values()) == snap["heap"]
    assert summary["peak_tree"][1]["percent"] == 75.0


def test_crashed_and_truncated_output_keeps_whole_snapshots():
    crashed = parse((DATA / "heap-crash.massif.out").read_text())
    assert crashed.snapshots[-1].heap == 20 * MIB  # the program died with 20 MiB live
    text = (DATA / "heap.massif.out").read_text()
    cut = text[: text.index(" n1: 31457280")]  # inside the peak snapshot's tree
    truncated = parse(cut)
    assert truncated.truncated
    assert truncated.peak.heap < 40 * MIB  # the peak snapshot was lost; the largest kept
    with pytest.raises(AutoprofError, match="not valgrind massif output"):
        parse("hello\nworld\n")


def test_valgrind_argv():
    argv = valgrind_argv(MemoryOptions(threshold=0.5, pages_as_heap=True), Path("o"), ["./p"])
    assert argv[:2] == ["valgrind", "--tool=massif"]
    assert "--pages-as-heap=yes" in argv and "--threshold=0.5" in argv
    assert argv[-2:] == ["--", "./p"]
    with pytest.raises(AutoprofError, match="nothing to profile"):
        valgrind_argv(MemoryOptions(), Path("o"), [])


@pytest.fixture(scope="module")
def heap(tmp_path_factory) -> Path:
    for tool in ("valgrind", "cc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found (make system-deps installs it)")
    return build_heap(tmp_path_factory.mktemp("heap"))


@pytest.mark.slow
def test_memory_of_the_heap_example(heap: Path, tmp_path: Path):
    out = tmp_path / "mem"
    result = invoke("memory", "-o", str(out), "--", str(heap))
    assert result.returncode == 0, result.output
    profile = json.loads((out / "memory.json").read_text())
    assert profile["status"] == "ok"
    plotted = max(sum(s["sites"].values()) for s in profile["snapshots"] if s["detailed"])
    assert abs(plotted - 40 * MIB) <= 0.02 * 40 * MIB
    assert abs(profile["peak_bytes"] - 40 * MIB) <= 0.02 * 40 * MIB
    assert profile["sites"][0].startswith("alloc_big ")
    assert "alloc_big" in result.output  # the peak table
    for name in ("memory.png", "memory.svg", "massif.out"):
        assert (out / name).stat().st_size > 1000
    assert (out / "memory.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_a_crash_is_one_line_and_the_partial_profile_is_kept(heap: Path, tmp_path: Path):
    out = tmp_path / "mem"
    result = invoke("memory", "-o", str(out), "--", str(heap), "crash")
    assert result.returncode != 0
    assert "crashed under valgrind (signal 11, SIGSEGV)" in result.output
    assert "Traceback" not in result.output
    profile = json.loads((out / "memory.json").read_text())
    assert profile["status"] == "crashed" and profile["peak_bytes"] == 40 * MIB
    assert (out / "massif.out").is_file() and (out / "memory.png").is_file()


@pytest.mark.slow
def test_pages_as_heap_and_a_missing_program(heap: Path, tmp_path: Path):
    pages = invoke("memory", "--pages-as-heap", "-o", str(tmp_path / "p"), "--",
                                str(heap))  # fmt: skip
    assert pages.returncode == 0, pages.output
    profile = json.loads((tmp_path / "p" / "memory.json").read_text())
    assert profile["peak_bytes"] >= 40 * MIB  # pages: the heap's blocks plus code and stacks
    missing = invoke("memory", "-o", str(tmp_path / "m"), "--", "/no/such/prog")
    assert missing.returncode != 0 and "command not found: /no/such/prog" in missing.output


@pytest.mark.slow
def test_a_wrapper_script_is_followed_to_the_program_it_runs(heap: Path, tmp_path: Path):
    """Issue #29: `memory -- python3 ...` where python3 is a script that execs the real one
    (pyenv's shim) failed with valgrind's banner as the reason. The command's process is
    followed through exec; what it started has its own profile under children/."""
    wrapper = tmp_path / "heap-wrapper"
    wrapper.write_text(f'#!/bin/sh\nversion=$(/bin/echo 1)\nexec {heap} "$@"\n')
    wrapper.chmod(0o755)
    out = tmp_path / "mem"
    result = invoke("memory", "-o", str(out), "--", str(wrapper))
    assert result.returncode == 0, result.output
    profile = json.loads((out / "memory.json").read_text())
    assert profile["status"] == "ok" and profile["peak_bytes"] == 40 * MIB
    assert parse((out / "massif.out").read_text()).cmd == str(heap)
    assert [p.name.split(".")[:2] for p in (out / "children").iterdir()] == [["massif", "out"]]
    assert "1 process that" in result.output and "children" in result.output
