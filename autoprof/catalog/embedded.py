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

import copy
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
            extract(tar, scratch)
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


def extract(tar: tarfile.TarFile, folder: Path, data_filter: bool | None = None) -> None:
    """Every member of `tar` into `folder`, none outside it, with the safety of tarfile's "data"
    filter: Python 3.11.4 added it (`extractall(filter="data")`), Debian 12's 3.11.2 lacks
    it, so there each member passes `data_member` first. `data_filter` forces either way."""
    if data_filter is None:
        data_filter = hasattr(tarfile, "data_filter")
    if data_filter:
        tar.extractall(folder, filter="data")
    else:
        tar.extractall(folder, members=[data_member(m, folder) for m in tar.getmembers()])


def data_member(member: tarfile.TarInfo, folder: Path) -> tarfile.TarInfo:
    """`member` as the "data" filter lets it be extracted into `folder`, for a Python without
    it; tarfile.TarError for what the filter refuses: a path that ends outside `folder`
    (absolute, ``..``), a link (this data has none: refused whatever its target), a device or
    pipe. Like the filter: leading slashes are dropped, the owner's read and write bits set,
    set-id, sticky and group/other write bits cleared, other execute bits kept only with the
    owner's; ownership is the extracting user's."""
    name = member.name.lstrip("/" + os.sep)
    root = os.path.realpath(folder)
    target = os.path.realpath(os.path.join(root, name))
    if os.path.isabs(name) or os.path.commonpath([root, target]) != root:
        raise tarfile.TarError(f"{member.name!r} would be extracted outside {folder}")
    if not (member.isreg() or member.isdir()):
        raise tarfile.TarError(f"{member.name!r} is not a regular file or folder")
    safe = copy.copy(member)
    safe.name = name
    mode = member.mode & 0o755  # no set-id, sticky, group or other write bit
    if member.isreg():
        mode |= 0o600
        if not mode & 0o100:
            mode &= ~0o011
    else:
        mode |= 0o700
    safe.mode = mode
    safe.uid, safe.gid, safe.uname, safe.gname = os.getuid(), os.getgid(), "", ""
    return safe
