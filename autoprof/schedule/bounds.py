"""Lower bounds on the number of runs: no schedule can be shorter, so a plan that meets its
bound is optimal.

Per PMU, with T TakenAlone events (each needs a run of its own on the generic counters):
    bound = max(T + max(hall(counters), hall(registers)), max fixed-counter demand)
where hall(...) is the Hall bound of the non-TakenAlone events over counters or shared
registers: for every set S of slots, the events that can only use slots in S need at least
|events| / |S| runs. Counters reserved by others (the NMI watchdog) occupy slots in every run.
Pair events (AMD's merge events, `rules`) weigh two counters: with s singles and p pairs a run
needs s + 2p of the unreserved counters and holds at most `rules.pair_width` pairs, so
hall(...) is at least ceil((s + 2p) / unreserved) and ceil(p / pair width).
The plan's bound is the largest PMU bound. The packer meets these bounds exactly (see packer).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from autoprof.catalog.model import Event, Pmu
from autoprof.schedule import rules


def _bits(slots: Iterable, index: dict) -> int:
    mask = 0
    for slot in slots:
        mask |= 1 << index[slot]
    return mask


def hall_bound(masks: Iterable[frozenset], reserved: int = 0, universe: int | None = None) -> int:
    """Fewest runs in which items, each needing one slot from its mask, fit with every slot
    used at most once per run and `reserved` slots (of `universe` in all) taken in every run.

    Runs-needed is max over slot sets S of ceil(items with mask within S / |S|) (Hall's
    condition for a b-matching); only unions of masks can be the worst S.
    """
    counts = Counter(masks)
    if not counts:
        return 0
    slots = sorted({s for mask in counts for s in mask})
    index = {s: i for i, s in enumerate(slots)}
    bit_counts: Counter[int] = Counter()
    for mask, n in counts.items():
        bit_counts[_bits(mask, index)] += n
    unions = {0}
    for bits in bit_counts:
        unions |= {u | bits for u in unions}
    best = 0
    for union in unions - {0}:
        inside = sum(n for mask, n in bit_counts.items() if mask & ~union == 0)
        best = max(best, math.ceil(inside / union.bit_count()))
    if reserved:
        total = sum(counts.values())
        width = (universe if universe is not None else len(slots)) - reserved
        best = max(best, math.ceil(total / width))
    return best


@dataclass(frozen=True)
class PmuBound:
    """A PMU's lower bound and the terms it is made of (shown to users: why this many runs)."""

    pmu: str
    taken_alone: int
    counters: int
    registers: int
    fixed: int
    unconstrained: int

    @property
    def runs(self) -> int:
        return max(
            self.taken_alone + max(self.counters, self.registers), self.fixed, self.unconstrained
        )


def pmu_bound(pmu: Pmu, events: list[Event]) -> PmuBound:
    """The lower bound of one PMU's events."""
    generic = [e for e in events if e.counters]
    alone = [e for e in generic if e.taken_alone]
    normal = [e for e in generic if not e.taken_alone]
    fixed_demand = Counter(e.fixed for e in events if e.fixed is not None)
    counters = hall_bound((e.counters for e in normal), pmu.reserved, pmu.counters)
    pairs = sum(e.pair for e in normal)
    if pairs:
        width = sum(2 if e.pair else 1 for e in normal)
        counters = max(
            counters,
            math.ceil(width / max(pmu.generic, 1)),
            math.ceil(pairs / max(rules.pair_width(pmu), 1)),
        )
    return PmuBound(
        pmu=pmu.name,
        taken_alone=len(alone),
        counters=counters,
        registers=hall_bound(e.registers for e in normal if e.registers),
        fixed=max(fixed_demand.values(), default=0),
        unconstrained=1 if any(not e.constrained for e in events) else 0,
    )


def plan_bound(pmus: dict[str, Pmu], events: list[Event]) -> int:
    """The lower bound of a whole catalog: every PMU counts in every run, so the largest."""
    by_pmu: dict[str, list[Event]] = {}
    for event in events:
        by_pmu.setdefault(event.pmu, []).append(event)
    return max((pmu_bound(pmus[name], evs).runs for name, evs in by_pmu.items()), default=0)
