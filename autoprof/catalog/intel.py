"""Intel perfmon data (github.com/intel/perfmon layout): mapfile.csv + per-platform JSON files.

The directory is given at run time (``--events-dir``, ``AUTOPROF_EVENTS_DIR``, or the user
cache), as pmu-tools does: autoprof ships none of Intel's files. A CPU id such as
``GenuineIntel-6-55-4`` selects the mapfile rows whose ``Family-model`` pattern matches it;
those rows name the core (or hybrid core) files, the uncore files and the old offcore matrix.
"""

from __future__ import annotations

import csv
import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from autoprof.catalog.model import Catalog, Event, Exclusion, Pmu
from autoprof.errors import AutoprofError

# JSON "Unit" -> Linux PMU name, as perf's jevents.py maps them.
_UNIT_TO_PMU = {
    "CBO": "uncore_cbox",
    "QPI LL": "uncore_qpi",
    "SBO": "uncore_sbox",
    "iMPH-U": "uncore_arb",
    "UPI LL": "uncore_upi",
}
# mapfile "Core Role Name" -> the kernel's hybrid core PMU.
_HYBRID_PMU = {"Core": "cpu_core", "Atom": "cpu_atom", "LowPower_Atom": "cpu_lowpower"}
_NO_ERRATA = {"", "0", "null", "na", "none"}
# Core-event fields that become perf format terms, with the JSON value's meaning.
_CORE_TERMS = (
    ("CounterMask", "cmask"),
    ("Invert", "inv"),
    ("EdgeDetect", "edge"),
    ("AnyThread", "any"),
)
_UNCORE_TERMS = (
    ("UMaskExt", "umask_ext"),
    ("PortMask", "ch_mask"),
    ("FCMask", "fc_mask"),
    ("CounterMask", "thresh"),
    ("Invert", "inv"),
    ("EdgeDetect", "edge"),
)
# Shared-register MSRs and the perf format term that carries the register's value.
_MSR_TERM = {"0x1a6": "offcore_rsp", "0x1a7": "offcore_rsp", "0x3f6": "ldlat", "0x3f7": "frontend"}


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


@dataclass(frozen=True)
class IntelOptions:
    """How to read the data: SMT state, counters reserved by others, opt-in event sets."""

    smt: bool = True
    reserve: int = 0
    experimental: bool = False
    deprecated: bool = False
    offcore_matrix: bool = False


def read_mapfile(events_dir: Path) -> list[MapRow]:
    path = Path(events_dir) / "mapfile.csv"
    if not path.is_file():
        raise AutoprofError(f"no mapfile.csv in {events_dir}: not an Intel perfmon directory")
    try:
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        return [
            MapRow(
                r["Family-model"],
                r["Version"],
                r["Filename"],
                r["EventType"],
                (r.get("Core Role Name") or "").strip(),
            )
            for r in rows
        ]
    except (KeyError, csv.Error, UnicodeDecodeError) as err:
        raise AutoprofError(f"malformed {path}: {err}") from None


def _pattern_matches(pattern: str, cpu_id: str) -> bool:
    """perf's rule: the pattern matches the whole id, or the id without its stepping."""
    regex = re.compile(pattern, re.IGNORECASE)
    without_stepping = cpu_id.rsplit("-", 1)[0] if cpu_id.count("-") >= 3 else cpu_id
    return bool(regex.fullmatch(cpu_id) or regex.fullmatch(without_stepping))


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
    chosen = [r for r in rows if _pattern_matches(r.pattern, cpu)]
    if not chosen:
        known = sorted(platforms) + sorted({example_cpu_id(r.pattern) for r in rows})
        close = difflib.get_close_matches(cpu, known, n=4, cutoff=0.5)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        raise AutoprofError(f"unknown CPU id {cpu!r} in {events_dir}/mapfile.csv{hint}")
    return chosen


