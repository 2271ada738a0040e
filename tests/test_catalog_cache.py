"""The parsed-catalog cache: a hit is the very catalog a parse gives, and anything the parse
depends on (a file of the events directory, the options) makes a new entry."""

from __future__ import annotations

import os
import shutil

import pytest

from autoprof.catalog import cache, intel
from autoprof.errors import AutoprofError


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "autoprof" / "catalogs"


@pytest.fixture
def skx_dir(intel_dir, tmp_path):
    """A copy of the Skylake-X files only (mapfile.csv names the rest, which SKX never reads)."""
    copy = tmp_path / "intel"
    copy.mkdir()
    shutil.copy2(intel_dir / "mapfile.csv", copy / "mapfile.csv")
    shutil.copytree(intel_dir / "SKX", copy / "SKX")
    return copy


def test_a_hit_is_the_parsed_catalog(skx_dir, own_cache):
    parsed = intel.load(skx_dir, "SKX")
    first = cache.load(skx_dir, "SKX")
    [entry] = own_cache.iterdir()
    second = cache.load(skx_dir, "SKX")
    assert first == parsed and second == parsed and second is not first
    assert list(own_cache.iterdir()) == [entry]  # read, not written again
    smt_off = cache.load(skx_dir, "SKX", intel.IntelOptions(smt=False))
    assert smt_off == intel.load(skx_dir, "SKX", intel.IntelOptions(smt=False))
    assert len(list(own_cache.iterdir())) == 2


def test_a_changed_file_is_parsed_again(skx_dir, own_cache):
    cache.load(skx_dir, "SKX")
    core = next((skx_dir / "SKX" / "events").glob("skylakex_core*.json"))
    text = core.read_text()
    assert '"EventName": "INST_RETIRED.ANY"' in text
    core.write_text(text.replace('"EventName": "INST_RETIRED.ANY"', '"EventName": "RENAMED"'))
    names = {e.name for e in cache.load(skx_dir, "SKX").events}
    assert "RENAMED" in names and "INST_RETIRED.ANY" not in names
    core.write_text("{broken")
    os.utime(core, ns=(1, 1))
    with pytest.raises(AutoprofError, match=core.name):  # errors are raised, never cached
        cache.load(skx_dir, "SKX")


def test_a_broken_entry_is_parsed_again(skx_dir, own_cache):
    parsed = cache.load(skx_dir, "SKX")
    [entry] = own_cache.iterdir()
    entry.write_bytes(b"not a pickle")
    assert cache.load(skx_dir, "SKX") == parsed
    assert entry.read_bytes() != b"not a pickle"  # rewritten whole


def test_only_the_newest_entries_are_kept(skx_dir, own_cache, monkeypatch):
    monkeypatch.setattr(cache, "KEEP", 2)
    for reserve in range(4):
        cache.load(skx_dir, "SKX", intel.IntelOptions(reserve=reserve))
    assert len(list(own_cache.iterdir())) == 2
    newest = max(own_cache.iterdir(), key=lambda p: p.stat().st_mtime_ns)
    assert newest.name == cache.key(skx_dir, "SKX", intel.IntelOptions(reserve=3)) + ".pickle"
