"""The scheduler: pack every event into runs, as few as the lower bound, provably.

Per PMU (all PMUs count at once in every run, so the plan's length is the largest PMU's):
1. each TakenAlone event gets a run of its own on the generic counters;
2. the other generic events are assigned to counters (capacity R per counter, reserved
   counters taken in every run) and to shared registers (capacity R each) by max-flow
   b-matchings; Hall's condition, which the lower bound checks, guarantees both exist;
3. each event is then an edge between its counter and its register in a bipartite multigraph
   of maximum degree <= R, which König's theorem colours with R colours: the colour of an
   event is its run. Events sharing a counter or register (conflicts) get different runs;
4. fixed-counter and unconstrained events are spread round-robin over all runs;
5. an event with a `leader` (topdown metrics: TOPDOWN.SLOTS) joins its leader's run, right
   after it, as toplev groups them; it needs no counter of its own.
So a PMU needs exactly its bound, and the plan exactly the plan bound.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

from autoprof.catalog.model import Catalog, Event, Pmu
from autoprof.errors import AutoprofError
from autoprof.schedule import rules
from autoprof.schedule.bounds import plan_bound
from autoprof.schedule.coloring import edge_colouring
from autoprof.schedule.plan import Placement, Plan, Run, validate


def _b_matching(
    groups: dict[frozenset, int], slots: list, capacity: int | dict, reserved: int = 0
) -> dict[frozenset, list]:
    """Slots for each group of identical items (mask -> count), each slot used <= capacity
    times (one number, or one per slot); `reserved` x capacity extra items accept any slot.
    Returns mask -> list of slots."""
    if not groups and not reserved:
        return {}
    limit = capacity if isinstance(capacity, dict) else dict.fromkeys(slots, capacity)
    if not reserved and len(groups) == 1 and set(next(iter(groups))) >= set(slots):
        return _spread(groups, slots, limit)
    import networkx as nx  # 0.2-0.6 s to import: only when a flow must be searched

    graph: nx.DiGraph = nx.DiGraph()
    for k, (mask, count) in enumerate(groups.items()):
        graph.add_edge("source", ("group", k), capacity=count)
        for slot in mask:
            graph.add_edge(("group", k), ("slot", slot))
    if reserved:
        graph.add_edge("source", "reserved", capacity=reserved * limit[slots[0]])
        for slot in slots:
            graph.add_edge("reserved", ("slot", slot))
    for slot in slots:
        graph.add_edge(("slot", slot), "sink", capacity=limit[slot])
    value, flow = nx.maximum_flow(graph, "source", "sink")
    need = sum(groups.values()) + reserved * limit[slots[0]] if reserved else sum(groups.values())
    if value != need:
        raise AssertionError(f"b-matching short by {need - value}: lower bound is wrong")
    result: dict[frozenset, list] = {}
    for k, mask in enumerate(groups):
        result[mask] = [
            slot for slot in sorted(mask) for _ in range(flow[("group", k)].get(("slot", slot), 0))
        ]
    if reserved:
        result[frozenset()] = [
            slot for slot in slots for _ in range(flow["reserved"].get(("slot", slot), 0))
        ]
    return result


def _spread(groups: dict[frozenset, int], slots: list, limit: dict) -> dict[frozenset, list]:
    """`_b_matching` of one group whose items take any slot (breakpoints, AMD and Arm core
    events): round-robin over the slots with room left."""
    [(mask, count)] = groups.items()
    left = dict(limit)
    chosen: list = []
    while len(chosen) < count:
        free = [s for s in slots if left[s] > 0]
        if not free:
            raise AssertionError(f"b-matching short by {count - len(chosen)}")
        for slot in free[: count - len(chosen)]:
            left[slot] -= 1
            chosen.append(slot)
    return {mask: chosen}


def _pack_normal(pmu: Pmu, events: list[Event], runs: int) -> list[tuple[Event, int, int]]:
    """(event, counter, run) for non-TakenAlone generic events over `runs` runs."""
    if not events:
        return []
    if any(e.pair for e in events):
        return _pack_pairs(pmu, events, runs)
    counters = list(range(pmu.counters))
    by_mask = _b_matching(_count(e.counters for e in events), counters, runs, pmu.reserved)
    with_regs = [e for e in events if e.registers]
    all_regs = sorted(set().union(*(e.registers for e in with_regs))) if with_regs else []
    by_regs = _b_matching(_count(e.registers for e in with_regs), all_regs, runs)
    edges, owners = [], []
    for i, event in enumerate(events):
        counter = by_mask[event.counters].pop()
        right = ("reg", by_regs[event.registers].pop()) if event.registers else ("own", i)
        edges.append((("ctr", counter), right))
        owners.append((event, counter))
    # Reserved counters: R phantom events per reserved slot, one in every run.
    for k, counter in enumerate(by_mask.get(frozenset(), [])):
        edges.append((("ctr", counter), ("reserved", k // runs)))
    colours = edge_colouring(edges, runs)
    return [(event, counter, colours[i]) for i, (event, counter) in enumerate(owners)]


def _pack_pairs(pmu: Pmu, events: list[Event], runs: int) -> list[tuple[Event, int, int]]:
    """`_pack_normal` with pair events (AMD's merge events; no shared registers there): the
    reserved counters are the top ones; pairs are spread evenly over the even counters below
    them (`rules.pair_counters`), each taking its odd neighbour's capacity too; the singles
    fill what is left by a b-matching. A pair is then an edge between its two counters (even
    on one side, odd on the other, so the multigraph stays bipartite) and König's colouring
    gives the runs, as for singles."""
    if any(e.registers for e in events):
        raise AssertionError(f"{pmu.name}: pair events with shared registers are not modelled")
    if not rules.pair_counters(pmu):  # the user's --reserve, not the packer's fault
        pair = next(e for e in events if e.pair)
        raise AutoprofError(
            f"{pmu.reserved} reserved counters leave the {pmu.name} PMU no even/odd counter "
            f"pair for {pair.name} (a pair event): reserve at most {pmu.counters // 2 - 1}, "
            "or leave its pair events out"
        )
    usable = list(range(pmu.counters - pmu.reserved))
    load: dict[int, int] = defaultdict(int)
    placed: list[tuple[Event, int]] = []
    for event in (e for e in events if e.pair):
        allowed = [c for c in rules.pair_counters(pmu) if c in event.counters and load[c] < runs]
        if not allowed:
            raise AssertionError(f"{pmu.name}: no counter pair left for {event.name}")
        counter = min(allowed, key=lambda c: (load[c], c))
        load[counter] += 1
        placed.append((event, counter))
    singles = [e for e in events if not e.pair]
    capacity = {c: runs - load[c - c % 2] for c in usable}
    by_mask = _b_matching(_count(e.counters for e in singles), usable, capacity)
    edges = [(("ctr", c), ("ctr", c + 1)) for _, c in placed]
    for i, event in enumerate(singles):
        counter = by_mask[event.counters].pop()
        edges.append((("ctr", counter), ("own", i)))
        placed.append((event, counter))
    colours = edge_colouring(edges, runs)
    return [(event, counter, colours[i]) for i, (event, counter) in enumerate(placed)]


def _count(masks) -> dict[frozenset, int]:
    counts: dict[frozenset, int] = defaultdict(int)
    for mask in masks:
        counts[mask] += 1
    return dict(counts)


def pack_pmu(pmu: Pmu, events: list[Event], runs: int) -> list[list[Placement]]:
    """Place one PMU's events into `runs` runs (at least its bound)."""
    placed: list[list[Placement]] = [[] for _ in range(runs)]
    generic = [e for e in events if e.counters]
    alone = [e for e in generic if e.taken_alone]
    for run, event in enumerate(alone):
        placed[run].append(Placement(event, f"gp{min(event.counters)}"))
    normal = [e for e in generic if not e.taken_alone]
    for event, counter, colour in _pack_normal(pmu, normal, runs - len(alone)):
        placed[len(alone) + colour].append(Placement(event, f"gp{counter}"))
    by_fixed: dict[int, list[Event]] = defaultdict(list)
    for event in events:
        if event.fixed is not None:
            by_fixed[event.fixed].append(event)
    for index, fixed_events in sorted(by_fixed.items()):
        for run, event in enumerate(fixed_events):
            placed[run].append(Placement(event, f"fixed{index}"))
    free = [e for e in events if not e.constrained and not e.leader]
    for run, event in zip(itertools.cycle(range(runs)), free, strict=False):
        placed[run].append(Placement(event, None))
    for event in (e for e in events if e.leader):
        _follow_leader(placed, event)
    return placed


def _follow_leader(placed: list[list[Placement]], event: Event) -> None:
    """Put `event` in the run of its leader, after the leader and its other followers."""
    for placements in placed:
        at = next((i for i, p in enumerate(placements) if p.event.name == event.leader), None)
        if at is not None:
            while at + 1 < len(placements) and placements[at + 1].event.leader == event.leader:
                at += 1
            placements.insert(at + 1, Placement(event, None))
            return
    raise AutoprofError(f"{event.pmu}/{event.name} needs {event.leader} in the plan")


def schedule(catalog: Catalog) -> Plan:
    """The shortest plan for every event of `catalog`, validated before it is returned."""
    by_pmu: dict[str, list[Event]] = defaultdict(list)
    for event in catalog.events:
        by_pmu[event.pmu].append(event)
    bound = plan_bound(catalog.pmus, catalog.events)
    runs = [Run() for _ in range(bound)]
    for name, events in by_pmu.items():
        for run, placements in zip(runs, pack_pmu(catalog.pmus[name], events, bound), strict=True):
            run.placements.extend(placements)
    plan = Plan(catalog.cpu, bound, runs, dict(catalog.pmus), list(catalog.excluded))
    validate(plan, catalog)
    return plan
