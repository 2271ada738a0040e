"""perf alone, before anything that needs exact breakpoint counts: where perf itself miscounts
the example (some VMs lose hardware breakpoint hits), `autoprof demo` says so in one line and
exits non-zero at once, and the exact-count tests skip with that reason (conftest `writes`).

A machine that loses hits cannot be summoned here, so a stand-in `perf` on PATH plays one: it
writes perf 6.1's CSV (`value,unit,event,run time,percent,,`) with one hit in ten lost."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from autoprof.examples import build_writes, expected_writes
from autoprof.perf.selfcheck import breakpoint_miscount

LOSSY_PERF = r"""#!/usr/bin/env python3
import subprocess, sys
args = sys.argv[1:]
out = args[args.index("-o") + 1]
events = [args[i + 1] for i, a in enumerate(args) if a == "-e"]
command = args[args.index("--") + 1:]
n = int(command[-1])
subprocess.run(command, check=True)
with open(out, "w") as fh:
    for slot, event in enumerate(events):
        fh.write(f"{n * (slot + 1) * 9 // 10},,{event},1000,100.00,,\n")
"""


@pytest.fixture
def lossy_perf(tmp_path, monkeypatch) -> Path:
    if shutil.which("cc") is None:
        pytest.skip("needs cc to build the example")
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    perf = bindir / "perf"
    perf.write_text(LOSSY_PERF)
    perf.chmod(perf.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}:{Path('/usr/bin')}:{Path('/bin')}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return perf


def test_a_perf_that_loses_hits_is_named(lossy_perf, tmp_path):
    binary = build_writes(tmp_path / "bin")
    why = breakpoint_miscount(binary, writes=1000)
    assert why is not None and why.startswith("perf alone miscounts hardware breakpoints")
    first = expected_writes(1000)[0]
    assert f" {first * 9 // 10} of {first}" in why


def test_demo_refuses_in_one_line_where_perf_alone_miscounts(lossy_perf, tmp_path, cli_run):
    result = cli_run("demo", "-o", tmp_path / "out", "--writes", "1000")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autoprof: error: perf alone miscounts")
    assert "the demo's exact counts cannot hold here" in lines[0]
    assert not (tmp_path / "out").exists()  # no run was started
