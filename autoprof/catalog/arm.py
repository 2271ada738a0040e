"""Arm64 catalogs from perf's own data (tools/perf/pmu-events/arch/arm64).

The CPU is its MIDR (``0x00000000413fd0c1``, sysfs ``midr_el1``); the first mapfile row equal
to it but for variant and revision picks the model folder (`vendor.midr_matches`). A model's
event that names an ``ArchStdEvent`` takes the standard event of that name from the top-level
files (common-and-microarch.json, recommended.json, sbsa.json), its own fields winning
(jevents.py l.419-427); sbsa.json's standard *metrics* are not events. `sys/` folders are
chosen by a PMU's sysfs identifier, not by MIDR, and are not read.

Counters (NON-INTEL.md section 4): PMCR_EL0.N generic counters, which sysfs does not show (the
kernel logs them), from the per-model table below (--counters replaces it), plus the cycle
counter PMCCNTR_EL0 where CPU_CYCLES (0x11) goes first: modelled as fixed counter 0, except on
cores whose kernel avoids it (NVIDIA Olympus, the t410 row). The NMI watchdog's cycles event
holds PMCCNTR_EL0, so --reserve takes the cycle counter first, then generic counters. The core
PMU's name is the machine's (sysfs, `ReadOptions.core_pmu`), ``armv8_pmuv3_0`` (ACPI servers)
when planning for another machine. HiSilicon uncore PMUs count system-wide only.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from autoprof.catalog import pmuevents, vendor
from autoprof.catalog.model import Catalog, Exclusion, ReadOptions
from autoprof.errors import AutoprofError
from autoprof.util.suggest import close_matches

DEFAULT_CORE_PMU = "armv8_pmuv3_0"
CPU_CYCLES = 0x11
STANDARD_FILES = ("common-and-microarch.json", "recommended.json", "sbsa.json")
# PMCR_EL0.N per model folder (libpfm4's per-core tables, NON-INTEL.md section 4); a model not
# listed (AmpereOne, AmpereOneX, Fujitsu Monaka, NVIDIA T410: no public number) gets 6.
GENERIC = {"fujitsu/a64fx": 8, "hisilicon/hip08": 12, "ampere/emag": 4}
DEFAULT_GENERIC = 6
NO_CYCLE_COUNTER = {"nvidia/t410"}  # armv8pmu_avoid_pmccntr_cpus (NVIDIA Olympus)
UNCORE_COUNTERS = {"hisi_sccl,l3c": 8, "hisi_sccl,ddrc": 8, "hisi_sccl,hha": 16, "hisi_sicl,cpa": 8}
# Slots per cycle (PMMIR_EL1.SLOTS, which the kernel shows as the core PMU's caps/slots and
# perf reads for its #slots) by (implementer, part number), for planning another machine: the
# num_slots of Arm's Telemetry Specifications (Arm's telemetry-solution repository,
# data/pmu/cpu/neoverse/neoverse-n2.json 5, -v2.json 8, -n3.json 5, -v3.json 10 for part
# 0xd84), and the slot counts perf's own formulas write out for the cores its mapfile serves
# (arm/neoverse-v1/metrics.json "CPU_CYCLES * 8", part 0xd40; arm/neoverse-v3/metrics.json
# "10 * CPU_CYCLES", part 0xd83). Not known (AmpereOne, ...): the machine's sysfs, or --set.
SLOTS = {
    (0x41, 0xD40): 8,
    (0x41, 0xD49): 5,
    (0x41, 0xD4F): 8,
    (0x41, 0xD83): 10,
    (0x41, 0xD84): 10,
    (0x41, 0xD8E): 5,
}
# Arm's product lines by a core's letter: Cortex-A and -X, Neoverse N, V and E.
_LINE = {"a": "cortex", "x": "cortex", "n": "neoverse", "v": "neoverse", "e": "neoverse"}


def rows(events_dir: Path) -> list[list[str]]:
    return vendor.read_rows(events_dir)


def core_names(folder: str) -> list[str]:
    """The cores of a folder that serves several, in its name's order: ``arm/cortex-a57-a72``
    -> cortex-a57, cortex-a72; ``arm/cortex-a65-e1`` -> cortex-a65, neoverse-e1 (Neoverse E1);
    ``arm/neoverse-n2-v2`` -> neoverse-n2, neoverse-v2. A one-core folder: none."""
    line, *cores = folder.rsplit("/", 1)[-1].split("-")
    if line not in ("cortex", "neoverse") or len(cores) < 2:
        return []
    return [f"{_LINE.get(core[:1], line)}-{core}" for core in cores]


def models(events_dir: Path) -> dict[str, str]:
    """Model name -> its MIDR: every core folder of the mapfile (``arm/cortex-a57-a72``), its
    last part (``cortex-a57-a72``) and each core it names (``cortex-a72``). A folder and its
    last part take the folder's first MIDR, a core the row of its place (the mapfile lists a
    shared folder's rows in its name's order: cortex-a57-a72 is 0xd07, then 0xd08)."""
    found: dict[str, str] = {}
    folders: dict[str, list[str]] = {}
    for row in rows(events_dir):
        if len(row) >= 3 and row[3:4] == ["core"]:
            folders.setdefault(row[2], []).append(row[0])
    for folder, midrs in folders.items():
        found.setdefault(folder, midrs[0])
        found.setdefault(folder.rsplit("/", 1)[-1], midrs[0])
        cores = core_names(folder)
        for i, core in enumerate(cores):
            found.setdefault(core, midrs[i] if len(midrs) == len(cores) else midrs[0])
    return found


def slots(midr: str) -> int | None:
    """The slots per cycle of a core by its MIDR (`SLOTS`), None when not known."""
    try:
        value = int(midr, 16)
    except ValueError:
        return None
    return SLOTS.get((value >> 24 & 0xFF, value >> 4 & 0xFFF))


def model_for(events_dir: Path, midr: str) -> tuple[str, str]:
    """(model folder, its mapfile MIDR) of a MIDR, or UnknownCpu."""
    row = vendor.first_row(rows(events_dir), midr, vendor.midr_matches)
    if row is None:
        close = close_matches(midr, list(models(events_dir)), n=3, cutoff=0.5)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        raise vendor.UnknownCpu(f"unknown MIDR {midr!r} in {events_dir}/mapfile.csv{hint}")
    return row[2], row[0]


def standard_events(events_dir: Path) -> dict[str, dict[str, Any]]:
    """The architecture's standard events by lower-case name (ArchStdEvent's keys)."""
    found: dict[str, dict[str, Any]] = {}
    for name in STANDARD_FILES:
        path = events_dir / name
        if not path.is_file():
            raise AutoprofError(f"missing {path}: not perf's arm64 event data")
        for raw in pmuevents.read_json(path):
            if isinstance(raw.get("EventName"), str):
                found.setdefault(raw["EventName"].lower(), raw)
    return found


def resolve(raw: dict[str, Any], standard: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """A model's entry with its ArchStdEvent filled in; None for metrics."""
    name = raw.get("ArchStdEvent")
    if name is None:
        return None if pmuevents.is_metric(raw) else raw
    base = standard.get(str(name).lower())
    if base is None or pmuevents.is_metric(base) or pmuevents.is_metric(raw):
        return None
    return base | {k: v for k, v in raw.items() if k != "ArchStdEvent"}


