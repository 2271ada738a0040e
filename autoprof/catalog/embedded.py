"""The vendor event data shipped inside autoprof, so that a machine needs nothing placed by hand.

Each vendor's data set lives in its own folder of the package (`autoprof/events/<vendor>/`: one
compressed archive holding the data with its LICENSE and SOURCE, and a README) and is read as
the readers expect it, a directory laid out as the vendor's own (`mapfile.csv` + platform
folders, LICENSE, SOURCE). The archive is extracted once
into the user's cache, in a folder named by the archive's digest: a new autoprof with new data
extracts again, and an old folder is never half-written (it is extracted beside its final name
and renamed into place; when two processes race, the first rename wins and the other's copy
is removed). Deleting the cache is always safe.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
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
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{vendor}-", dir=root.parent))
        with tarfile.open(source) as tar:
            tar.extractall(scratch, filter="data")  # no member may land outside `scratch`
    except (OSError, tarfile.TarError) as err:
        raise AutoprofError(
            f"cannot extract autoprof's {vendor} event data to {root}: {err}"
        ) from None
    try:
        os.rename(scratch, root)
    except OSError:  # another process put it there first
        shutil.rmtree(scratch, ignore_errors=True)
    if not (root / MAPFILE).is_file():
        raise AutoprofError(f"autoprof's {vendor} event data at {root} has no {MAPFILE}")
    return root
