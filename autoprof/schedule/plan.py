"""A Plan: the runs of a schedule, each a set of events placed on counters; its JSON form and
its validation.

Validation does not trust the packer: for every run and PMU it re-checks, with bipartite
matchings (networkx), that the events fit the generic counters (with reserved counters taken),
the shared registers, the fixed counters, and the TakenAlone rule; and that every catalog event
is placed exactly once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from autoprof.catalog.model import Catalog, Event, Exclusion, Pmu
from autoprof.errors import AutoprofError


@dataclass(frozen=True)
class Placement:
    """An event in a run, with the counter the packer put it on (the witness of validity).

    `counter` is ``gpN`` (generic counter N), ``fixedN``, or None for an unconstrained event.
    """

    event: Event
    counter: str | None


@dataclass
class Run:
    placements: list[Placement] = field(default_factory=list)

    @property
    def events(self) -> list[Event]:
        return [p.event for p in self.placements]

    def perf_events(self) -> list[str]:
        """The ``-e`` arguments of this run: see `perf_event_args`."""
        return perf_event_args(self.events)


def perf_event_args(events: list[Event]) -> list[str]:
    """``perf stat -e`` arguments for events counted together: each event's spec, except that
    an event and those it leads (TOPDOWN.SLOTS and the PERF_METRICS.* events) form one group
    ``{leader,member,...}``, leader first, as the kernel requires for topdown metrics."""
    led: dict[tuple[str, str], list[Event]] = {}
    for event in events:
        if event.leader:
            led.setdefault((event.pmu, event.leader), []).append(event)
    args = []
    for event in events:
        if event.leader and (event.pmu, event.leader) in {e.key for e in events}:
            continue
        members = led.get(event.key, [])
        specs = [event.spec] + [m.spec for m in members]
        args.append("{" + ",".join(specs) + "}" if members else event.spec)
    return args


@dataclass
class Plan:
    cpu: str
    lower_bound: int
    runs: list[Run]
    pmus: dict[str, Pmu]
    excluded: list[Exclusion] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.runs)

    def to_json(self) -> dict[str, Any]:
        """The contract of `autoprof schedule --json` (DESIGN.md)."""
        return {
            "cpu": self.cpu,
            "lower_bound": self.lower_bound,
            "runs": [
                {
                    "events": [
                        {
                            "name": p.event.name,
                            "pmu": p.event.pmu,
                            "counter": p.counter,
                            "spec": p.event.spec,
                        }
                        | ({"leader": p.event.leader} if p.event.leader else {})
                        for p in run.placements
                    ],
                    "perf_events": run.perf_events(),
                }
                for run in self.runs
            ],
            "excluded": [{"name": x.name, "pmu": x.pmu, "reason": x.reason} for x in self.excluded],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], catalog: Catalog) -> Plan:
        """Rebuild a plan from its JSON against the catalog that defines its events."""
        index = {e.key: e for e in catalog.events}
        runs = []
        try:
            for run in data["runs"]:
                placements = []
                for item in run["events"]:
                    event = index.get((item["pmu"], item["name"]))
                    if event is None:
                        raise AutoprofError(
                            f"plan names {item['pmu']}/{item['name']}, unknown to {catalog.cpu}"
                        )
                    placements.append(Placement(event, item.get("counter")))
                runs.append(Run(placements))
            excluded = [
                Exclusion(x["name"], x["pmu"], x["reason"]) for x in data.get("excluded", [])
            ]
            return cls(data["cpu"], int(data["lower_bound"]), runs, catalog.pmus, excluded)
        except (KeyError, TypeError, ValueError) as err:
            raise AutoprofError(f"malformed plan JSON: {err!r}") from None

    def pmu_load(self) -> dict[str, list[int]]:
        """Per PMU, how many events each run carries (for the readable summary)."""
        load: dict[str, list[int]] = {}
        for i, run in enumerate(self.runs):
            for event in run.events:
                load.setdefault(event.pmu, [0] * len(self.runs))[i] += 1
        return load


def _matches_all(left: dict[Any, frozenset], extra: int, slots: set) -> bool:
    """Whether every left item (plus `extra` items that accept any slot) gets its own slot."""
    lefts = [("item", k) for k in left] + [("any", i) for i in range(extra)]
    if len(lefts) > len(slots):
        return False
    if all(allowed >= slots for allowed in left.values()):
        return True  # every item takes any slot, and there are enough (breakpoints)
    import networkx as nx  # 0.2-0.6 s to import: only when a matching must be searched

    graph: nx.Graph = nx.Graph()
    graph.add_nodes_from(lefts, bipartite=0)
    graph.add_nodes_from((("slot", s) for s in slots), bipartite=1)
    for k, allowed in left.items():
        graph.add_edges_from((("item", k), ("slot", s)) for s in allowed)
    for i in range(extra):
        graph.add_edges_from((("any", i), ("slot", s)) for s in slots)
    matching = nx.bipartite.hopcroft_karp_matching(graph, top_nodes=lefts)
    return all(node in matching for node in lefts)


def run_problems(run: Run, pmus: dict[str, Pmu]) -> list[str]:
    """Why this run cannot be counted without multiplexing (empty when it can)."""
    problems: list[str] = []
    by_pmu: dict[str, list[Placement]] = {}
    seen: set[tuple[str, str]] = set()
    for p in run.placements:
        by_pmu.setdefault(p.event.pmu, []).append(p)
        if p.event.leader and (p.event.pmu, p.event.leader) not in seen:
            problems.append(f"{p.event.name} is not after its group leader {p.event.leader}")
        seen.add(p.event.key)
    for name, placements in by_pmu.items():
        pmu = pmus[name]
        if pmu.unconstrained:
            continue
        generic = [p for p in placements if p.event.counters]
        fixed = [p for p in placements if p.event.fixed is not None]
        for p in generic:
            if (
                p.counter is None
                or not p.counter.startswith("gp")
                or (int(p.counter[2:]) not in p.event.counters)
            ):
                problems.append(f"{name}: {p.event.name} placed on {p.counter}, not allowed")
        witness = Counter(p.counter for p in generic)
        problems += [f"{name}: counter {c} used {n} times" for c, n in witness.items() if n > 1]
        slots = set(range(pmu.counters))
        if not _matches_all(
            {i: p.event.counters for i, p in enumerate(generic)},
            pmu.reserved if generic else 0,
            slots,
        ):
            problems.append(f"{name}: {len(generic)} events do not fit the generic counters")
        registers = {i: p.event.registers for i, p in enumerate(generic) if p.event.registers}
        if registers and not _matches_all(registers, 0, set().union(*registers.values())):
            problems.append(f"{name}: shared registers over-subscribed")
        alone = [p for p in generic if p.event.taken_alone]
        if alone and len(generic) > 1:
            problems.append(f"{name}: TakenAlone {alone[0].event.name} shares the counters")
        per_fixed = Counter(p.event.fixed for p in fixed)
        problems += [
            f"{name}: fixed counter {f} holds {n} events" for f, n in per_fixed.items() if n > 1
        ]
        problems += [
            f"{name}: {p.event.name} on {p.counter}, needs fixed{p.event.fixed}"
            for p in fixed
            if p.counter != f"fixed{p.event.fixed}"
        ]
    return problems


def validate(plan: Plan, catalog: Catalog) -> None:
    """Raise unless every run fits its counters and every catalog event is placed once."""
    problems = []
    for i, run in enumerate(plan.runs, 1):
        problems += [f"run {i}: {p}" for p in run_problems(run, plan.pmus)]
    placed = Counter(e.key for run in plan.runs for e in run.events)
    wanted = Counter(e.key for e in catalog.events)
    problems += [
        f"{pmu}/{name} placed {placed[(pmu, name)]} times"
        for (pmu, name) in wanted
        if placed[(pmu, name)] != 1
    ]
    problems += [
        f"{pmu}/{name} is not in the catalog" for (pmu, name) in placed if (pmu, name) not in wanted
    ]
    if problems:
        raise AutoprofError(f"invalid plan ({len(problems)} problems): {problems[0]}")
