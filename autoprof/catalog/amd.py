"""AMD Zen catalogs from perf's own data (tools/perf/pmu-events/arch/x86: mapfile.csv, amdzenN/).

perf's CPU id (``AuthenticAMD-25-11-1``) picks the first mapfile row that matches it
(`vendor`). The L3, data-fabric and memory-controller events sit in the same files as the core
events, told apart by their ``Unit``. Counters (NON-INTEL.md section 3; none is in the data):
- ``cpu``: 6 generic counters, no fixed ones (amd/core.c); an event whose 12-bit code is 0x003
  (PMCx003, retired SSE/AVX FLOPs) is a merge event: it takes an even counter and its odd
  neighbour (`pair_constraint`), so a run holds s single and p pair events iff s + 2p <= 6;
- ``amd_l3`` 6, ``amd_df`` 4 (16 with PerfMonV2, Zen 4+; some parts report 4: --counters),
  ``amd_umc`` 4 per controller (PerfMonV2). These uncore PMUs refuse task-bound events
  (amd/uncore.c): they are `system_wide` and count only in a system-wide profile.
"""

from __future__ import annotations

import functools
from pathlib import Path

from autoprof.catalog import pmuevents, vendor
from autoprof.catalog.model import Catalog, ReadOptions
from autoprof.util.suggest import close_matches

CORE_PMU = "cpu"
UNIT_PMU = {"L3PMC": "amd_l3", "DFPMC": "amd_df", "UMCPMC": "amd_umc"}
_PERFMON_V1 = {"cpu": 6, "amd_l3": 6, "amd_df": 4}
_PERFMON_V2 = {"cpu": 6, "amd_l3": 6, "amd_df": 16, "amd_umc": 4}
# Counters per PMU per model folder (amd/core.c, amd/uncore.c; CPUID 0x80000022 on Zen 4+).
COUNTERS = {
    "amdzen1": _PERFMON_V1,
    "amdzen2": _PERFMON_V1,
    "amdzen3": _PERFMON_V1,
    "amdzen4": _PERFMON_V2,
    "amdzen5": _PERFMON_V2,
    "amdzen6": _PERFMON_V2,
}
PAIR_CODE = 0x003  # amd/core.c amd_is_pair_event_code
FAMILIES = (23, 25, 26)  # Fam 17h (Zen 1, 2), 19h (Zen 3, 4), 1Ah (Zen 5, 6)


def rows(events_dir: Path) -> list[list[str]]:
    """The mapfile's rows without its header."""
    return [r for r in vendor.read_rows(events_dir) if r and r[0] != "Family-model"]


def model_for(events_dir: Path, cpu_id: str) -> str:
    """The model folder of a CPU id (first matching row), or UnknownCpu."""
    row = vendor.first_row(rows(events_dir), cpu_id, vendor.pattern_matches)
    if row is None:
        close = close_matches(cpu_id, list(models(events_dir)), n=3, cutoff=0.5)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        raise vendor.UnknownCpu(f"unknown CPU id {cpu_id!r} in {events_dir}/mapfile.csv{hint}")
    return row[2].strip("/")


def models(events_dir: Path) -> dict[str, str]:
    """Model name -> a CPU id it is chosen for: ``amdzen4`` and ``zen4`` -> the first
    family/model that picks it."""
    return dict(_models(tuple(tuple(row) for row in rows(events_dir))))


@functools.cache
def _models(table: tuple[tuple[str, ...], ...]) -> dict[str, str]:
    """`models` of a mapfile's rows, worked out once: 768 ids tried on every row, per load."""
    listed = [list(row) for row in table]
    found: dict[str, str] = {}
    for family in FAMILIES:
        for model in range(256):
            cpu = f"AuthenticAMD-{family}-{model:X}-0"
            row = vendor.first_row(listed, cpu, vendor.pattern_matches)
            if row is not None:
                name = row[2].strip("/")
                found.setdefault(name, cpu)
                found.setdefault(name.removeprefix("amd"), cpu)
    return found


def load(events_dir: str | Path, cpu: str, options: ReadOptions | None = None) -> Catalog:
    """The catalog of a CPU id or model name (``zen4``) from perf's AMD data."""
    options = options or ReadOptions()
    events_dir = Path(events_dir)
    cpu = models(events_dir).get(cpu.lower(), cpu)
    model = model_for(events_dir, cpu)
    builder = pmuevents.Builder(options, dict(COUNTERS.get(model, _PERFMON_V2)))
    builder.system_wide = set(UNIT_PMU.values())
    core = builder.count(CORE_PMU)
    for path, entries in pmuevents.json_files(events_dir / model):
        for raw in entries:
            if pmuevents.is_metric(raw):
                continue
            pmu = UNIT_PMU.get(str(raw.get("Unit") or ""), CORE_PMU)
            pair = pmu == CORE_PMU and pmuevents.fields(raw)["code"] & 0xFFF == PAIR_CODE
            width = core if pmu == CORE_PMU else builder.count(pmu)
            counters = range(0, width - 1, 2) if pair else range(width)
            builder.add(raw, pmu, path, counters=frozenset(counters), pair=pair)
    return builder.catalog(cpu, {CORE_PMU}, f"perf pmu-events {events_dir}/{model}")
