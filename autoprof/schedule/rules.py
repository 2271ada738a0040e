"""The counter rules of one run, written once: the packer packs to them, metric co-scheduling
fits runs with them (`assign`), and plan validation checks the packer's witness with them
(`problems`). Per PMU, events counted together in one run must satisfy:
- generic counters: a distinct allowed counter per event, `Pmu.reserved` of them taken by
  someone else (the NMI watchdog) in every run, anywhere;
- pairs (AMD's merge events, `Event.pair`): an even counter of the event's and its odd
  neighbour, so s single and p pair events need s + 2p counters, and p <= the free pairs;
- TakenAlone: no other generic counter of its PMU in use;
- shared registers (offcore_rsp, ldlat, frontend MSRs): a distinct one of the event's each;
- fixed counters: one event each;
and, over the whole run, an event with a `leader` comes after it (a topdown group).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from typing import TypeVar

from autoprof.catalog.model import Event, Pmu

Slot = TypeVar("Slot", int, str)  # a counter number or a shared register's MSR


def match(
    masks: Sequence[frozenset[Slot]], slots: set[Slot] | None = None
) -> dict[int, Slot] | None:
    """A distinct slot per item, each from its mask (and within `slots` when given): Kuhn's
    augmenting paths, as a run holds a handful of events. None when none exists."""
    owner: dict[Slot, int] = {}
    allowed = [m if slots is None else m & slots for m in masks]

    def augment(i: int, seen: set[Slot]) -> bool:
        for slot in sorted(allowed[i]):
            if slot in seen:
                continue
            seen.add(slot)
            if slot not in owner or augment(owner[slot], seen):
                owner[slot] = i
                return True
        return False

    for i in range(len(masks)):
        if not augment(i, set()):
            return None
    return {i: slot for slot, i in owner.items()}


def pair_width(pmu: Pmu) -> int:
    """Pair events one run can hold: the even/odd pairs left when the reserved counters each
    break one (the watchdog's counter on AMD)."""
    return max(pmu.counters // 2 - pmu.reserved, 0)


def pair_counters(pmu: Pmu) -> list[int]:
    """The even counters the packer gives pair events: the reserved counters are taken from
    the top, so only pairs below them."""
    return list(range(0, 2 * pair_width(pmu), 2))


def _generic_assignment(pmu: Pmu, generic: list[Event]) -> dict[int, int] | None:
    """Counter per generic event (index -> counter) with room for the reserved counters."""
    pairs = [i for i, e in enumerate(generic) if e.pair]
    singles = [i for i, e in enumerate(generic) if not e.pair]
    every = frozenset(range(pmu.counters))
    evens = [c for c in range(0, pmu.counters - 1, 2)]
    for chosen in itertools.permutations(evens, len(pairs)):
        if any(c not in generic[i].counters for i, c in zip(pairs, chosen, strict=True)):
            continue
        free = set(every) - set(chosen) - {c + 1 for c in chosen}
        masks = [generic[i].counters for i in singles] + [every] * pmu.reserved
        found = match(masks, free)
        if found is not None:
            placed = dict(zip(pairs, chosen, strict=True))
            placed.update({singles[k]: c for k, c in found.items() if k < len(singles)})
            return placed
    return None


def assign(pmu: Pmu, events: list[Event]) -> dict[int, str | None] | None:
    """The counter of each of one PMU's events in one run (index -> ``gpN``, ``fixedN`` or
    None), or None when the rules forbid counting them together."""
    if pmu.unconstrained:
        return dict.fromkeys(range(len(events)))
    index = [i for i, e in enumerate(events) if e.counters]
    generic = [events[i] for i in index]
    if any(e.taken_alone for e in generic) and len(generic) > 1:
        return None
    width = sum(2 if e.pair else 1 for e in generic) + (pmu.reserved if generic else 0)
    if width > pmu.counters or sum(e.pair for e in generic) > pair_width(pmu):
        return None
    with_regs = [e.registers for e in generic if e.registers]
    if match(with_regs) is None:
        return None
    fixed = [e.fixed for e in events if e.fixed is not None]
    if len(fixed) != len(set(fixed)):
        return None
    counters = _generic_assignment(pmu, generic)
    if counters is None:
        return None
    placed: dict[int, str | None] = {index[k]: f"gp{c}" for k, c in counters.items()}
    for i, event in enumerate(events):
        if not event.counters:
            placed[i] = None if event.fixed is None else f"fixed{event.fixed}"
    return placed


def problems(pmu: Pmu, placed: list[tuple[Event, str | None]]) -> list[str]:
    """Why one PMU's events, on the counters the packer chose, cannot count in one run
    (empty when they can)."""
    if pmu.unconstrained:
        return []
    name, found = pmu.name, []
    generic = [(e, c) for e, c in placed if e.counters]
    taken: Counter[str] = Counter()
    for event, counter in generic:
        number = int(counter[2:]) if counter and counter[2:].isdigit() else -1
        if counter is None or not counter.startswith("gp") or number not in event.counters:
            found.append(f"{name}: {event.name} placed on {counter}, not allowed")
        taken[f"gp{number}"] += 1
        if event.pair:
            taken[f"gp{number + 1}"] += 1
            if number % 2 or number + 1 >= pmu.counters:
                found.append(f"{name}: pair event {event.name} on {counter}, no odd neighbour")
    found += [f"{name}: counter {c} used {n} times" for c, n in taken.items() if n > 1]
    pairs = sum(e.pair for e, _ in generic)
    if pairs > pair_width(pmu):
        found.append(f"{name}: {pairs} pair events, at most {pair_width(pmu)} fit")
    alone = [e for e, _ in generic if e.taken_alone]
    if alone and len(generic) > 1:
        found.append(f"{name}: TakenAlone {alone[0].name} shares the counters")
    elif assign(pmu, [e for e, _ in placed]) is None:
        found.append(f"{name}: {len(generic)} events do not fit the counters and registers")
    fixed = [(e, c) for e, c in placed if e.fixed is not None]
    per_fixed = Counter(e.fixed for e, _ in fixed)
    found += [f"{name}: fixed counter {f} holds {n} events" for f, n in per_fixed.items() if n > 1]
    found += [
        f"{name}: {e.name} on {c}, needs fixed{e.fixed}" for e, c in fixed if c != f"fixed{e.fixed}"
    ]
    return found


def leader_problems(events: Sequence[Event]) -> list[str]:
    """Events of a run that come before (or without) the leader of their group."""
    seen: set[tuple[str, str]] = set()
    found = []
    for event in events:
        if event.leader and (event.pmu, event.leader) not in seen:
            found.append(f"{event.name} is not after its group leader {event.leader}")
        seen.add(event.key)
    return found
