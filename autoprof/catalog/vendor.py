"""Which vendor's data serves a CPU, and which mapfile row: perf's matching rules, written once.

Every vendor's data starts with a ``mapfile.csv`` whose rows map a CPU id pattern to a folder.
perf's readers (tools/perf/arch/x86/util/header.c and arch/arm64/util/header.c,
``strcmp_cpuid_str``; jevents.py ``map_for_cpu``) agree on these rules:
- x86 patterns are POSIX extended regexes matching the whole id, or the id without its stepping.
  POSIX classes such as ``[[:xdigit:]]`` mean nothing to Python's `re` (it reads the set
  ``[[:xdigit:]`` and a literal ``]``), so they are translated first;
- Arm64 ids are MIDR values: every bit but Variant [23:20] and Revision [3:0] must be equal,
  and the CPU's (variant, revision) must be at least the row's;
- AMD and Arm rows overlap (every Zen 1 id matches the Zen 2 row too): the first row wins.
  Intel's mapfile gives one row per file kind (core, uncore, metrics...), all of which apply.
"""

from __future__ import annotations

import csv
import functools
import re
from pathlib import Path

from autoprof.errors import AutoprofError

INTEL, AMD, ARM64 = "intel", "amd", "arm64"
VENDORS = (INTEL, AMD, ARM64)
MAPFILE = "mapfile.csv"

_POSIX_CLASSES = {
    "[:xdigit:]": "0-9A-Fa-f",
    "[:digit:]": "0-9",
    "[:alpha:]": "A-Za-z",
    "[:alnum:]": "0-9A-Za-z",
    "[:upper:]": "A-Z",
    "[:lower:]": "a-z",
    "[:space:]": r"\s",
}
_VARIANT_REVISION = 0xF << 20 | 0xF


class UnknownCpu(AutoprofError):
    """No mapfile row matches the CPU id (this machine may simply not be in the data)."""


def python_regex(pattern: str) -> str:
    """A POSIX ERE as Python's `re` reads it: bracket classes spelled out."""
    for posix, spelled in _POSIX_CLASSES.items():
        pattern = pattern.replace(posix, spelled)
    return pattern


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    """A mapfile pattern, compiled once: `amd.models` tries ~80 patterns on 1,500 ids."""
    return re.compile(python_regex(pattern), re.IGNORECASE)


def pattern_matches(pattern: str, cpu_id: str) -> bool:
    """perf's x86 rule: the pattern matches the whole id, or the id without its stepping."""
    regex = _compiled(pattern)
    without_stepping = cpu_id.rsplit("-", 1)[0] if cpu_id.count("-") >= 3 else cpu_id
    return bool(regex.fullmatch(cpu_id) or regex.fullmatch(without_stepping))


def midr_matches(row: str, midr: str) -> bool:
    """perf's Arm64 rule: equal but for variant and revision, which must be at least the row's."""
    try:
        want, have = int(row, 16), int(midr, 16)
    except ValueError:
        return False
    if want & ~_VARIANT_REVISION != have & ~_VARIANT_REVISION:
        return False
    return (have >> 20 & 0xF, have & 0xF) >= (want >> 20 & 0xF, want & 0xF)


def vendor_of(cpu_id: str) -> str | None:
    """The vendor whose data describes a CPU id (perf's form), None when no vendor's does."""
    if cpu_id.startswith("GenuineIntel"):
        return INTEL
    if cpu_id.startswith("AuthenticAMD"):
        return AMD
    if re.fullmatch(r"0x[0-9a-fA-F]{8,16}", cpu_id):
        return ARM64
    return None


def read_rows(events_dir: Path) -> list[list[str]]:
    """The rows of a mapfile, comments (Arm's ``#`` header) and blank lines left out."""
    path = Path(events_dir) / MAPFILE
    if not path.is_file():
        raise AutoprofError(f"no {MAPFILE} in {events_dir}: not an event data directory")
    try:
        lines = [ln for ln in path.read_text().splitlines() if ln.strip() and ln[0] != "#"]
        return [[c.strip() for c in row] for row in csv.reader(lines)]
    except (csv.Error, UnicodeDecodeError) as err:
        raise AutoprofError(f"malformed {path}: {err}") from None


def layout(events_dir: Path) -> str:
    """Which vendor's layout a data directory has, told by its mapfile's CPU ids."""
    rows = read_rows(events_dir)
    ids = {vendor_of(row[0]) for row in rows if row}
    for vendor in (ARM64, AMD, INTEL):  # a Linux x86 mapfile has both: its AMD rows are read
        if vendor in ids and (vendor != AMD or INTEL not in ids or _linux_x86(events_dir)):
            return vendor
    raise AutoprofError(f"{events_dir}/{MAPFILE} names no Intel, AMD or Arm64 CPU")


def _linux_x86(events_dir: Path) -> bool:
    """A perf checkout's x86 folder (amdzen* beside Intel's platform folders)."""
    return any(Path(events_dir).glob("amdzen*"))


def first_row(rows: list[list[str]], cpu_id: str, match) -> list[str] | None:
    """The first row whose pattern `match`es the id (perf's table walk)."""
    return next((row for row in rows if len(row) >= 3 and match(row[0], cpu_id)), None)
