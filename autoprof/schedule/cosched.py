"""Metric co-scheduling: a plan transformation that keeps each metric's events in one run.

Contract (as the other plan transformations): ``plan = coschedule(plan, groups)`` with
`groups` = metric name -> the events its formula needs. The result counts every event of
`plan` at least once, in the same number of runs (never more than the proven lower bound),
unless ``consistent=True``, which appends runs so that every metric whose events fit one run
is measured in one run. An event may be counted in several runs when a counter is free there
(fixed counters and counter-free events cost nothing): that is how CPU_CLK_UNHALTED.THREAD
serves every metric's run.

Greedy, metric by metric (TMA levels first, then the smallest): pick the run that holds most
of its events and bring the others in, by copying an event into a free counter, moving it, or
swapping it with an event no co-scheduled metric needs there. Every changed run is re-checked
by a bipartite matching of its events to counters, registers and fixed counters.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from autoprof.catalog.model import Event, Pmu
from autoprof.errors import AutoprofError
from autoprof.schedule import rules
from autoprof.schedule.plan import Placement, Plan, Run, run_problems

Key = tuple[str, str]


def fit(events: Iterable[Event], pmus: dict[str, Pmu]) -> list[Placement] | None:
    """The events of one run placed on counters (`rules.assign`), or None when they cannot all
    count at once (an event with a `leader`, a topdown metric, counts only in its leader's
    group)."""
    events = list(events)
    keys = {e.key for e in events}
    if any(e.leader and (e.pmu, e.leader) not in keys for e in events):
        return None
    placements: list[Placement] = []
    by_pmu: dict[str, list[Event]] = {}
    for event in events:
        by_pmu.setdefault(event.pmu, []).append(event)
    for name, evs in by_pmu.items():
        counters = rules.assign(pmus.get(name) or Pmu(name, unconstrained=True), evs)
        if counters is None:
            return None
        placements += [Placement(e, counters[i]) for i, e in enumerate(evs)]
    placements.sort(key=lambda p: p.event.leader is not None)  # led events after their leaders
    return placements


@dataclass
class CoSchedule:
    """The transformed plan and, per metric, the run (0-based) that counts all its events
    (None: its events are spread over runs, `cross-run`)."""

    plan: Plan
    runs: dict[str, int | None] = field(default_factory=dict)

    @property
    def together(self) -> int:
        return sum(run is not None for run in self.runs.values())


class _State:
    def __init__(self, plan: Plan):
        self.pmus = plan.pmus
        self.runs: list[list[Event]] = [list(r.events) for r in plan.runs]
        self.locked: set[tuple[Key, int]] = set()
        # metrics try the same runs again: a third of the fits were asked before; each entry
        # keeps its events, so their ids in its key stay theirs
        self._fits: dict[tuple[int, ...], tuple[tuple[Event, ...], bool]] = {}

    def keys(self, run: int) -> set[Key]:
        return {e.key for e in self.runs[run]}

    def fits(self, events: list[Event]) -> bool:
        key = tuple(map(id, events))
        if key not in self._fits:
            self._fits[key] = (tuple(events), fit(events, self.pmus) is not None)
        return self._fits[key][1]

    def gather(self, events: list[Event], target: int) -> bool:
        """Bring every event into run `target` (copy, move or swap); False changes nothing.
        Each run's keys are kept beside it: asking every event of every run whether it is the
        one sought was half of a metric plan's time."""
        runs = [list(r) for r in self.runs]
        keys = [{e.key for e in r} for r in runs]
        wanted = {e.key for e in events}
        for event in events:
            if event.key in keys[target]:
                continue
            homes = [i for i, k in enumerate(keys) if event.key in k]
            if self.fits([*runs[target], event]):
                runs[target].append(event)
                keys[target].add(event.key)
                for home in homes:  # a move frees the old counter when nothing needs it
                    if (event.key, home) not in self.locked and home != target:
                        runs[home] = [e for e in runs[home] if e.key != event.key]
                        keys[home].discard(event.key)
                        break
                continue
            if not self._swap(runs, keys, target, event, homes, wanted):
                return False
        self.runs = runs
        self.locked |= {(key, target) for key in wanted}
        return True

    def _swap(
        self,
        runs: list[list[Event]],
        keys: list[set[Key]],
        target: int,
        event: Event,
        homes: list[int],
        wanted: set[Key],
    ) -> bool:
        for other in list(runs[target]):
            if other.key in wanted or (other.key, target) in self.locked:
                continue
            trial = [e for e in runs[target] if e.key != other.key] + [event]
            if not self.fits(trial):
                continue
            if any(
                i != target and other.key in k and _holds(runs[i], other)
                for i, k in enumerate(keys)
            ):
                runs[target] = trial
                keys[target] = {e.key for e in trial}
                return True
            for home in homes:
                if (event.key, home) in self.locked:
                    continue
                moved = [e for e in runs[home] if e.key != event.key] + [other]
                if self.fits(moved):
                    runs[target], runs[home] = trial, moved
                    keys[target], keys[home] = {e.key for e in trial}, {e.key for e in moved}
                    return True
        return False


def _holds(run: list[Event], event: Event) -> bool:
    """`event in run`, comparing whole events only where the names agree (an Event's __eq__
    compares every field: a million comparisons were a quarter of a metric plan's time)."""
    return any(e is event or (e.name == event.name and e == event) for e in run)


def coschedule(plan: Plan, groups: dict[str, list[Event]], consistent: bool = False) -> CoSchedule:
    """Co-schedule the metrics' events (see the module docstring); validated on return."""
    state = _State(plan)
    placed: dict[str, int | None] = {}
    for name, events in groups.items():
        events = list({e.key: e for e in events}.values())
        placed[name] = None
        if not events or not state.fits(events):
            continue
        keys = {e.key for e in events}
        order = sorted(range(len(state.runs)), key=lambda r: -len(keys & state.keys(r)))
        for run in order:
            if state.gather(events, run):
                placed[name] = run
                break
    if consistent:
        for name, events in groups.items():
            events = list({e.key: e for e in events}.values())
            if placed[name] is not None or not events or not state.fits(events):
                continue
            extra = range(len(plan.runs), len(state.runs))
            target = next((r for r in extra if state.fits(_union(state.runs[r], events))), None)
            if target is None:
                state.runs.append([])
                target = len(state.runs) - 1
            state.runs[target] = _union(state.runs[target], events)
            state.locked |= {(e.key, target) for e in events}
            placed[name] = target
    kept = [i for i, run in enumerate(state.runs) if run]  # a run emptied by moves goes
    index = {old: new for new, old in enumerate(kept)}
    placed = {name: None if run is None else index[run] for name, run in placed.items()}
    result = Plan(
        plan.cpu,
        plan.lower_bound,
        [Run(fit(state.runs[i], plan.pmus) or []) for i in kept],
        plan.pmus,
        plan.excluded,
    )
    _validate(result, plan)
    return CoSchedule(result, placed)


def _union(run: list[Event], events: list[Event]) -> list[Event]:
    keys = {e.key for e in run}
    return run + [e for e in events if e.key not in keys]


def _validate(result: Plan, original: Plan) -> None:
    problems = [
        f"run {i}: {p}"
        for i, run in enumerate(result.runs, 1)
        for p in run_problems(run, result.pmus)
    ]
    counted = {e.key for run in result.runs for e in run.events}
    problems += [
        f"{e.pmu}/{e.name} lost" for r in original.runs for e in r.events if e.key not in counted
    ]
    if problems:
        raise AutoprofError(f"co-scheduling broke the plan: {problems[0]}")
