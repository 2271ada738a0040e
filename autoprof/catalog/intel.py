"""Intel perfmon data (github.com/intel/perfmon layout): mapfile.csv + per-platform JSON files.

The directory is given at run time (``--events-dir``, ``AUTOPROF_EVENTS_DIR``, or the user
cache), as pmu-tools does: autoprof ships none of Intel's files. A CPU id such as
``GenuineIntel-6-55-4`` selects the mapfile rows whose ``Family-model`` pattern matches it;
those rows name the core (or hybrid core) files, the uncore files and the old offcore matrix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from autoprof.catalog import perfmon, vendor
from autoprof.catalog.encoding import CORE, MSR_TERM
from autoprof.catalog.model import Catalog, Event, Exclusion, Pmu, ReadOptions
from autoprof.catalog.vendor import UnknownCpu
from autoprof.errors import AutoprofError
from autoprof.util import records
from autoprof.util.suggest import close_matches

__all__ = ["IntelOptions", "UnknownCpu", "load", "rows_for_cpu"]

# mapfile "Core Role Name" -> the kernel's hybrid core PMU.
HYBRID_PMU = {"Core": "cpu_core", "Atom": "cpu_atom", "LowPower_Atom": "cpu_lowpower"}
DEPRECATED = "deprecated (--deprecated keeps it)"
EXPERIMENTAL = "experimental (--experimental keeps it)"
_NO_ERRATA = {"", "0", "null", "na", "none"}


@dataclass(frozen=True)
class MapRow:
    pattern: str
    version: str
    path: str
    kind: str  # core, hybridcore, uncore, uncore experimental, offcore, ...
    core_role: str

    @property
    def platform(self) -> str:
        return self.path.strip("/").split("/")[0]


# The reader's options are every reader's (`ReadOptions`); Intel's tests and callers name them so.
IntelOptions = ReadOptions


def read_mapfile(events_dir: Path) -> list[MapRow]:
    rows = vendor.read_rows(events_dir)
    path = Path(events_dir) / vendor.MAPFILE
    try:
        header, body = rows[0], rows[1:]
        records = [dict(zip(header, row, strict=False)) for row in body]
        return [
            MapRow(
                r["Family-model"],
                r["Version"],
                r["Filename"],
                r["EventType"],
                (r.get("Core Role Name") or "").strip(),
            )
            for r in records
        ]
    except (KeyError, IndexError) as err:
        raise AutoprofError(f"malformed {path}: {err}") from None


def example_cpu_id(pattern: str) -> str:
    """A concrete CPU id matched by a mapfile pattern (first choice of each ``[...]``)."""
    concrete = re.sub(r"\[([^\]]+)\]", lambda m: m.group(1)[0], pattern)
    return concrete if concrete.count("-") >= 3 else concrete + "-0"


def platform_cpu_ids(events_dir: Path) -> dict[str, str]:
    """One CPU id per platform folder: the first mapfile pattern that names it."""
    ids: dict[str, str] = {}
    for row in read_mapfile(events_dir):
        ids.setdefault(row.platform, example_cpu_id(row.pattern))
    return ids


def rows_for_cpu(events_dir: Path, cpu: str) -> list[MapRow]:
    """The mapfile rows for a CPU id (or a platform folder name such as ``SKX``)."""
    rows = read_mapfile(events_dir)
    platforms = {r.platform for r in rows}
    if cpu in platforms:
        cpu = platform_cpu_ids(events_dir)[cpu]
    chosen = [r for r in rows if vendor.pattern_matches(r.pattern, cpu)]
    if not chosen:
        known = sorted(platforms) + sorted({example_cpu_id(r.pattern) for r in rows})
        close = close_matches(cpu, known, n=4, cutoff=0.5)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        raise UnknownCpu(f"unknown CPU id {cpu!r} in {events_dir}/mapfile.csv{hint}")
    return chosen


def load_json_events(path: Path) -> list[dict]:
    try:
        data = records.loads(path.read_text())
    except FileNotFoundError:
        raise AutoprofError(f"missing event file {path} (named by mapfile.csv)") from None
    except ValueError as err:  # not JSON, not UTF-8, or nested too deeply to read
        raise AutoprofError(f"malformed JSON in {path}: {err}") from None
    events = data.get("Events") if isinstance(data, dict) else data
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise AutoprofError(f"malformed event file {path}: expected a list of event objects")
    return events


def _parse_counters(text: str | None) -> tuple[frozenset[int], int | None, bool]:
    """(generic counters, fixed counter, valid) from a Counter field such as ``0,1,2,3``,
    ``Fixed counter 1`` or ``FIXED`` (an uncore unit's single fixed counter)."""
    if not isinstance(text, str):
        return frozenset(), None, False
    text = text.strip()
    fixed = re.fullmatch(r"(?i)fixed(?: counter (\d+))?", text)
    if fixed:
        return frozenset(), int(fixed.group(1) or 0), True
    try:
        return frozenset(int(c) for c in text.split(",") if c.strip()), None, True
    except ValueError:
        return frozenset(), None, False


def _registers(raw: dict) -> frozenset[str]:
    msrs = str(raw.get("MSRIndex") or "0").replace(" ", "").lower().split(",")
    return frozenset(f"{int(m, 16):#x}" for m in msrs if m.startswith("0x") and int(m, 16))


class _Builder:
    """Collects events and per-PMU counter facts while reading a platform's files."""

    def __init__(self, options: IntelOptions, platform: perfmon.Platform):
        self.options = options
        self.platform = platform
        self.events: list[Event] = []
        self.excluded: list[Exclusion] = []
        self.generic: dict[str, int] = {}
        self.fixed: dict[str, int] = {}
        self.free: set[str] = set()
        self.seen: set[tuple[str, str]] = set()

    def add(self, raw: dict, pmu: str, path: Path, *, uncore: bool, experimental: bool) -> None:
        """Add one JSON event; a malformed one is an error naming the file and the event."""
        name = raw.get("EventName")
        if name is None or name == "":
            return
        try:
            if not isinstance(name, str):
                raise ValueError(f"EventName {name!r} is not a string")
            event = self._event(raw, name, pmu, uncore=uncore, experimental=experimental)
        except ValueError as err:
            raise AutoprofError(f"malformed event {name!r} in {path}: {err}") from None
        if event is not None:
            self._keep(event)

    def _event(
        self, raw: dict, name: str, pmu: str, *, uncore: bool, experimental: bool
    ) -> Event | None:
        counter_text = raw.get("Counter")
        if not self.options.smt and raw.get("CounterHTOff"):
            counter_text = raw["CounterHTOff"]
        counters, fixed, valid = _parse_counters(counter_text)
        freerun = str(raw.get("CounterType") or "").upper() == "FREERUN"
        if uncore:
            unit = str(raw.get("Unit") or "").strip()
            try:
                fields = perfmon.uncore_fields(raw, name, unit, self.platform)
            except perfmon.NotEncodable as why:
                box = perfmon.uncore_pmu(unit, name, self.platform, freerun=False, fixed=False)
                self.excluded.append(Exclusion(name, box, str(why)))
                return None
            pmu = fields.pop("pmu")
            registers: frozenset[str] = frozenset()
        else:
            fields = perfmon.core_fields(raw, name)
            registers = _registers(raw)
        if (pmu, name) in self.seen:
            return None
        self.seen.add((pmu, name))
        if freerun:
            counters, fixed = frozenset(), None  # a dedicated free-running counter
            self.free.add(pmu)
        elif not valid or (not counters and fixed is None):
            self.excluded.append(Exclusion(name, pmu, f"no usable Counter field: {counter_text!r}"))
            return None
        unknown = sorted(r for r in registers if r not in MSR_TERM)
        if unknown:
            reason = f"MSR {unknown[0]} has no perf format term (perf's jevents knows none)"
            self.excluded.append(Exclusion(name, pmu, reason))
            return None
        errata = str(raw.get("Errata") or "").strip()
        return Event(
            name=name,
            pmu=pmu,
            counters=counters,
            fixed=fixed,
            registers=registers,
            taken_alone=perfmon.flag(raw, "TakenAlone"),
            description=str(raw.get("BriefDescription") or ""),
            errata=None if errata.lower() in _NO_ERRATA else errata,
            deprecated=perfmon.flag(raw, "Deprecated"),
            experimental=experimental,
            **fields,
        )

    def _keep(self, event: Event) -> None:
        pmu = event.pmu
        if event.counters:
            self.generic[pmu] = max(self.generic.get(pmu, 0), max(event.counters) + 1)
        if event.fixed is not None:
            self.fixed[pmu] = max(self.fixed.get(pmu, 0), event.fixed + 1)
        self.generic.setdefault(pmu, 0)
        if event.deprecated and not self.options.deprecated:
            self.excluded.append(Exclusion(event.name, pmu, DEPRECATED))
        elif event.experimental and not self.options.experimental:
            self.excluded.append(Exclusion(event.name, pmu, EXPERIMENTAL))
        else:
            self.events.append(event)

    def add_matrix(self, raws: list[dict], pmu: str, base: dict, path: Path) -> None:
        """Old offcore matrix: every request x response is one OFFCORE_RESPONSE event, its
        MSR value the request OR the response (placed by `perfmon.matrix_shift`)."""
        try:
            requests = [r for r in raws if r.get("MATRIX_RESPONSE") == "Null"]
            responses = [r for r in raws if r.get("MATRIX_REQUEST") == "Null"]
            shift = perfmon.matrix_shift([perfmon.number(r, "MATRIX_VALUE") for r in responses])
        except ValueError as err:
            raise AutoprofError(f"malformed offcore matrix {path}: {err}") from None
        for req in requests:
            for resp in responses:
                value = perfmon.number(req, "MATRIX_VALUE") | (
                    perfmon.number(resp, "MATRIX_VALUE") << shift
                )
                regs = {f"{0x1A6 + int(i):#x}" for i in req["MATRIX_REGISTER"].split(",")}
                raw = dict(
                    base,
                    EventName=(
                        f"OFFCORE_RESPONSE.{req['MATRIX_REQUEST']}.{resp['MATRIX_RESPONSE']}"
                    ),
                    MSRIndex=",".join(sorted(regs)),
                    MSRValue=f"{value:#x}",
                    BriefDescription=f"{req['DESCRIPTION']}; {resp['DESCRIPTION']}",
                )
                self.add(raw, pmu, path, uncore=False, experimental=False)

    def add_topdown(self) -> None:
        """PERF_METRICS.* on cores with TOPDOWN.SLOTS on fixed counter 3 (Ice Lake and later):
        read with TOPDOWN.SLOTS, which must lead their group; 8 metrics on cores that have
        TOPDOWN.MEMORY_BOUND_SLOTS (Golden Cove and later), 4 before."""
        names = {(e.pmu, e.name) for e in self.events}
        slots = [e for e in self.events if e.name == perfmon.SLOTS and e.fixed == 3]
        for leader in slots:
            count = 8 if (leader.pmu, "TOPDOWN.MEMORY_BOUND_SLOTS") in names else 4
            for i, metric in enumerate(perfmon.TOPDOWN_METRICS[:count]):
                self._keep(
                    Event(
                        name=f"PERF_METRICS.{metric}",
                        pmu=leader.pmu,
                        description=f"topdown {metric.lower()} slots (PERF_METRICS, with slots)",
                        style=CORE,
                        code=0,
                        umask=0x80 + i,
                        leader=leader.name,
                    )
                )

    def pmus(self) -> dict[str, Pmu]:
        reserve = self.options.reserve
        pmus = {}
        for name in sorted(set(self.generic) | set(self.fixed)):
            total = self.generic.get(name, 0)
            core = name == "cpu" or name.startswith("cpu_")
            held = min(reserve, max(total - 1, 0)) if core else 0
            pmus[name] = Pmu(
                name,
                generic=total - held,
                fixed=self.fixed.get(name, 0),
                reserved=held,
                unconstrained=name in self.free and not total and name not in self.fixed,
                system_wide=not core,  # uncore: no task context, as AMD's and Arm's uncore
            )
        return pmus


def load(events_dir: str | Path, cpu: str, options: IntelOptions | None = None) -> Catalog:
    """The catalog of a CPU id from an Intel perfmon directory."""
    options = options or IntelOptions()
    events_dir = Path(events_dir)
    rows = rows_for_cpu(events_dir, cpu)
    uncore = {
        row.path: load_json_events(events_dir / row.path.lstrip("/"))
        for row in rows
        if row.kind in ("uncore", "uncore experimental")
    }
    units = {str(r.get("Unit") or "").strip() for raws in uncore.values() for r in raws}
    platform = perfmon.Platform.from_units(rows[0].platform, units, options.event_ext)
    builder = _Builder(options, platform)
    offcore_base: dict[str, dict] = {}
    for row in rows:
        path = events_dir / row.path.lstrip("/")
        if row.kind in ("core", "hybridcore"):
            pmu = HYBRID_PMU.get(row.core_role, "cpu") if row.kind == "hybridcore" else "cpu"
            for raw in load_json_events(path):
                builder.add(raw, pmu, path, uncore=False, experimental=False)
                name = raw.get("EventName")
                offcore = isinstance(name, str) and name.startswith("OFFCORE_RESPONSE")
                if offcore and raw.get("MSRValue"):
                    offcore_base.setdefault(pmu, raw)
        elif row.kind in ("uncore", "uncore experimental"):
            for raw in uncore[row.path]:
                builder.add(raw, "", path, uncore=True, experimental=row.kind != "uncore")
        elif row.kind == "offcore" and options.offcore_matrix:
            for pmu, base in offcore_base.items():
                builder.add_matrix(load_json_events(path), pmu, base, path)
        # metrics, fp_arith_inst, retire latency: descriptions of events, not events
    builder.add_topdown()
    cpu_id = cpu if "-" in cpu else example_cpu_id(rows[0].pattern)
    return Catalog(
        cpu_id,
        builder.pmus(),
        builder.events,
        builder.excluded,
        source=f"intel perfmon {events_dir}",
    )
