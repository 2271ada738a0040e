"""Parsed vendor catalogs (Intel, AMD, Arm64), cached: Intel's perfmon JSON for one CPU takes
tens of milliseconds to parse on every `schedule`, `profile` or worker job; the cached entry
loads in a few.

An entry is keyed by everything the parse depends on: the CPU and options asked for, the size and
modification time of every file under the events directory, and the source files of
`autoprof.catalog` with autoprof's version (so a changed parser never reads an old entry). The
entries live in ``$XDG_CACHE_HOME/autoprof/catalogs/`` (default ``~/.cache``), the `KEEP` used
most recently, each written atomically. Any problem reading or writing one only means parsing as if
there were no cache; errors in the catalog itself are raised by the parse, never cached.

Entries are plain JSON, never pickles: reading one runs no code, wherever the folder is. Each
record is a list of its dataclass's fields in declaration order; an Event is restored as pickle
would restore it (its fields set, `spec` as the parse computed it), which keeps a warm load
about as fast as a pickle's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from autoprof import __version__
from autoprof.catalog import vendor
from autoprof.catalog import yaml as yaml_catalog
from autoprof.catalog.model import Catalog, Event, Exclusion, Pmu, ReadOptions
from autoprof.errors import AutoprofError
from autoprof.util import xdg
from autoprof.util.owned import own_folder, trusted
from autoprof.util.records import write_json

_SOURCES = Path(__file__).parent
_FORMAT = 2  # bump when the entry's layout changes (2: JSON, was a pickle)
# entries kept (1 MB for the largest CPU, 128 KiB on average); the least recently used go. At
# 16, then 64, planning for more CPUs and options than that parsed again and again: a sweep over
# every model of a vendor (the tests' sweeps: ~270 entries) evicted each entry before its reuse
KEEP = 512
# each vendor's reader, by module: imported only to parse (a warm load needs none of them, and
# importing all three cost ~10 ms of every start)
READERS = {vendor.INTEL: "intel", vendor.AMD: "amd", vendor.ARM64: "arm"}
SUFFIX = ".json"
_EVENT_FIELDS = tuple(f.name for f in dataclasses.fields(Event))
# the Event fields JSON cannot hold as they are: a list read back as the field's type
_EVENT_TYPES: dict[str, Callable[[Any], Any]] = {
    "counters": frozenset,
    "registers": frozenset,
    "terms": lambda v: tuple(map(tuple, v)),
}


def cache_dir() -> Path:
    return xdg.cache_dir() / "catalogs"


def _stats(root: Path) -> list[tuple[str, int, int]]:
    """(relative path, size, mtime in ns) of every file under `root`, in a stable order (links
    to files followed, links to folders not entered, as os.walk does; os.scandir's entries, not
    a Path a file: this runs at every start)."""
    found = []

    def walk(folder: str, prefix: str) -> None:
        with os.scandir(folder) as entries:
            for entry in entries:
                if not entry.is_dir():
                    info = entry.stat()
                    found.append((prefix + entry.name, info.st_size, info.st_mtime_ns))
                elif not entry.is_symlink():
                    walk(entry.path, f"{prefix}{entry.name}/")

    walk(str(root), "")
    return sorted(found)


@functools.cache
def _source_stats() -> list[tuple[str, int, int]]:
    """The parsers' sources (`_SOURCES`), looked at once a process: the parsers it runs are
    the ones it imported."""
    return [s for s in _stats(_SOURCES) if s[0].endswith(".py")]


def key(events_dir: Path, cpu: str, options: ReadOptions) -> str:
    """The entry's name: a digest of everything the parsed catalog depends on."""
    parts = [
        str(events_dir),
        str(events_dir.resolve()),
        cpu,
        sorted(asdict(options).items()),
        _stats(events_dir),
    ]
    return _digest(parts)


def _digest(parts: list[Any]) -> str:
    """`parts`, with the entries' layout, autoprof's version and its parsers' sources."""
    parts = [_FORMAT, __version__, *parts, _source_stats()]
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def reader(kind: str) -> Callable[[Path, str, ReadOptions], Catalog]:
    """The `load` of vendor `kind`'s reader (`catalog.intel`, `amd`, `arm`)."""
    return importlib.import_module(f"autoprof.catalog.{READERS[kind]}").load


