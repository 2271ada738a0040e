"""Shared test helpers: where the shared perfmon data lives, and skips when it is absent."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from autoprof.examples import build_writes, slot_addresses

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
INTEL_DIR = SHARED / "events" / "intel"
SAMPLES = SHARED / "samples"


@pytest.fixture
def intel_dir() -> Path:
    """The Intel perfmon catalog directory; skips the test when this checkout has none beside it."""
    if not (INTEL_DIR / "mapfile.csv").is_file():
        pytest.skip(f"Intel perfmon data not found at {INTEL_DIR} (a fresh clone has no ../shared)")
    return INTEL_DIR


@pytest.fixture
def samples_dir() -> Path:
    """The shared samples directory; skips when absent."""
    if not SAMPLES.is_dir():
        pytest.skip(f"shared samples not found at {SAMPLES} (a fresh clone has no ../shared)")
    return SAMPLES


@pytest.fixture(scope="session")
def writes(tmp_path_factory) -> Path:
    """The example workload, built once; skips where perf, cc or hardware breakpoints are
    missing (its slots' writes are then counted exactly by `mem:ADDR:w` events)."""
    if shutil.which("perf") is None or shutil.which("cc") is None:
        pytest.skip("needs perf and cc (make system-deps installs them)")
    binary = build_writes(tmp_path_factory.mktemp("bin"))
    probe = subprocess.run(
        ["perf", "stat", "-x,", "-e", f"mem:{slot_addresses(binary)[0]}:w", str(binary), "1"],
        capture_output=True,
        text=True,
    )
    if "<not supported>" in probe.stderr or probe.returncode != 0:
        pytest.skip(f"hardware breakpoints unavailable here: {probe.stderr.strip()[:200]}")
    return binary
