"""What autoprof asks perf outside a profile: its version, the tracepoints it lists, and whether
a group of events counts (the counters probe, `catalog.probe`). Each question is one perf call
and its answer read here, so the catalog knows perf's formats through this module alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess

from autoprof.errors import AutoprofError
from autoprof.perf.command import installed
from autoprof.util import xdg
from autoprof.util.owned import own_folder, trusted
from autoprof.util.records import read_json, write_json

VERSION_CACHE = "perf-version.json"  # in the user's cache folder (`util.xdg`)
_TRACEPOINT = re.compile(r"[\w-]+:[\w-]+")  # subsystem:event


def _ask(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str] | None:
    """perf's answer in the C locale (its numbers unformatted); None where it cannot run."""
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, "LC_ALL": "C"}
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def version() -> str:
    """perf's version ("6.1.158"); "" without perf. Remembered in the user's cache for the
    program it was asked of (its path, inode, size and times) under this kernel (a wrapper
    may pick its perf by the kernel's release): asking perf cost 8 ms of CPU of every start."""
    perf = installed()
    if not perf:
        return ""
    try:
        info = os.stat(perf)
    except OSError:
        return ""
    program = (os.path.realpath(perf), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    key = repr((*program, info.st_ctime_ns, os.uname().release))
    cache = xdg.cache_dir() / VERSION_CACHE
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        known = read_json(cache) if trusted(cache, cache.parent) else {}  # this user's alone
        if known["key"] == key and isinstance(known["version"], str):
            return known["version"]
    found = _ask([perf, "--version"], 20)
    if found is None or found.returncode != 0:
        return ""
    answer = found.stdout.strip().removeprefix("perf version ").strip()
    with contextlib.suppress(OSError, AutoprofError):  # a cache that cannot be written is no error
        own_folder(cache.parent)  # 0o755 whatever the umask: read back only if this user's alone
        write_json(cache, {"key": key, "version": answer}, mode=0o644)
    return answer


def tracepoints() -> list[str]:
    """``subsystem:event`` for every tracepoint `perf list` names (perf mounts tracefs first
    where it may: root); empty without perf or when it lists none."""
    perf = installed()
    found = _ask([perf, "list", "--raw-dump", "tracepoint"], 60) if perf else None
    return sorted(w for w in found.stdout.split() if _TRACEPOINT.fullmatch(w)) if found else []


def group_counts(perf: str, event: str, size: int) -> bool:
    """Whether a group of `size` copies of `event` counts, every copy all of the time (user
    mode only, counting perf's own `--version`)."""
    group = "{" + ",".join([event] * size) + "}:u"
    found = _ask([perf, "stat", "-x,", "-e", group, "--", perf, "--version"], 60)
    return found is not None and group_counted(found.stderr, size)


def group_counted(output: str, size: int) -> bool:
    """Whether perf's `-x,` output of a group of `size` events shows every one counted all of
    the time (a refused group: `<not counted>` lines and the refused one `<not supported>`)."""
    # value,unit,event,run time,percent,...: one line per event of the group
    rows = [line.split(",") for line in output.splitlines() if line.count(",") >= 4]
    counted = [r for r in rows if r[0].replace(".", "").isdigit() and _full(r[4])]
    return len(rows) == size == len(counted)


def _full(percent: str) -> bool:
    try:
        return float(percent) >= 100.0
    except ValueError:
        return True  # perf leaves it empty when the event ran all the time
