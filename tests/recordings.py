"""A live `autoprof record` of the hotspots example, shared by the report, callgraph and store
tests (import the fixture: `from tests.recordings import hotspots_recording`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autoprof.examples import build_hotspots
from autoprof.testing.cli import invoke

EVENTS = ("cpu-clock", "page-faults")


@pytest.fixture(scope="session")
def hotspots_recording(tmp_path_factory) -> Path:
    """`autoprof record -F 999 -e cpu-clock -e page-faults` of hotspots (heavy 3 : medium 2 :
    touch 1, and touch maps fresh pages)."""
    for tool in ("perf", "cc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found")
    tmp = tmp_path_factory.mktemp("hotspots")
    binary = build_hotspots(tmp)
    out = tmp / "rec"
    args = ["record", "-F", "999", "-o", str(out)]
    for event in EVENTS:
        args += ["-e", event]
    result = invoke(*args, "--", str(binary), "30")
    if result.returncode != 0:
        pytest.skip(f"perf record failed here: {result.output.strip()[-300:]}")
    return out
