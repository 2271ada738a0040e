"""Folders only this user can change, and files opened in them without following links.

autoprof runs as root on machines other people use. A file it opens by name in a folder another
user can write may be that user's symbolic link to any file (`ln -s /etc/shadow out/.lock`
truncated it), and a record it reads there may be forged (issue #38, points 2 and 3). So every
folder autoprof writes into (a profile's out/, a worker's workdir, the server's data folder) is
refused unless it is this user's and writable by no other (`own_folder`), and so is each folder
above it unless it is root's or this user's and, if others may write it, sticky (/tmp): another
user could otherwise rename the folder away and put a link in its place. The folder is then used
by its resolved name. The files in it are opened with O_NOFOLLOW (`open_file`), new ones with
O_EXCL.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import stat
from pathlib import Path

from autoprof.errors import AutoprofError

FOLDER_MODE = 0o755  # whatever the umask: no other user writes a folder autoprof makes


def _user(uid: int) -> str:
    with contextlib.suppress(KeyError):
        return pwd.getpwuid(uid).pw_name
    return f"uid {uid}"


def _private_group(gid: int) -> bool:
    """`gid` is this user's own group (a user private group: its name, no other member)."""
    try:
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    me = _user(os.geteuid())
    return gid == os.getegid() and group.gr_name == me and set(group.gr_mem) <= {me}


def others_may_write(info: os.stat_result) -> str | None:
    """Who else may write a file or folder of this stat (None: only its owner)."""
    if info.st_mode & stat.S_IWOTH:
        return "every user"
    if info.st_mode & stat.S_IWGRP and not _private_group(info.st_gid):
        with contextlib.suppress(KeyError):
            return f"group {grp.getgrgid(info.st_gid).gr_name}"
        return f"group {info.st_gid}"
    return None


def problem(info: os.stat_result) -> str | None:
    """Why a folder or file of this stat (found by lstat) is not this user's alone."""
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if info.st_uid != os.geteuid():
        return f"is owned by {_user(info.st_uid)}"
    writers = others_may_write(info)
    return None if writers is None else f"is writable by {writers}"


def _above_problem(info: os.stat_result) -> str | None:
    """Why a folder above one autoprof writes lets another user swap what is below it."""
    if info.st_uid not in (0, os.geteuid()):
        return f"is owned by {_user(info.st_uid)}"
    writers = others_may_write(info)
    if writers is not None and not info.st_mode & stat.S_ISVTX:
        return f"is writable by {writers}"
    return None


def own_folder(path: Path) -> Path:
    """`path` created if missing (each new folder FOLDER_MODE) and checked as the module says;
    returns it resolved, the name to open everything through. AutoprofError in one line when
    another user could change it."""
    given = Path(os.path.abspath(path))
    for link in (given, *given.parents):  # another user's link chooses where autoprof writes
        with contextlib.suppress(OSError):
            info = os.lstat(link)
            if stat.S_ISLNK(info.st_mode) and info.st_uid not in (0, os.geteuid()):
                raise AutoprofError(
                    f"{path}: {link} is a symbolic link of {_user(info.st_uid)}: refused "
                    "(another user chooses where it leads)"
                )
    resolved = Path(os.path.realpath(path))
    missing = [p for p in (resolved, *resolved.parents) if not os.path.lexists(p)]
    for folder in reversed(missing):
        try:
            os.mkdir(folder, FOLDER_MODE)
        except FileExistsError:
            pass  # made meanwhile: checked below like any other
        except OSError as err:
            raise AutoprofError(f"cannot create {folder}: {err.strerror or err}") from None
    for folder in (resolved, *resolved.parents):
        try:
            info = os.lstat(folder)
        except OSError as err:
            raise AutoprofError(f"{folder}: {err.strerror or err}") from None
        if folder == resolved:
            if not stat.S_ISDIR(info.st_mode):
                raise AutoprofError(f"{path}: not a folder")
            why = problem(info)
        else:
            why = _above_problem(info)
        if why is not None:
            where = f"{path}" if folder == resolved else f"{path}: the folder {folder}"
            raise AutoprofError(
                f"{where} {why}: refused (another user could make autoprof write or trust "
                "files there; use a folder only you can write)"
            )
    return resolved


def trusted(path: Path, root: Path) -> bool:
    """`path`, at or under the folder `root`, and every folder between them are real (no
    symbolic links) and this user's alone: a record found there was written by this user."""
    try:
        relative = path.relative_to(root)
    except ValueError:
        return False
    current = root
    for part in ("", *relative.parts):
        current = current / part if part else current
        try:
            if problem(os.lstat(current)) is not None:
                return False
        except OSError:
            return False
    return True


def open_file(path: str | Path, flags: int, mode: int = 0o644) -> int:
    """os.open with O_NOFOLLOW (a link planted at `path` is refused: ELOOP) and O_CLOEXEC."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
