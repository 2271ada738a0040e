"""Issue #40: perf's version is asked once per program, not at every profile's start; a changed
perf (another program at the same path) is asked again, and a cache entry never names another."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from autoprof.perf import query


def _fake_perf(folder, version: str) -> None:
    """A perf on PATH that answers `--version` and notes each time it is asked."""
    script = folder / "perf"
    script.write_text(f"#!/bin/sh\necho asked >> {folder}/asked\necho 'perf version {version}'\n")
    script.chmod(0o755)


def _asked(folder) -> int:
    log = folder / "asked"
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def fake_path(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return folder


def test_the_version_is_perfs_own():
    perf = shutil.which("perf")
    if perf is None:
        pytest.skip("perf is not installed")
    asked = subprocess.run([perf, "--version"], capture_output=True, text=True).stdout
    assert query.version() == asked.removeprefix("perf version ").strip()
    assert query.version() == asked.removeprefix("perf version ").strip()  # from the cache


def test_a_cached_version_is_not_asked_again_and_a_new_program_is(fake_path):
    _fake_perf(fake_path, "9.1.0")
    assert query.version() == "9.1.0"
    assert query.version() == "9.1.0"
    assert _asked(fake_path) == 1
    (fake_path / "perf").unlink()
    _fake_perf(fake_path, "9.2.10")  # another program at the same path (another size)
    assert query.version() == "9.2.10"
    assert _asked(fake_path) == 2


def test_a_broken_cache_entry_is_asked_again(fake_path, tmp_path):
    _fake_perf(fake_path, "9.3.0")
    cached = tmp_path / "cache" / "autoprof" / query.VERSION_CACHE
    cached.parent.mkdir(parents=True)
    cached.write_text("{not json")
    assert query.version() == "9.3.0"
    assert "9.3.0" in cached.read_text()


def test_a_cache_entry_others_may_write_is_not_read(fake_path, tmp_path):
    """A record in a file another user could have written is asked again, never believed."""
    _fake_perf(fake_path, "9.4.0")
    assert query.version() == "9.4.0"
    cached = tmp_path / "cache" / "autoprof" / query.VERSION_CACHE
    cached.write_text(cached.read_text().replace("9.4.0", "6.6.6"))
    cached.chmod(0o666)  # writable by anyone: not this user's alone
    assert query.version() == "9.4.0"
    assert _asked(fake_path) == 2
