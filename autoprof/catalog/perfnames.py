"""Events as perf users type them: generic hardware events (``cycles``, ``cache-misses``),
raw events (``r01c2``, ``cpu/event=0x3c,umask=0x0/``) and sysfs aliases (``cpu/topdown-retiring/``).

Each becomes a catalog event so a plan can hold it: the catalog event with the same encoding
on that PMU when there is one (``cycles`` on an Intel core is CPU_CLK_UNHALTED.THREAD,
event=0x3c), otherwise an event of its own on the PMU's generic counters, given to perf as
typed. Without a core catalog (no perfmon data for this CPU) the core PMU is assumed to have
`FALLBACK_COUNTERS` generic counters: the fewest any x86 core offers, so a plan made with it
never multiplexes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import cast

from autoprof.catalog import encoding
from autoprof.catalog.model import Catalog, Event, Pmu

FALLBACK_COUNTERS = 4
# perf's generic hardware events -> the Intel architectural encoding the kernel uses
# (arch/x86/events/intel/core.c, intel_perfmon_event_map); None: no fixed encoding.
GENERIC: dict[str, dict[str, int | str] | None] = {
    "cycles": {"event": 0x3C},
    "cpu-cycles": {"event": 0x3C},
    "instructions": {"event": 0xC0},
    "cache-references": {"event": 0x2E, "umask": 0x4F},
    "cache-misses": {"event": 0x2E, "umask": 0x41},
    "branch-instructions": {"event": 0xC4},
    "branches": {"event": 0xC4},
    "branch-misses": {"event": 0xC5},
    "bus-cycles": {"event": 0x3C, "umask": 0x01},
    "ref-cycles": {"event": 0x00, "umask": 0x03},
    "stalled-cycles-frontend": None,
    "idle-cycles-frontend": None,
    "stalled-cycles-backend": None,
    "idle-cycles-backend": None,
}
# perf's generic hardware events on an Arm PMUv3 core -> the architected event number the kernel
# counts for them (arch/arm64/kernel/perf_event.c, armv8_pmuv3_perf_map; the numbers are
# ARMV8_PMUV3_PERFCTR_* there and in asm/perf_event.h); the others are not supported there.
ARM_GENERIC: dict[str, dict[str, int | str]] = {
    "cycles": {"event": 0x11},  # CPU_CYCLES
    "cpu-cycles": {"event": 0x11},
    "instructions": {"event": 0x08},  # INST_RETIRED
    "cache-references": {"event": 0x04},  # L1D_CACHE
    "cache-misses": {"event": 0x03},  # L1D_CACHE_REFILL
    "branch-instructions": {"event": 0x0C},  # PC_WRITE_RETIRED
    "branches": {"event": 0x0C},
    "branch-misses": {"event": 0x10},  # BR_MIS_PRED
    "bus-cycles": {"event": 0x1D},  # BUS_CYCLES
    "stalled-cycles-frontend": {"event": 0x23},  # STALL_FRONTEND
    "stalled-cycles-backend": {"event": 0x24},  # STALL_BACKEND
}
# An Arm core PMU: the kernel's name for the core (armv8_cortex_a76, armv9_neoverse_n2) or, on
# device trees without one and on ACPI servers, armv8_pmuv3 / armv8_pmuv3_0
_ARM_CORE = re.compile(r"^armv[89]_")
# The kernel's sysfs aliases for Ice Lake and later cores (arch/x86/events/intel/core.c), for
# planning on a machine that is not the target.
KERNEL_ALIASES = {"slots": {"event": 0x00, "umask": 0x04}} | {
    f"topdown-{name}": {"event": 0x00, "umask": 0x80 + i}
    for i, name in enumerate(
        (
            "retiring",
            "bad-spec",
            "fe-bound",
            "be-bound",
            "heavy-ops",
            "br-mispredict",
            "fetch-lat",
            "mem-bound",
        )
    )
}
_CACHE = re.compile(
    r"^(L1-dcache|L1-icache|LLC|dTLB|iTLB|branch|node)-"
    r"(loads?|load-misses|stores?|store-misses|prefetch(es)?|prefetch-misses)$"
)
_RAW = re.compile(r"^r([0-9a-fA-F]+)$")


def raw_terms(config: int) -> dict[str, int]:
    """The core terms of a raw x86 config (``rNNN``): event 0-7, umask 8-15, edge 18, any 21,
    inv 23, cmask 24-31."""
    values = {"event": config & 0xFF, "umask": config >> 8 & 0xFF, "edge": config >> 18 & 1}
    values |= {"any": config >> 21 & 1, "inv": config >> 23 & 1, "cmask": config >> 24 & 0xFF}
    return values


def core_pmus(catalog: Catalog) -> list[str]:
    """The catalog's core PMUs: x86's cpu (cpu_core, cpu_atom on hybrid parts), Arm's."""
    names = [p for p in catalog.pmus if p == "cpu" or p.startswith("cpu_")]
    names += [n for n, p in catalog.pmus.items() if _ARM_CORE.match(n) and not p.system_wide]
    return sorted(names, key=lambda p: (p != "cpu", p != "cpu_core", p))


def _match(catalog: Catalog, pmu: str, terms: dict) -> Event | None:
    """The catalog event of `pmu` whose encoding has the same terms (fixed counters first)."""
    wanted = encoding.counted(terms)
    found = [
        e
        for e in catalog.events
        if e.pmu == pmu and e.style and encoding.counted(spec_terms(e.spec)) == wanted
    ]
    found.sort(key=lambda e: e.fixed is None)
    return found[0] if found else None