def load(
    events_dir: str | Path, cpu: str, options: ReadOptions | None = None, kind: str | None = None
) -> Catalog:
    """The `kind` vendor's reader (default: the directory's layout) on `events_dir`, from the
    cache when an entry matches."""
    events_dir, options = Path(events_dir), options or ReadOptions()
    kind = kind or vendor.layout(events_dir)
    try:
        path = cache_dir() / f"{key(events_dir, cpu, options)}{SUFFIX}"
    except OSError:  # a directory that cannot be walked: the parse says what is wrong with it
        return reader(kind)(events_dir, cpu, options)
    cached = _read(path)
    if cached is not None:
        return cached  # no reader imported
    catalog = reader(kind)(events_dir, cpu, options)
    _store(path, catalog)
    return catalog


def load_yaml(path: Path, cpu: str = "") -> Catalog:
    """One of autoprof's YAML catalogs (`catalog.yaml`: `software`), from the cache when an
    entry matches: its parse is quick, but importing PyYAML for it cost ~13 ms of every
    profile's start."""
    try:
        info = path.stat()
        entry = _digest(["yaml", str(path.resolve()), info.st_size, info.st_mtime_ns, cpu])
        cached_path = cache_dir() / f"{entry}{SUFFIX}"
    except OSError:  # missing or unreadable: the parse says so
        return yaml_catalog.load_file(path, cpu)
    cached = _read(cached_path)
    if cached is not None:
        return cached
    catalog = yaml_catalog.load_file(path, cpu)
    _store(cached_path, catalog)
    return catalog


def _plain(value: Any) -> Any:
    """A field's value as JSON holds it (sets sorted, tuples as lists)."""
    if isinstance(value, frozenset):
        return sorted(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def to_json(catalog: Catalog) -> dict[str, Any]:
    """The entry's data: every record as the list of its fields' values."""
    return {
        "format": _FORMAT,
        "cpu": catalog.cpu,
        "source": catalog.source,
        "note": catalog.note,
        "pmus": [dataclasses.astuple(p) for p in catalog.pmus.values()],
        "events": [[_plain(getattr(e, f)) for f in _EVENT_FIELDS] for e in catalog.events],
        "excluded": [dataclasses.astuple(x) for x in catalog.excluded],
    }


def from_json(data: dict[str, Any]) -> Catalog:
    """The catalog `to_json` wrote (TypeError, KeyError, ValueError when it is not one)."""
    if data["format"] != _FORMAT:
        raise ValueError(f"cache entry format {data['format']!r}")
    typed = [(i, _EVENT_TYPES[f]) for i, f in enumerate(_EVENT_FIELDS) if f in _EVENT_TYPES]
    events = []
    for values in data["events"]:
        if len(values) != len(_EVENT_FIELDS):
            raise ValueError("an event of another layout")
        for i, kind in typed:
            values[i] = kind(values[i])
        event = object.__new__(Event)  # as pickle restores it: the parse's own spec, unchanged
        event.__dict__.update(zip(_EVENT_FIELDS, values, strict=True))
        events.append(event)
    pmus = [Pmu(*values) for values in data["pmus"]]
    excluded = [Exclusion(*values) for values in data["excluded"]]
    return Catalog(
        data["cpu"], {p.name: p for p in pmus}, events, excluded, data["source"], data["note"]
    )


def _read(path: Path) -> Catalog | None:
    """The entry at `path`, believed only when it and its folders are this user's alone
    (`owned.trusted`): a catalog decides what perf is asked to count, and one planted by
    another user would be taken for the machine's (root profiles on shared machines)."""
    if not trusted(path, xdg.cache_dir()):
        return None
    try:
        catalog = from_json(json.loads(path.read_bytes()))
    except Exception:  # missing, truncated, unreadable, from another autoprof: parse instead
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # used now: the pruning in `_store` keeps it over entries used before
    return catalog


def _store(path: Path, catalog: Catalog) -> None:
    """Write the entry atomically, keeping the KEEP entries used most recently (read or
    written); a cache that cannot be written is no error."""
    try:
        own_folder(path.parent)  # made 0o755 whatever the umask: `_read` believes no other
        write_json(path, to_json(catalog), compact=True, mode=0o644)
        entries = sorted(path.parent.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime_ns)
        for old in [*entries[:-KEEP], *path.parent.glob("*.pickle")]:  # pickles: format 1
            old.unlink(missing_ok=True)
    except (OSError, AutoprofError):
        pass
