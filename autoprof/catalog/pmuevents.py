"""perf's own event data (tools/perf/pmu-events/arch: AMD Zen, Arm64), read as jevents.py does.

One model is one folder of JSON files, each a list of events. What the AMD and Arm readers
share lives here: reading the files, one event's perf string (`encoding.jevents_terms`: the
``EventCode``/``ConfigCode``/``EventidCode`` term, then the fields in jevents' order, hex values
re-canonicalised), the opt-in sets (deprecated), and the PMUs with their counter numbers, which
the data does not hold: they come from the reader's per-model table, and ``--counters PMU=N``
replaces them (`ReadOptions.counters`). Entries that are metrics (``MetricName``,
``MetricExpr``) are not events and are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoprof.catalog import encoding, perfmon
from autoprof.catalog.model import Catalog, Event, Exclusion, Pmu, ReadOptions
from autoprof.errors import AutoprofError
from autoprof.util import records

DEPRECATED = "deprecated (--deprecated keeps it)"
# JSON field -> perf term (jevents.py `event_fields`); the code fields name the first term.
FIELD_TERMS = {
    "AnyThread": "any",
    "PortMask": "ch_mask",
    "CounterMask": "cmask",
    "EdgeDetect": "edge",
    "FCMask": "fc_mask",
    "Invert": "inv",
    "SampleAfterValue": "period",
    "UMask": "umask",
    "NodeType": "type",
    "RdWrMask": "rdwrmask",
    "EnAllCores": "enallcores",
    "EnAllSlices": "enallslices",
    "SliceId": "sliceid",
    "ThreadMask": "threadmask",
}
CODE_TERMS = (("EventCode", "event"), ("ConfigCode", "config"), ("EventidCode", "eventid"))


def read_json(path: Path) -> list[dict[str, Any]]:
    """The entries of one JSON file (a list of objects), or a one-line error naming it."""
    try:
        data = records.loads(path.read_text())
    except ValueError as err:  # not JSON, not UTF-8, or nested too deeply to read
        raise AutoprofError(f"malformed JSON in {path}: {err}") from None
    if not isinstance(data, list) or not all(isinstance(e, dict) for e in data):
        raise AutoprofError(f"malformed event file {path}: expected a list of event objects")
    return data


def json_files(folder: Path) -> Iterator[tuple[Path, list[dict[str, Any]]]]:
    """(path, entries) of every JSON file of a model folder, in name order."""
    if not folder.is_dir():
        raise AutoprofError(f"missing model folder {folder} (named by mapfile.csv)")
    for path in sorted(folder.glob("*.json")):
        yield path, read_json(path)


def is_metric(raw: dict[str, Any]) -> bool:
    return "MetricName" in raw or "MetricExpr" in raw


def fields(raw: dict[str, Any]) -> dict[str, Any]:
    """The encoding fields of one JSON event (perf's string, as jevents.py writes it)."""
    code_term, code = "event", 0
    for key, term in CODE_TERMS:
        if raw.get(key) is not None:
            code_term, code = term, perfmon.number(raw, key)
            break
    values = {term: perfmon.number(raw, key) for key, term in FIELD_TERMS.items() if key in raw}
    return {
        "style": encoding.JEVENTS,
        "code": code if code_term == "event" else 0,
        "umask": values.get("umask", 0),
        "terms": encoding.jevents_terms(code_term, code, values),
    }


@dataclass
class Builder:
    """Events and their PMUs while a model's files are read."""

    options: ReadOptions
    counters: dict[str, int]  # the model's counter numbers per PMU (before --counters)
    system_wide: set[str] = field(default_factory=set)
    events: list[Event] = field(default_factory=list)
    excluded: list[Exclusion] = field(default_factory=list)
    seen: set[tuple[str, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.counters = self.counters | dict(self.options.counters)

    def count(self, pmu: str) -> int:
        return self.counters.get(pmu, 0)

    def add(self, raw: dict[str, Any], pmu: str, path: Path, **kind: Any) -> None:
        """One JSON event on `pmu`; `kind` are its counter fields (counters, fixed, pair)."""
        name = raw.get("EventName")
        if not isinstance(name, str) or not name or (pmu, name) in self.seen:
            return
        self.seen.add((pmu, name))
        try:
            event = Event(
                name=name,
                pmu=pmu,
                description=str(raw.get("BriefDescription") or raw.get("PublicDescription") or ""),
                errata=str(raw["Errata"]) if raw.get("Errata") else None,
                deprecated=perfmon.flag(raw, "Deprecated"),
                **kind,
                **fields(raw),
            )
        except ValueError as err:
            raise AutoprofError(f"malformed event {name!r} in {path}: {err}") from None
        if not event.constrained:
            reason = f"no counter number known for {pmu} (give --counters {pmu}=N)"
            self.excluded.append(Exclusion(name, pmu, reason))
        elif event.deprecated and not self.options.deprecated:
            self.excluded.append(Exclusion(name, pmu, DEPRECATED))
        else:
            self.events.append(event)

    def pmus(self, core: set[str], reserve: int) -> dict[str, Pmu]:
        """The PMUs of the events read: `core` ones lose `reserve` counters to the watchdog."""
        used = {e.pmu for e in self.events}
        fixed = {e.pmu: e.fixed + 1 for e in self.events if e.fixed is not None}
        pmus = {}
        for name in sorted(used):
            total = self.count(name)
            held = min(reserve, max(total - 1, 0)) if name in core else 0
            pmus[name] = Pmu(
                name,
                generic=total - held,
                fixed=fixed.get(name, 0),
                reserved=held,
                system_wide=name in self.system_wide,
            )
        return pmus

    def catalog(self, cpu: str, core: set[str], source: str, reserve: int | None = None) -> Catalog:
        """The catalog read; `reserve` generic counters of the `core` PMUs are held by others
        (default: the options' --reserve)."""
        unknown = sorted(set(dict(self.options.counters)) - {e.pmu for e in self.events})
        if unknown:
            known = ", ".join(sorted({e.pmu for e in self.events}))
            raise AutoprofError(f"--counters {unknown[0]}: no such PMU for {cpu} ({known})")
        held = self.options.reserve if reserve is None else reserve
        return Catalog(cpu, self.pmus(core, held), self.events, self.excluded, source)
