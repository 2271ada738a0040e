"""A Plan: the runs of a schedule, each a set of events placed on counters; its JSON form and
its validation.

Validation does not trust the packer: for every run and PMU it re-checks the counters the
packer chose against the counter rules (`autoprof.schedule.rules`: generic counters with the
reserved ones taken, AMD's pairs, shared registers, fixed counters, TakenAlone, group leaders),
and that every catalog event is placed exactly once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from autoprof.catalog.model import Catalog, Event, Exclusion, Pmu
from autoprof.errors import AutoprofError
from autoprof.schedule import rules

# why a plan of a command's or a process's profile leaves out an event of a system-wide-only PMU
# (`run.planning.task_bound`)
SYSTEM_WIDE_ONLY = "system-wide only: profile -a counts it"


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
        """The contract of `autoprof schedule --json` (docs/DESIGN.md)."""
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


def run_problems(run: Run, pmus: dict[str, Pmu]) -> list[str]:
    """Why this run cannot be counted without multiplexing (empty when it can): `rules`."""
    found = rules.leader_problems(run.events)
    by_pmu: dict[str, list[tuple[Event, str | None]]] = {}
    for p in run.placements:
        by_pmu.setdefault(p.event.pmu, []).append((p.event, p.counter))
    for name, placed in by_pmu.items():
        found += rules.problems(pmus[name], placed)
    return found


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
