"""The parsed-catalog cache: a hit is the very catalog a parse gives, and anything the parse
depends on (a file of the events directory, the options) makes a new entry."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from autoprof.catalog import cache, intel, yaml
from autoprof.errors import AutoprofError
from autoprof.util import xdg
from autoprof.util.owned import trusted


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "autoprof" / "catalogs"


def _model_copy(intel_dir, tmp_path, model: str):
    """A copy of one model's files only (mapfile.csv names the rest, which it never reads)."""
    copy = tmp_path / "intel"
    copy.mkdir()
    shutil.copy2(intel_dir / "mapfile.csv", copy / "mapfile.csv")
    shutil.copytree(intel_dir / model, copy / model)
    return copy


@pytest.fixture
def skx_dir(intel_dir, tmp_path):
    """Skylake-X: core, uncore and offcore events, every field a cache entry must hold."""
    return _model_copy(intel_dir, tmp_path, "SKX")


@pytest.fixture
def glm_dir(intel_dir, tmp_path):
    """Goldmont, for the tests of what makes and prunes an entry rather than of what it holds:
    a parse of its 169 core events takes ~10 ms, SKX's ~0.2 s (uncore), and these tests parse
    again and again."""
    return _model_copy(intel_dir, tmp_path, "GLM")


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


def test_a_changed_file_is_parsed_again(glm_dir, own_cache):
    cache.load(glm_dir, "GLM")
    core = next((glm_dir / "GLM" / "events").glob("goldmont_core*.json"))
    text = core.read_text()
    assert '"EventName": "INST_RETIRED.ANY"' in text
    core.write_text(text.replace('"EventName": "INST_RETIRED.ANY"', '"EventName": "RENAMED"'))
    names = {e.name for e in cache.load(glm_dir, "GLM").events}
    assert "RENAMED" in names and "INST_RETIRED.ANY" not in names
    core.write_text("{broken")
    os.utime(core, ns=(1, 1))
    with pytest.raises(AutoprofError, match=core.name):  # errors are raised, never cached
        cache.load(glm_dir, "GLM")


def test_a_broken_entry_is_parsed_again(glm_dir, own_cache):
    parsed = cache.load(glm_dir, "GLM")
    [entry] = own_cache.iterdir()
    entry.write_bytes(b"not JSON")
    assert cache.load(glm_dir, "GLM") == parsed
    assert entry.read_bytes() != b"not JSON"  # rewritten whole


@pytest.mark.parametrize("writable", ["entry", "folder"])
def test_an_entry_others_may_write_is_not_read(glm_dir, own_cache, writable):
    """An entry in a file or folder another user could write is parsed again, never believed
    (a planted entry would choose the events perf is asked for)."""
    parsed = cache.load(glm_dir, "GLM")
    [entry] = own_cache.iterdir()
    entry.write_text(entry.read_text().replace('"INST_RETIRED.ANY"', '"PLANTED"'))
    assert "PLANTED" in {e.name for e in cache.load(glm_dir, "GLM").events}  # this user's: read
    (entry if writable == "entry" else own_cache).chmod(0o666 if writable == "entry" else 0o777)
    assert cache.load(glm_dir, "GLM") == parsed


def test_an_entry_is_this_users_alone_whatever_the_umask(glm_dir, own_cache):
    """A umask that lets the group write (002) would leave entries no later load believes."""
    old = os.umask(0o002)
    try:
        cache.load(glm_dir, "GLM")
    finally:
        os.umask(old)
    [entry] = own_cache.iterdir()
    assert trusted(entry, xdg.cache_dir())  # so the next load reads it


def test_only_the_newest_entries_are_kept(glm_dir, own_cache, monkeypatch):
    monkeypatch.setattr(cache, "KEEP", 2)
    for reserve in range(4):
        cache.load(glm_dir, "GLM", intel.IntelOptions(reserve=reserve))
    assert len(list(own_cache.iterdir())) == 2
    newest = max(own_cache.iterdir(), key=lambda p: p.stat().st_mtime_ns)
    assert newest.name == cache.key(glm_dir, "GLM", intel.IntelOptions(reserve=3)) + ".json"


