"""The vendor event data shipped inside autoprof, so that a machine needs nothing placed by hand.

Each vendor's data set lives in its own folder of the package (`autoprof/events/<vendor>/`: one
compressed archive holding the data with its LICENSE and SOURCE, and a README) and is read as
the readers expect it, a directory laid out as the vendor's own (`mapfile.csv` + platform
folders, LICENSE, SOURCE). The archive is extracted once
into the user's cache, in a folder named by the archive's digest: a new autoprof with new data
extracts again, and an old folder is never half-written (`unpack`). Deleting the cache is always
safe.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from autoprof.errors import AutoprofError
from autoprof.util import xdg

DATA = Path(__file__).resolve().parents[1] / "events"
ARCHIVE = "perfmon.tar.xz"
MAPFILE = "mapfile.csv"


def archive(vendor: str) -> Path:
    return DATA / vendor / ARCHIVE


def directory(vendor: str, cache: Path | None = None) -> Path | None:
    """The extracted data of `vendor` ("intel", "amd", "arm64"), extracting it on first use;
    None when this autoprof ships none for that vendor."""
    source = archive(vendor)
    if not source.is_file():
        return None
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    root = (cache or xdg.cache_dir() / "events") / f"{vendor}-{digest}"
    if (root / MAPFILE).is_file():
        return root
    from autoprof.catalog import unpack  # tarfile's import: only the first time (~3 ms)

    unpack.extract_once(source, root)
    if not (root / MAPFILE).is_file():
        raise AutoprofError(f"autoprof's {vendor} event data at {root} has no {MAPFILE}")
    return root
