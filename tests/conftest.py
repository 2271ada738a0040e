"""Shared test helpers: where the shared perfmon data lives, and skips when it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

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
