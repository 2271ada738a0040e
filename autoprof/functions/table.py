"""Samples of several events -> one row per function (or dso, or process) with, per event, the
samples weighted by their period (what `perf report` calls the event count), the plain sample
count and the share of the event's total; plus ratios of events sampled on both sides.

A sample counts for its leaf frame only ("self", as `perf report --no-children`), so every
event's column sums to perf's own total for that event.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from autoprof.errors import AutoprofError
from autoprof.flame.fold import Folded
from autoprof.perf.script import Sample

BY = ("symbol", "dso", "comm")
NO_FRAME = "[unknown]"  # a sample perf printed no frame for
# perf's event modifiers (`cycles:u`, `cpu-clock:ppp`): not part of the event's name for ratios
_MODIFIERS = set("ukhHGIpPSDWe")
# (numerator, denominator, column): ratios that mean something per function
RATIOS = (
    ("cycles", "instructions", "cycles/instr"),
    ("cache-misses", "cache-references", "cache-misses/ref"),
    ("branch-misses", "branches", "branch-misses/branch"),
    ("branch-misses", "branch-instructions", "branch-misses/branch"),
    ("L1-dcache-load-misses", "L1-dcache-loads", "L1d-misses/load"),
    ("LLC-load-misses", "LLC-loads", "LLC-misses/load"),
    ("dTLB-load-misses", "dTLB-loads", "dTLB-misses/load"),
)


@dataclass
class Cell:
    period: int = 0  # samples weighted by their period
    samples: int = 0


@dataclass
class Row:
    key: str  # function, dso or process name
    dso: str  # the function's dso ("" for --by comm; for --by dso the key itself)
    cells: dict[str, Cell] = field(default_factory=dict)  # event -> its weight here

    def period(self, event: str) -> int:
        cell = self.cells.get(event)
        return cell.period if cell else 0


@dataclass
class Table:
    by: str
    events: list[str]  # in the order perf printed them first
    rows: list[Row]  # sorted by the first (or chosen) event, heaviest first
    totals: dict[str, Cell]
    ratios: list[tuple[str, str, str]]  # the RATIOS whose two events were both sampled
    # what a weight counts: "samples" (x period) for a recording, a trace's "instructions" or
    # "cycles" (every one of them, no sampling) for a kept trace graph
    counted: str = "samples"

    def share(self, row: Row, event: str) -> float:
        total = self.totals[event].period
        return 100.0 * row.period(event) / total if total else 0.0

    def ratio(self, row: Row, numerator: str, denominator: str) -> float | None:
        below = row.period(denominator)
        return row.period(numerator) / below if below else None


def base_event(name: str) -> str:
    """`cycles:u` -> `cycles`; tracepoints (`sched:sched_switch`) keep their name."""
    head, _, tail = name.rpartition(":")
    return head if head and tail and set(tail) <= _MODIFIERS else name


# the events whose sample period is time, not a count: perf samples them every N nanoseconds
TIME_EVENTS = frozenset({"cpu-clock", "task-clock"})


def shown_name(event: str) -> str:
    """An event's column on the terminal, with its weight's unit where it has one
    (`cpu-clock (ns)`); a count has none. The CSV keeps the bare name."""
    return f"{event} (ns)" if base_event(event) in TIME_EVENTS else event


def _dso_name(dso: str) -> str:
    return dso.rsplit("/", 1)[-1] if dso else NO_FRAME


def _key(sample: Sample, by: str) -> tuple[str, str]:
    if by == "comm":
        return sample.comm, ""
    if not sample.frames:
        return NO_FRAME, ""
    leaf = sample.frames[-1]
    dso = _dso_name(leaf.dso)
    return (dso, dso) if by == "dso" else (leaf.name, dso)


def build(
    samples: Iterable[Sample],
    by: str = "symbol",
    sort: str | None = None,
    order: Iterable[str] = (),
) -> Table:
    """One row per function (`by`), every event's weight; heaviest first by `sort` (an event,
    default the first of `order`, the events as recorded, or else the first one met)."""
    if by not in BY:
        raise AutoprofError(f"unknown grouping {by!r} (choose {', '.join(BY)})")
    rows: dict[tuple[str, str], Row] = {}
    totals: dict[str, Cell] = {}
    for sample in samples:
        event = sample.event or "samples"
        key = _key(sample, by)
        row = rows.get(key)
        if row is None:
            row = rows[key] = Row(*key)
        for cells in (row.cells, totals):
            cell = cells.get(event)
            if cell is None:
                cell = cells[event] = Cell()
            cell.period += sample.period
            cell.samples += 1
    return assemble(by, list(rows.values()), totals, sort, order)


def from_folded(folded: Folded, by: str = "symbol", sort: str | None = None) -> Table:
    """The table of folded stacks (a kept trace flame graph): each stack's weight counts for its
    leaf, the root frame (the traced program) is the dso. A trace weighs every instruction, so
    its sample count is its weight, except for cycles, where the instructions are not kept."""
    if by not in BY:
        raise AutoprofError(f"unknown grouping {by!r} (choose {', '.join(BY)})")
    event = folded.event or "samples"
    rows: dict[tuple[str, str], Row] = {}
    total = Cell()
    for stack, weight in folded.stacks.items():
        dso = stack[0] if stack else NO_FRAME
        key = (dso, dso) if by in ("dso", "comm") else (stack[-1] if stack else NO_FRAME, dso)
        row = rows.get(key)
        if row is None:
            row = rows[key] = Row(*key)
        cell = row.cells.setdefault(event, Cell())
        count = folded.samples.get(stack, 0 if event == "cycles" else weight)
        for target in (cell, total):
            target.period += weight
            target.samples += count
    table = assemble(by, list(rows.values()), {event: total} if rows else {}, sort, [event])
    table.counted = folded.event or "samples"
    return table


def assemble(
    by: str, rows: list[Row], totals: dict[str, Cell], sort: str | None, order: Iterable[str]
) -> Table:
    """A Table from its rows and per-event totals (from samples, or read back from the store)."""
    order = list(order)
    events = [e for e in order if e in totals] + [e for e in totals if e not in order]
    if not events:
        raise AutoprofError("no samples to report")
    if sort is not None and sort not in totals:
        raise AutoprofError(f"--sort {sort}: not sampled (events: {', '.join(events)})")
    first = sort or events[0]
    ranked = sorted(rows, key=lambda r: (-r.period(first), r.key, r.dso))
    names = {base_event(e): e for e in events}
    ratios, seen = [], set()
    for num, den, label in RATIOS:
        if num in names and den in names and label not in seen:
            ratios.append((names[num], names[den], label))
            seen.add(label)
    return Table(by, events, ranked, totals, ratios)