def _load_json_events(path: Path) -> list[dict]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise AutoprofError(f"missing event file {path} (named by mapfile.csv)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise AutoprofError(f"malformed JSON in {path}: {err}") from None
    events = data.get("Events") if isinstance(data, dict) else data
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise AutoprofError(f"malformed event file {path}: expected a list of event objects")
    return events


def _flag(raw: dict, key: str) -> bool:
    return str(raw.get(key, "0")).strip() == "1"


def _nonzero(value) -> bool:
    try:
        return int(str(value), 0) != 0
    except ValueError:
        return False


def _parse_counters(text: str | None) -> tuple[frozenset[int], int | None, bool]:
    """(generic counters, fixed counter, valid) from a Counter field such as ``0,1,2,3``,
    ``Fixed counter 1`` or ``FIXED`` (an uncore unit's single fixed counter)."""
    if text is None:
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
    return frozenset(m for m in msrs if _nonzero(m))


def _first_code(value) -> int:
    return int(str(value or "0").split(",")[0].strip(), 0)


def _core_spec(raw: dict, pmu: str, registers: frozenset[str]) -> str:
    terms = [
        f"event={_first_code(raw.get('EventCode')):#x}",
        f"umask={_first_code(raw.get('UMask')):#x}",
    ]
    terms += [
        f"{term}={int(str(raw[key]), 0)}" for key, term in _CORE_TERMS if _nonzero(raw.get(key, 0))
    ]
    if registers:
        term = _MSR_TERM.get(min(registers), "config1")
        terms.append(f"{term}={raw.get('MSRValue', '0')}")
    terms.append(f"name={raw['EventName']}")
    return f"{pmu}/{','.join(terms)}/"


def _uncore_spec(raw: dict, pmu: str) -> str:
    code = _first_code(raw.get("EventCode")) | (_first_code(raw.get("ExtSel")) << 8)
    terms = [f"event={code:#x}", f"umask={_first_code(raw.get('UMask')):#x}"]
    terms += [f"{term}={raw[key]}" for key, term in _UNCORE_TERMS if _nonzero(raw.get(key, 0))]
    terms.append(f"name={raw['EventName']}")
    return f"{pmu}/{','.join(terms)}/"


class _Builder:
    """Collects events and per-PMU counter facts while reading a platform's files."""

    def __init__(self, options: IntelOptions):
        self.options = options
        self.events: list[Event] = []
        self.excluded: list[Exclusion] = []
        self.generic: dict[str, int] = {}
        self.fixed: dict[str, int] = {}
        self.seen: set[tuple[str, str]] = set()

    def add(self, raw: dict, pmu: str, *, uncore: bool, experimental: bool) -> None:
        name = raw.get("EventName")
        if not name:
            return
        if (pmu, name) in self.seen:
            return
        self.seen.add((pmu, name))
        counter_text = raw.get("Counter")
        if not self.options.smt and raw.get("CounterHTOff"):
            counter_text = raw["CounterHTOff"]
        counters, fixed, valid = _parse_counters(counter_text)
        if raw.get("CounterType") == "FREERUN":
            counters, fixed = frozenset(), None  # a dedicated free-running counter
        elif not valid or (not counters and fixed is None):
            self.excluded.append(Exclusion(name, pmu, f"no usable Counter field: {counter_text!r}"))
            return
        registers = frozenset() if uncore else _registers(raw)
        errata = str(raw.get("Errata") or "").strip()
        event = Event(
            name=name,
            pmu=pmu,
            spec=_uncore_spec(raw, pmu) if uncore else _core_spec(raw, pmu, registers),
            counters=counters,
            fixed=fixed,
            registers=registers,
            taken_alone=_flag(raw, "TakenAlone"),
            description=str(raw.get("BriefDescription") or ""),
            errata=None if errata.lower() in _NO_ERRATA else errata,
            deprecated=_flag(raw, "Deprecated"),
            experimental=experimental,
        )
        if counters:
            self.generic[pmu] = max(self.generic.get(pmu, 0), max(counters) + 1)
        if fixed is not None:
            self.fixed[pmu] = max(self.fixed.get(pmu, 0), fixed + 1)
        self.generic.setdefault(pmu, 0)
        if event.deprecated and not self.options.deprecated:
            self.excluded.append(Exclusion(name, pmu, "deprecated"))
        elif experimental and not self.options.experimental:
            self.excluded.append(Exclusion(name, pmu, "experimental"))
        else:
            self.events.append(event)

    def add_matrix(self, raws: list[dict], pmu: str, base: dict) -> None:
        """Old offcore matrix: every request x response is one OFFCORE_RESPONSE event."""
        requests = [r for r in raws if r.get("MATRIX_RESPONSE") == "Null"]
        responses = [r for r in raws if r.get("MATRIX_REQUEST") == "Null"]
        for req in requests:
            for resp in responses:
                value = int(req["MATRIX_VALUE"], 16) | int(resp["MATRIX_VALUE"], 16)
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
                self.add(raw, pmu, uncore=False, experimental=False)

    def pmus(self) -> dict[str, Pmu]:
        reserve = self.options.reserve
        pmus = {}
        for name in sorted(set(self.generic) | set(self.fixed)):
            total = self.generic.get(name, 0)
            core = name == "cpu" or name.startswith("cpu_")
            held = min(reserve, max(total - 1, 0)) if core else 0
            pmus[name] = Pmu(
                name, generic=total - held, fixed=self.fixed.get(name, 0), reserved=held
            )
        return pmus


def load(events_dir: str | Path, cpu: str, options: IntelOptions | None = None) -> Catalog:
    """The catalog of a CPU id from an Intel perfmon directory."""
    options = options or IntelOptions()
    events_dir = Path(events_dir)
    rows = rows_for_cpu(events_dir, cpu)
    builder = _Builder(options)
    offcore_base: dict[str, dict] = {}
    for row in rows:
        path = events_dir / row.path.lstrip("/")
        if row.kind in ("core", "hybridcore"):
            pmu = _HYBRID_PMU.get(row.core_role, "cpu") if row.kind == "hybridcore" else "cpu"
            for raw in _load_json_events(path):
                builder.add(raw, pmu, uncore=False, experimental=False)
                if raw.get("EventName", "").startswith("OFFCORE_RESPONSE") and raw.get("MSRValue"):
                    offcore_base.setdefault(pmu, raw)
        elif row.kind in ("uncore", "uncore experimental"):
            for raw in _load_json_events(path):
                unit = str(raw.get("Unit") or "").strip()
                pmu = _UNIT_TO_PMU.get(unit, f"uncore_{unit.lower().replace(' ', '_')}")
                builder.add(raw, pmu, uncore=True, experimental=row.kind != "uncore")
        elif row.kind == "offcore" and options.offcore_matrix:
            for pmu, base in offcore_base.items():
                builder.add_matrix(_load_json_events(path), pmu, base)
        # metrics, fp_arith_inst, retire latency: descriptions of events, not events
    cpu_id = cpu if "-" in cpu else example_cpu_id(rows[0].pattern)
    return Catalog(
        cpu_id,
        builder.pmus(),
        builder.events,
        builder.excluded,
        source=f"intel perfmon {events_dir}",
    )