# perf takes jevents' comma unit (hisi_sccl,l3c: every hisi_sccl<N>_l3c<M>) for its own table
# aliases only (tools/perf/util/pmu.c pmu_uncore_alias_match); in an event string its parser
# wants one PMU name or a box prefix (hisi_sccl1_l3c), which only the machine's sysfs can give
WILDCARD = (
    "perf cannot parse the wildcard PMU name in a string (it needs the machine's own "
    "hisi_scclN_... boxes, which autoprof does not name yet)"
)


def uncore_pmu(unit: str) -> str:
    """jevents.py `unit_to_pmu`: HiSilicon's names verbatim (perf expands the comma)."""
    return unit if unit.startswith("hisi_") else f"uncore_{unit.lower()}"


def load(events_dir: str | Path, cpu: str, options: ReadOptions | None = None) -> Catalog:
    """The catalog of a MIDR or model name (``neoverse-n1``) from perf's arm64 data."""
    options = options or ReadOptions()
    events_dir = Path(events_dir)
    cpu = models(events_dir).get(cpu.lower(), cpu)
    model, midr = model_for(events_dir, cpu)
    core_pmu = options.core_pmu or DEFAULT_CORE_PMU
    builder = pmuevents.Builder(
        options, {core_pmu: GENERIC.get(model, DEFAULT_GENERIC)} | UNCORE_COUNTERS
    )
    builder.system_wide = set(UNCORE_COUNTERS)
    standard = standard_events(events_dir)
    # The watchdog's cycles event (--reserve) holds the cycle counter first, then generic ones.
    cycle_held = int(bool(options.reserve) and model not in NO_CYCLE_COUNTER)
    cycles_fixed = model not in NO_CYCLE_COUNTER and not cycle_held
    for path, entries in pmuevents.json_files(events_dir / model):
        for entry in entries:
            raw = resolve(entry, standard)
            if raw is None:
                continue
            unit = str(raw.get("Unit") or "")
            pmu = uncore_pmu(unit) if unit else core_pmu
            code = pmuevents.fields(raw)["code"]
            if pmu == core_pmu and cycles_fixed and code == CPU_CYCLES and "EventCode" in raw:
                builder.add(raw, pmu, path, fixed=0)
                cycles_fixed = False  # a second CPU_CYCLES takes a generic counter
                continue
            if "," in pmu:
                builder.excluded.append(Exclusion(str(raw.get("EventName") or ""), pmu, WILDCARD))
                continue
            if pmu != core_pmu:
                builder.system_wide.add(pmu)
            builder.add(raw, pmu, path, counters=frozenset(range(builder.count(pmu))))
    source = f"perf pmu-events {events_dir}/{model}"
    catalog = builder.catalog(midr, {core_pmu}, source, options.reserve - cycle_held)
    catalog.pmus[core_pmu] = replace(catalog.pmus[core_pmu], reserved_fixed=cycle_held)
    return catalog