def spec_terms(spec: str) -> dict[str, int | str]:
    """The terms of an event string (none when it does not parse)."""
    parsed = encoding.parse_terms(spec)
    return parsed[1] if parsed else {}


def _own(catalog: Catalog, pmu: str, name: str, spec: str) -> Catalog:
    """An event of its own on the generic counters of `pmu` (a core PMU no catalog describes
    gets `FALLBACK_COUNTERS`; another PMU only sysfs knows, e.g. power/, counts freely)."""
    unit = catalog.pmus.get(pmu)
    if unit is None and (pmu == "cpu" or pmu.startswith("cpu_")):
        unit = Pmu(pmu, generic=FALLBACK_COUNTERS, description="assumed core counters")
    unit = unit or Pmu(pmu, unconstrained=True, description="from sysfs")
    counters = frozenset() if unit.unconstrained else frozenset(range(unit.counters))
    event = Event(name, pmu, spec, counters=counters)
    return Catalog(catalog.cpu, {pmu: unit}, [event], source=catalog.source)


def sysfs_alias(root: Path | None, pmu: str, name: str) -> dict | None:
    """The terms of a sysfs event alias ``root/<pmu>/events/<name>`` (None if absent)."""
    if root is None:
        return None
    try:
        text = (root / pmu / "events" / name).read_text().strip()
    except OSError:
        return None
    parsed = encoding.parse_terms(f"{pmu}/{text}/")
    return parsed[1] if parsed else None


def resolve(catalog: Catalog, spec: str, sysfs: Path | None) -> Catalog | None:
    """A catalog holding the events perf would count for `spec`, or None when `spec` is none
    of perf's generic, raw or ``pmu/.../`` forms. `sysfs` is the PMU folder of the machine the
    catalog describes (/sys/bus/event_source/devices), None when planning for another one.

    On a hybrid part perf 6.1 counts a generic, cache or raw event on every core PMU
    (tools/perf/util/parse-events-hybrid.c: add_hw_hybrid, add_raw_hybrid,
    parse_events__add_cache_hybrid) and a bare sysfs alias (``topdown-retiring``) on every
    PMU that has it (parse_events_multi_pmu_add), so these give one event per core type."""
    cores = _cores_here(core_pmus(catalog) or ["cpu"], sysfs)
    if spec in KERNEL_ALIASES:
        having = [p for p in cores if sysfs_alias(sysfs, p, spec)] or cores[:1]
        return _each(catalog, [f"{p}/{spec}/" for p in having], sysfs)
    raw = _RAW.match(spec)
    if spec in GENERIC or _CACHE.match(spec) or raw:
        # GENERIC holds Intel's encodings (AMD's cycles is 0x76), ARM_GENERIC the Arm PMUv3
        # ones: other catalogs get the name
        intel = any(e.style == encoding.CORE for e in catalog.events if e.pmu in cores)
        arm = any(_ARM_CORE.match(p) for p in cores)
        table = GENERIC if intel else ARM_GENERIC if arm else {}
        fixed: dict[str, int | str] | None
        if raw:
            config = int(raw.group(1), 16)
            fixed = cast(dict[str, int | str], raw_terms(config)) if intel else None
            fixed = {"event": config} if arm else fixed
        else:
            fixed = table.get(spec)
        matched = [_match(catalog, pmu, fixed) if fixed is not None else None for pmu in cores]
        return _merged(
            catalog.select([f"{e.pmu}/{e.name}"])
            if e
            else _own(
                catalog,
                pmu,
                spec,
                spec if pmu == "cpu" or _ARM_CORE.match(pmu) else f"{pmu}/{spec}/",
            )
            for pmu, e in zip(cores, matched, strict=True)
        )
    parsed = encoding.parse_terms(spec)
    if parsed is None:
        return None
    pmu, terms = parsed
    if len(terms) == 1 and next(iter(terms.values())) == 1:  # pmu/alias/
        alias = next(iter(terms))
        terms = sysfs_alias(sysfs, pmu, alias) or GENERIC.get(alias) or {}
        terms = terms or dict(KERNEL_ALIASES.get(alias, {}) if pmu in cores else {})
        if not terms:
            return None
    if pmu in catalog.pmus and (found := _match(catalog, pmu, terms)):
        return catalog.select([f"{found.pmu}/{found.name}"])
    if pmu not in catalog.pmus and pmu not in cores and not (sysfs and (sysfs / pmu).is_dir()):
        return None
    name = terms.get("name") if isinstance(terms.get("name"), str) else spec
    return _own(catalog, pmu, str(name), spec)


def _cores_here(cores: list[str], sysfs: Path | None) -> list[str]:
    """The core PMUs of `cores` the machine has (ARL-S lacks ARL-H's cpu_lowpower); all of
    them for another machine, or when sysfs shows none."""
    return [p for p in cores if sysfs and (sysfs / p).is_dir()] or cores


def _each(catalog: Catalog, specs: list[str], sysfs: Path | None) -> Catalog | None:
    found = [c for c in (resolve(catalog, s, sysfs) for s in specs) if c is not None]
    return _merged(found) if len(found) == len(specs) else None


def _merged(catalogs: Iterable[Catalog]) -> Catalog:
    merged, *rest = catalogs
    for other in rest:
        merged = merged.merge(other)
    return merged
