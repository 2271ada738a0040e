"""What a set of metrics needs measured: their events resolved against a catalog, the
catalog of exactly those events, and the groups the co-scheduler keeps together.

    needs = metric_needs(metrics, catalog, known)    # per metric: events, constants, missing
    wanted = needed_catalog(catalog, needs)          # the events to profile
    plan = coschedule(schedule(wanted), groups(needs)).plan
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autoprof.catalog.model import Catalog, Event
from autoprof.metrics import events as metric_events
from autoprof.metrics.catalog import Metric


@dataclass
class Needs:
    """One metric's inputs: alias -> resolved event, the constants it reads, and the events
    that cannot be measured (``TEXT: reason``), which leave the metric uncomputable."""

    metric: Metric
    events: dict[str, metric_events.Resolved] = field(default_factory=dict)
    constants: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    @property
    def measured(self) -> list[Event]:
        return [r.event for r in self.events.values() if r.event is not None]


def smt_constants(smt: bool) -> dict[str, float]:
    """The constants that choose formula branches, known when a profile is planned."""
    return {"HYPERTHREADING_ON": float(smt), "THREADS_PER_CORE": 2.0 if smt else 1.0}


class _Resolver:
    """Catalog look-ups by upper-cased name (the catalog's own `find` scans every event)."""

    def __init__(self, catalog: Catalog, retire: dict[str, float]):
        self.catalog = catalog
        self.retire = retire
        self.cache: dict[tuple[str, str], metric_events.Resolved] = {}
        by_name: dict[str, list[Event]] = {}
        for event in catalog.events:
            by_name.setdefault(event.name.upper(), []).append(event)
        self.index = Catalog(catalog.cpu, catalog.pmus, [], source=catalog.source)
        self.by_name = by_name

    def __call__(self, text: str, pmu: str) -> metric_events.Resolved:
        key = (text, pmu)
        if key not in self.cache:
            base = metric_events.split(text)[0].upper()
            extra = list(self.by_name.get(base, []))
            if base in metric_events.TOPDOWN:
                extra += self.by_name.get(metric_events.SLOTS, [])
            spec = metric_events.PERF_EVENTS.get(base, ("",))[0]
            extra += [e for e in self.catalog.events if spec and e.spec == spec]
            self.index.events = extra
            self.cache[key] = metric_events.resolve(text, self.index, pmu, self.retire)
        return self.cache[key]


def metric_needs(
    metrics: list[Metric],
    catalog: Catalog,
    known: dict[str, float],
    retire: dict[str, float] | None = None,
) -> list[Needs]:
    """Resolve what each metric reads, given the constants `known` now (SMT state)."""
    resolver = _Resolver(catalog, retire or {})
    result = []
    for metric in metrics:
        values = {a: known[c] for a, c in metric.constants.items() if c in known}
        values.update((a, float(c)) for a, c in metric.constants.items() if _number(c))
        read = metric.formula.needed(values)
        needs = Needs(metric, constants={a: c for a, c in metric.constants.items() if a in read})
        for alias in sorted(read & set(metric.events)):
            resolved = resolver(metric.events[alias], metric.pmu)
            needs.events[alias] = resolved
            if resolved.missing:
                needs.missing.append(f"{resolved.text}: {resolved.missing}")
        result.append(needs)
    return result


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def needed_catalog(catalog: Catalog, needs: list[Needs]) -> Catalog:
    """The catalog of exactly the events the metrics need (derived events included)."""
    chosen: dict[tuple[str, str], Event] = {}
    for item in needs:
        if item.missing:
            continue
        for event in item.measured:
            chosen.setdefault(event.key, event)
    pmus = dict(metric_events.perf_pmus(list(chosen.values())))
    pmus.update({p: catalog.pmus[p] for p in {e.pmu for e in chosen.values()} if p in catalog.pmus})
    return Catalog(catalog.cpu, pmus, list(chosen.values()), [], catalog.source)


def groups(needs: list[Needs]) -> dict[str, list[Event]]:
    """Metric name -> events to keep in one run, in the order the co-scheduler serves them:
    the topdown-* events with TOPDOWN.SLOTS first (perf reads them only together), then the
    TMA tree by level, then the other metrics, fewest events first."""
    order = sorted(
        (n for n in needs if not n.missing and n.measured),
        key=lambda n: (not n.metric.tma, n.metric.level, len(n.measured)),
    )
    result: dict[str, list[Event]] = {}
    topdown = [
        e
        for n in order
        for e in n.measured
        if e.name.upper() in metric_events.TOPDOWN or e.name.upper() == metric_events.SLOTS
    ]
    if any(e.name.upper() in metric_events.TOPDOWN for e in topdown):
        result["(topdown-* with TOPDOWN.SLOTS)"] = topdown
    result.update((n.metric.name, n.measured) for n in order)
    return result