def test_an_entry_read_is_kept_over_newer_ones_written(skx_dir, own_cache, monkeypatch):
    """Pruning goes by last use: an entry read often outlives entries written once since (it
    was pruned as the oldest written, then parsed and written again: a new file). SKX: its
    reads and parses take long enough that no read shares a coarse file time with the write
    before it, which would leave the pruning's order to chance."""
    monkeypatch.setattr(cache, "KEEP", 2)
    used = own_cache / (cache.key(skx_dir, "SKX", intel.IntelOptions(reserve=0)) + ".json")
    cache.load(skx_dir, "SKX", intel.IntelOptions(reserve=0))
    with used.open("rb") as first:  # held open: its inode is not reused for another file
        for reserve in range(1, 4):
            cache.load(skx_dir, "SKX", intel.IntelOptions(reserve=reserve))
            cache.load(skx_dir, "SKX", intel.IntelOptions(reserve=0))  # read: in use
        assert os.fstat(first.fileno()).st_nlink == 1  # never pruned, never written again
    last = cache.key(skx_dir, "SKX", intel.IntelOptions(reserve=3)) + ".json"
    assert sorted(p.name for p in own_cache.iterdir()) == sorted([used.name, last])


class _Planted:
    """What a planted pickle runs when loaded: it writes a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_an_entry_runs_no_code_wherever_the_cache_is(skx_dir, own_cache, tmp_path):
    """Issue #29, security item 2: the cache folder follows XDG_CACHE_HOME and HOME, and a
    pickle planted there ran code as soon as autoprof read the entry. Entries are JSON now."""
    import pickle

    marker = tmp_path / "code-ran"
    own_cache.mkdir(parents=True)
    name = cache.key(skx_dir, "SKX", intel.IntelOptions())
    for suffix in (".pickle", ".json"):  # the names of format 1 and of today's entries
        (own_cache / f"{name}{suffix}").write_bytes(pickle.dumps(_Planted(marker)))
    assert cache.load(skx_dir, "SKX") == intel.load(skx_dir, "SKX")
    assert not marker.exists()
    assert [p.suffix for p in own_cache.iterdir()] == [".json"]  # rewritten; the pickle gone


@pytest.mark.parametrize(("kind", "cpu"), [("amd", "zen4"), ("arm64", "0x00000000410fd0c0")])
def test_every_vendors_catalog_reads_back_as_parsed(own_cache, kind, cpu):
    from autoprof.catalog import embedded

    directory = embedded.directory(kind)
    parsed = cache.reader(kind)(directory, cpu)
    cache.load(directory, cpu, kind=kind)
    assert cache.load(directory, cpu, kind=kind) == parsed
    assert [e.spec for e in cache.load(directory, cpu, kind=kind).events] == [
        e.spec for e in parsed.events
    ]


def test_a_yaml_catalog_is_cached_and_parsed_again_when_changed(own_cache, tmp_path):
    """autoprof's software events come from the cache: a profile's start imports no PyYAML
    (~13 ms); an edited file is parsed again, and a broken one is an error, never cached."""
    parsed = yaml.load_builtin("software", "SKX")
    assert cache.load_yaml(yaml.BUILTIN_DIR / "software.yaml", "SKX") == parsed
    [entry] = own_cache.iterdir()
    assert cache.load_yaml(yaml.BUILTIN_DIR / "software.yaml", "SKX") == parsed
    assert list(own_cache.iterdir()) == [entry]
    mine = tmp_path / "mine.yaml"
    mine.write_text("pmu: {name: software}\nevents:\n  - {name: task-clock}\n")
    assert [e.name for e in cache.load_yaml(mine).events] == ["task-clock"]
    mine.write_text("pmu: {name: software}\nevents:\n  - {name: page-faults}\n")
    assert [e.name for e in cache.load_yaml(mine).events] == ["page-faults"]
    mine.write_text("pmu: [")
    with pytest.raises(AutoprofError, match="malformed YAML catalog"):
        cache.load_yaml(mine)
    code = (
        "import sys\nfrom autoprof.catalog import host\nhost.host_catalog()\n"
        "print('yaml' in sys.modules)"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for imported in ("True", "False"):  # parsed (and cached) by the first start only
        run = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
        )
        assert run.stdout.split() == [imported], run.stderr


def test_a_warm_load_imports_no_vendor_reader(glm_dir, tmp_path):
    """A cache hit needs no parser: the vendors' readers load only to parse (~10 ms of a start
    when all three were imported, one of them even on a hit)."""
    code = (
        "import sys\nfrom autoprof.catalog import cache\n"
        f"cache.load({str(glm_dir)!r}, 'GenuineIntel-6-5C')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[-1] in ('intel', 'amd', 'arm')))"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    found = []
    for _ in range(2):  # parsed (and cached) by the first start only
        run = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
        )
        assert run.returncode == 0, run.stderr
        found.append(run.stdout.strip())
    assert found == ["['autoprof.catalog.intel']", "[]"]
