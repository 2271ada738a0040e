"""What a set of metrics needs measured: their events resolved against a catalog, the
catalog of exactly those events, and the groups the co-scheduler keeps together.

    needs = metric_needs(metrics, catalog, known)    # per metric: events, constants, missing
    wanted = needed_catalog(catalog, needs)          # the events to profile
    plan = coschedule(schedule(wanted), groups(needs)).plan
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from autoprof.catalog import host
from autoprof.catalog.model import Catalog, Event, Exclusion, Pmu
from autoprof.errors import AutoprofError
from autoprof.metrics import constants
from autoprof.metrics import events as metric_events
from autoprof.metrics.model import Metric
from autoprof.schedule import schedule
from autoprof.schedule.cosched import CoSchedule, coschedule
from autoprof.schedule.plan import Placement, Plan


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
        """The events to count, each once (two aliases may read one event)."""
        found = {r.event.key: r.event for r in self.events.values() if r.event is not None}
        return list(found.values())


def smt_constants(smt: bool) -> dict[str, float]:
    """The constants that choose formula branches, known when a profile is planned."""
    return {"HYPERTHREADING_ON": float(smt), "THREADS_PER_CORE": 2.0 if smt else 1.0} | {
        "#smt_on": float(smt)
    }


def known_constants(cpu: str, smt: bool, metrics: Sequence[Metric]) -> dict[str, float]:
    """What is known of the CPU planned for: its SMT state, its model table's literals and
    the ``strcmp_cpuid_str`` tests of perf's metrics (they choose formula branches)."""
    names = {c for m in metrics for c in m.constants.values()}
    return smt_constants(smt) | constants.from_model(cpu) | constants.cpuid_tests(cpu, names)


class _Resolver:
    """Resolves event texts against the few catalog events each can mean (the catalog's own
    `find` scans every event, and a platform's metrics name hundreds)."""

    def __init__(self, catalog: Catalog, retire: dict[str, float]):
        self.catalog = catalog
        self.retire = retire
        self.cache: dict[tuple[str, str], metric_events.Resolved] = {}
        self.by_name: dict[str, list[Event]] = {}
        for event in catalog.events:
            self.by_name.setdefault(event.name.upper(), []).append(event)
            self.by_name.setdefault(event.spec.upper(), []).append(event)
        self.left_out: dict[str, list[Exclusion]] = {}  # why the data's other events are not
        for exclusion in catalog.excluded:
            self.left_out.setdefault(exclusion.name.upper(), []).append(exclusion)

    def __call__(self, text: str, pmu: str) -> metric_events.Resolved:
        key = (text, pmu)
        if key not in self.cache:
            inner = metric_events.counted(text) or text
            form = metric_events.pmu_form(inner)
            base = (form[1] or "" if form else metric_events.split(inner)[0]).upper()
            names = [inner.upper(), base, metric_events.PERF_EVENTS.get(base, ("",))[0].upper()]
            if base in metric_events.TOPDOWN:
                names.append(metric_events.SLOTS)
            events = list({e.key: e for n in names for e in self.by_name.get(n, [])}.values())
            left_out = [x for n in names for x in self.left_out.get(n, [])]
            small = Catalog(self.catalog.cpu, self.catalog.pmus, events, left_out)
            self.cache[key] = metric_events.resolve(text, small, pmu, self.retire)
        return self.cache[key]


def unavailable_pmus(catalog: Catalog, system_wide: bool = True, pmu_here: bool = True) -> dict:
    """PMU -> why its events cannot be counted in this profile: one that is not `system_wide`
    (a command's or a process's) cannot count system-wide-only PMUs (AMD's amd_l3/df/umc, Arm's
    uncore); a machine without a hardware PMU (`pmu_here` False: a VM) none but the host's."""
    found = {}
    for name, pmu in catalog.pmus.items():
        if not pmu_here and name not in host.HOST_PMUS:
            found[name] = "this machine's kernel offers no hardware PMU (a VM?)"
        elif pmu.system_wide and not system_wide:
            found[name] = f"{name} counts system-wide only (profile -a counts it)"
    return found


