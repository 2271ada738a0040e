"""An archive of event data extracted into the user's cache, once: beside its final name, then
renamed into place, so an old folder is never half-written; when two processes race, the first
rename wins and the other's copy is removed. Apart from `embedded` so that tarfile loads only
when an archive is extracted, not at every start."""

from __future__ import annotations

import copy
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from autoprof.errors import AutoprofError


def extract_once(source: Path, root: Path) -> None:
    """The archive `source` extracted to the folder `root` (made whole, or left as it was)."""
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=root.parent))
        with tarfile.open(source) as tar:
            extract(tar, scratch)
    except (OSError, tarfile.TarError) as err:
        vendor = source.parent.name
        raise AutoprofError(
            f"cannot extract autoprof's {vendor} event data to {root}: {err}"
        ) from None
    try:
        os.rename(scratch, root)
    except OSError:  # another process put it there first
        shutil.rmtree(scratch, ignore_errors=True)


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
