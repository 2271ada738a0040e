"""Parsed vendor catalogs (Intel, AMD, Arm64), cached: Intel's perfmon JSON for one CPU takes
tens of milliseconds to parse on every `schedule`, `profile` or worker job; a pickle of the
result loads in a few.

An entry is keyed by everything the parse depends on: the CPU and options asked for, the size and
modification time of every file under the events directory, and the source files of
`autoprof.catalog` with autoprof's version (so a changed parser never reads an old entry). The
entries live in ``$XDG_CACHE_HOME/autoprof/catalogs/`` (default ``~/.cache``), the newest `KEEP`
of them, each written atomically. Any problem reading or writing one only means parsing as if
there were no cache; errors in the catalog itself are raised by the parse, never cached.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from dataclasses import asdict
from pathlib import Path

from autoprof import __version__
from autoprof.catalog import amd, arm, intel, vendor
from autoprof.catalog.model import Catalog, ReadOptions
from autoprof.util import xdg

_SOURCES = Path(__file__).parent
_FORMAT = 1  # bump when the entry's layout changes
KEEP = 16  # entries kept (about 0.5 MB each for a large CPU); older ones are deleted
LOADERS = {vendor.INTEL: intel.load, vendor.AMD: amd.load, vendor.ARM64: arm.load}


def cache_dir() -> Path:
    return xdg.cache_dir() / "catalogs"


def _stats(root: Path) -> list[tuple[str, int, int]]:
    """(relative path, size, mtime in ns) of every file under `root`, in a stable order."""
    found = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            stat = path.stat()
            found.append((str(path.relative_to(root)), stat.st_size, stat.st_mtime_ns))
    return sorted(found)


def key(events_dir: Path, cpu: str, options: ReadOptions) -> str:
    """The entry's name: a digest of everything the parsed catalog depends on."""
    parts = [
        _FORMAT,
        __version__,
        str(events_dir),
        str(events_dir.resolve()),
        cpu,
        sorted(asdict(options).items()),
        _stats(events_dir),
        [s for s in _stats(_SOURCES) if s[0].endswith(".py")],
    ]
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def load(
    events_dir: str | Path, cpu: str, options: ReadOptions | None = None, kind: str | None = None
) -> Catalog:
    """The `kind` vendor's reader (default: the directory's layout) on `events_dir`, from the
    cache when an entry matches."""
    events_dir, options = Path(events_dir), options or ReadOptions()
    parse = LOADERS[kind or vendor.layout(events_dir)]
    try:
        path = cache_dir() / f"{key(events_dir, cpu, options)}.pickle"
    except OSError:  # a directory that cannot be walked: the parse says what is wrong with it
        return parse(events_dir, cpu, options)
    cached = _read(path)
    if cached is not None:
        return cached
    catalog = parse(events_dir, cpu, options)
    _store(path, catalog)
    return catalog


def _read(path: Path) -> Catalog | None:
    try:
        with path.open("rb") as file:
            cached = pickle.load(file)
    except Exception:  # missing, truncated, unreadable, from another autoprof: parse instead
        return None
    return cached if isinstance(cached, Catalog) else None


def _store(path: Path, catalog: Catalog) -> None:
    """Write the entry atomically, keeping the newest KEEP entries; a cache that cannot be
    written is no error."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(pickle.dumps(catalog, protocol=pickle.HIGHEST_PROTOCOL))
        tmp.replace(path)
        entries = sorted(path.parent.glob("*.pickle"), key=lambda p: p.stat().st_mtime_ns)
        for old in entries[:-KEEP]:
            old.unlink(missing_ok=True)
    except OSError:
        tmp.unlink(missing_ok=True)
