"""Generic counters found on the live machine, where sysfs does not say how many a PMU has.

AMD's and Arm's core PMUs do not show their counter number in sysfs (the kernel reads
PMCR_EL0.N on Arm and logs it: "hw perfevents: enabled with armv8_pmuv3 PMU driver, 7 counters
available", the cycle counter included), so the catalogs take it from a per-model table, which
is a guess for the machine at hand: a hypervisor may offer fewer, a model may not be in the table.
The kernel knows: it refuses to schedule a group of events that do not all fit on the PMU at
once. A group of k copies of one event that any generic counter can count (Arm's INST_RETIRED,
AMD's retired instructions) counts when k counters are free and is refused at k + 1 (perf prints
`<not counted>` for the group, `<not supported>` for the event the kernel refused): one perf
call per size tried, two when the table is right (`perf.query.group_counts` asks perf and reads
its answer). User mode only (`:u`), so a user who is not root can probe when
kernel.perf_event_paranoid is 2.

The answer is remembered for this machine in ``counters.json`` under the user's cache folder
in the home directory the password database names (not $HOME or $XDG_CACHE_HOME, which a job's
environment may set), keyed by the CPU, the kernel, the boot and the PMU, so another machine or
a reboot probes again; a file that is not the user's own, or is writable by others, is ignored.
JSON, never pickle: reading it runs nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import pwd
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from autoprof.perf.query import group_counts
from autoprof.util.clock import now_iso
from autoprof.util.records import write_json

MAX_COUNTERS = 64
FILE = "counters.json"
KEEP = 32  # entries kept in the file
# An event any generic counter counts: Arm's INST_RETIRED (0x08; the architecture requires it
# or INST_SPEC), AMD's PMCx0C0 Retired Instructions (no counter restriction on any Zen).
_ARM_CORE = re.compile(r"^armv[89]_")


def probe_event(pmu: str) -> str | None:
    """The event a group of copies of which probes `pmu`; None for a PMU not probed."""
    if _ARM_CORE.match(pmu):
        return f"{pmu}/event=0x8/"
    if pmu == "cpu":
        return "cpu/event=0xc0/"
    return None


@dataclass(frozen=True)
class Probed:
    """What the probe found for one PMU of this machine."""

    pmu: str
    counters: int  # the largest group of `event` the PMU counts at once
    event: str
    perf_calls: int
    when: str = ""


def cache_file() -> Path | None:
    """counters.json in the user's cache folder, from the password database; None when the
    database does not know this user."""
    try:
        home = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return None
    return Path(home) / ".cache" / "autoprof" / FILE


def machine_key(pmu: str, event: str) -> str:
    """This machine, boot and PMU: a reboot (or another kernel) probes again."""
    parts = [pmu, event, platform.release(), _read("/proc/sys/kernel/random/boot_id")]
    parts += [_read("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1")]
    parts += [_cpuinfo_line("vendor_id"), _cpuinfo_line("cpu family"), _cpuinfo_line("model")]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _cpuinfo_line(key: str) -> str:
    found = re.search(rf"^{re.escape(key)}\s*:\s*(.*)$", _read("/proc/cpuinfo"), re.MULTILINE)
    return found.group(1) if found else ""


def probe(perf: str, pmu: str, guess: int, counts: Callable[[int], bool] | None = None) -> Probed:
    """The counters of `pmu`: `guess` (the table's) and guess + 1 first, then a binary search
    between 0 and `MAX_COUNTERS`. `counts(k)` (a group of k counts) defaults to perf's answer."""
    event = probe_event(pmu) or ""
    test = counts or (lambda k: group_counts(perf, event, k))
    calls = 0

    def fits(k: int) -> bool:
        nonlocal calls
        calls += 1
        return test(k)

    low, high = 0, MAX_COUNTERS + 1  # fits(low) is known true, fits(high) false
    guess = min(max(guess, 1), MAX_COUNTERS)
    if fits(guess):
        low = guess
        if guess == MAX_COUNTERS or not fits(guess + 1):
            return Probed(pmu, guess, event, calls, now_iso())
        low = guess + 1
    else:
        high = guess
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return Probed(pmu, low, event, calls, now_iso())


def remembered(pmu: str, path: Path | None = None) -> Probed | None:
    """The probe of `pmu` this machine remembers (this boot), if any."""
    event = probe_event(pmu)
    path = path if path is not None else cache_file()
    if event is None or path is None:
        return None
    entry = _entries(path).get(machine_key(pmu, event))
    try:
        found = Probed(**entry) if isinstance(entry, dict) else None
    except TypeError:
        return None
    ok = found is not None and found.pmu == pmu and 0 <= found.counters <= MAX_COUNTERS
    return found if ok else None


def remember(found: Probed, path: Path | None = None) -> None:
    """Keep `found` for this machine (atomically; a cache that cannot be written is no error)."""
    path = path if path is not None else cache_file()
    if path is None:
        return
    entries = _entries(path)
    entries[machine_key(found.pmu, found.event)] = asdict(found)
    entries = dict(list(entries.items())[-KEEP:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, entries, mode=0o644)  # never writable by others: `_entries` reads it
    except OSError:
        pass


def _entries(path: Path) -> dict:
    """The file's entries; nothing from a file that is not the user's own or that others may
    write (its number would decide how many events share a run)."""
    try:
        info = path.stat()
        if info.st_uid != os.getuid() or info.st_mode & 0o022:
            return {}
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def counters(perf: str, pmu: str, guess: int, path: Path | None = None) -> Probed | None:
    """The counters of `pmu` on this machine: remembered, else probed now (and remembered);
    None for a PMU not probed, or when perf counts not even one event (no PMU, no permission)."""
    if probe_event(pmu) is None:
        return None
    found = remembered(pmu, path)
    if found is None:
        found = probe(perf, pmu, guess)
        if found.counters == 0:
            return None
        remember(found, path)
    return found