def metric_needs(
    metrics: list[Metric],
    catalog: Catalog,
    known: dict[str, float],
    retire: dict[str, float] | None = None,
    unavailable: Mapping[str, str] | None = None,
) -> list[Needs]:
    """Resolve what each metric reads, given the constants `known` now (SMT state, CPU id).
    An event of an `unavailable` PMU (`unavailable_pmus`) leaves the metric unmeasurable."""
    resolver = _Resolver(catalog, retire or {})
    unavailable = unavailable or {}
    result = []
    for metric in metrics:
        read = metric.formula.needed(constants.for_metric(metric.constants, known))
        needs = Needs(metric, constants={a: c for a, c in metric.constants.items() if a in read})
        for alias in sorted(read & set(metric.events)):
            resolved = resolver(metric.events[alias], metric.pmu)
            needs.events[alias] = resolved
            if resolved.missing:
                needs.missing.append(f"{resolved.text}: {resolved.missing}")
            elif resolved.event is not None and resolved.event.pmu in unavailable:
                needs.missing.append(f"{resolved.text}: {unavailable[resolved.event.pmu]}")
        result.append(needs)
    return result


def needed_catalog(catalog: Catalog, needs: list[Needs]) -> Catalog:
    """The catalog of exactly the events the metrics need (derived events included)."""
    chosen: dict[tuple[str, str], Event] = {}
    for item in needs:
        if item.missing:
            continue
        for event in item.measured:
            chosen.setdefault(event.key, event)
    pmus: dict[str, Pmu] = {}
    for name in {e.pmu for e in chosen.values()}:
        fallback = host.breakpoint_pmu() if name == "breakpoint" else Pmu(name, unconstrained=True)
        pmus[name] = catalog.pmus.get(name) or pmus.get(name) or fallback
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


@dataclass
class MetricPlan:
    """A profile plan for metrics: the events measured, the co-scheduled plan, and what
    could not be planned (metric -> missing events)."""

    catalog: Catalog
    needs: list[Needs]
    schedule: CoSchedule

    @property
    def plan(self) -> Plan:
        return self.schedule.plan

    @property
    def unmeasurable(self) -> dict[str, list[str]]:
        return {n.metric.name: n.missing for n in self.needs if n.missing}

    def summary(self) -> str:
        """How many metrics have their events in one run (the TMA tree's share too)."""
        placed = {n.metric.name: n.metric for n in self.needs if not n.missing and n.measured}
        tma = [name for name, m in placed.items() if m.tma]
        together = [name for name in placed if self.schedule.runs.get(name) is not None]
        tma_together = [name for name in tma if self.schedule.runs.get(name) is not None]
        return (
            f"{len(placed)} metrics from {len(self.catalog.events)} events in "
            f"{len(self.plan)} runs (lower bound {self.plan.lower_bound}); co-scheduled "
            f"(all events in one run): {len(together)} of {len(placed)}, TMA "
            f"{len(tma_together)} of {len(tma)}"
            + (f"; {len(self.unmeasurable)} metrics lack events" if self.unmeasurable else "")
        )


def plan_metrics(
    catalog: Catalog,
    metrics: list[Metric],
    smt: bool,
    consistent: bool = False,
    retire: dict[str, float] | None = None,
    extra: Sequence[str] = (),
    unavailable: Mapping[str, str] | None = None,
) -> MetricPlan:
    """The co-scheduled plan measuring exactly what `metrics` need (plus `extra` events such
    as an anchor, resolved by name and placed in every run: `run.planning` checks that they
    need no counter); an error when none of them can be measured. Metrics
    reading events of `unavailable` PMUs (`unavailable_pmus`) are left out, with the reason."""
    known = known_constants(catalog.cpu, smt, metrics)
    needs = metric_needs(metrics, catalog, known, retire, unavailable)
    wanted = needed_catalog(catalog, needs)
    if extra:
        wanted = wanted.merge(catalog.select([e for e in extra if not wanted.find(e)]))
    if not wanted.events:
        missing = "; ".join(m for n in needs for m in n.missing[:1])
        raise AutoprofError(f"none of the metrics can be measured here ({missing[:300]})")
    cosched = coschedule(schedule(wanted), groups(needs), consistent)
    for event in wanted.select(list(extra)).events if extra else []:
        for run in cosched.plan.runs:  # in every run, once (the runner adds it nowhere else)
            if event not in run.events:
                run.placements.append(Placement(event, None))
    return MetricPlan(wanted, needs, cosched)
