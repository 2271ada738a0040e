"""The scheduler: optimal on every real platform, valid on random catalogs, and a validator
that catches bad plans."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoprof.catalog import intel
from autoprof.catalog.intel import IntelOptions
from autoprof.catalog.model import Catalog, Event, Pmu
from autoprof.errors import AutoprofError
from autoprof.schedule import Placement, Run, schedule
from autoprof.schedule.bounds import hall_bound, plan_bound
from autoprof.schedule.coloring import edge_colouring
from autoprof.schedule.plan import validate
from autoprof.testing.cli import process
from tests.conftest import INTEL_DIR

PLATFORMS = (
    sorted(intel.platform_cpu_ids(INTEL_DIR).items())
    if (INTEL_DIR / "mapfile.csv").is_file()
    else []
)
OPTION_SETS = {
    "default": IntelOptions(),
    "smt-off": IntelOptions(smt=False),
    "reserve-1": IntelOptions(reserve=1),
}


@pytest.mark.slow
@pytest.mark.parametrize("options", list(OPTION_SETS), ids=list(OPTION_SETS))
@pytest.mark.parametrize(("platform", "cpu"), PLATFORMS, ids=[p for p, _ in PLATFORMS])
def test_every_platform_meets_its_bound(intel_dir, platform, cpu, options):
    catalog = intel.load(intel_dir, cpu, OPTION_SETS[options])
    plan = schedule(catalog)  # validates before returning
    validate(plan, catalog)
    assert len(plan) == plan.lower_bound == plan_bound(catalog.pmus, catalog.events)
    assert sum(len(r.placements) for r in plan.runs) == len(catalog.events)


def test_hall_bound_by_hand():
    assert hall_bound([frozenset({0})] * 3) == 3
    # 4 events on {0,1} and 2 on {0}: {0} needs 2 runs, {0,1} needs 6/2 = 3.
    assert hall_bound([frozenset({0, 1})] * 4 + [frozenset({0})] * 2) == 3
    # one of 4 counters reserved: 7 events on any counter need ceil(7 / 3) runs.
    assert hall_bound([frozenset(range(4))] * 7, reserved=1, universe=4) == 3
    assert hall_bound([]) == 0


@st.composite
def catalogs(draw):
    counters = draw(st.integers(2, 8))
    fixed = draw(st.integers(0, 3))
    reserved = draw(st.integers(0, 1))
    pmu = Pmu("cpu", generic=counters - reserved, fixed=fixed, reserved=reserved)
    masks = st.sets(st.integers(0, counters - 1), min_size=1).map(frozenset)
    registers = st.sampled_from(
        [
            frozenset(),
            frozenset(),
            frozenset({"0x1a6", "0x1a7"}),
            frozenset({"0x1a6"}),
            frozenset({"0x3f6"}),
            frozenset({"0x3f7"}),
        ]
    )
    events = []
    for i in range(draw(st.integers(1, 60))):
        kind = draw(st.sampled_from(["generic"] * 6 + ["alone", "fixed"]))
        if kind == "fixed" and fixed:
            events.append(Event(f"F{i}", "cpu", f"f{i}", fixed=draw(st.integers(0, fixed - 1))))
        else:
            events.append(
                Event(
                    f"G{i}",
                    "cpu",
                    f"g{i}",
                    counters=draw(masks),
                    registers=draw(registers),
                    taken_alone=kind == "alone",
                )
            )
    events.append(Event("task-clock", "software", "task-clock"))
    pmus = {"cpu": pmu, "software": Pmu("software", unconstrained=True)}
    return Catalog("synthetic", pmus, events)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(catalogs())
def test_random_catalogs_are_packed_optimally(catalog):
    plan = schedule(catalog)
    placed = [e.key for run in plan.runs for e in run.events]
    assert sorted(placed) == sorted(e.key for e in catalog.events)
    # The packer is exact (Hall + König): a plan longer than its bound is a bug.
    assert len(plan) == plan.lower_bound


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=80))
def test_edge_colouring_uses_max_degree_colours(pairs):
    edges = [(("l", a), ("r", b)) for a, b in pairs]
    degree: dict = {}
    for u, v in edges:
        degree[u] = degree.get(u, 0) + 1
        degree[v] = degree.get(v, 0) + 1
    colours = max(degree.values(), default=0)
    result = edge_colouring(edges, colours)
    seen = set()
    for (u, v), c in zip(edges, result, strict=True):
        assert 0 <= c < colours
        assert (u, c) not in seen and (v, c) not in seen
        seen |= {(u, c), (v, c)}


def _breakpoints(n: int) -> Catalog:
    pmu = Pmu("breakpoint", generic=4)
    events = [
        Event(f"mem:{i:#x}:w", "breakpoint", f"mem:{i:#x}:w", counters=frozenset(range(4)))
        for i in range(n)
    ]
    return Catalog("x", {"breakpoint": pmu}, events)


def test_validator_rejects_overfull_and_incomplete_plans():
    catalog = _breakpoints(12)
    plan = schedule(catalog)
    assert len(plan) == 3
    moved = plan.runs[1].placements.pop()
    plan.runs[0].placements.append(Placement(moved.event, "gp0"))
    with pytest.raises(AutoprofError, match="invalid plan"):
        validate(plan, catalog)
    plan = schedule(catalog)
    plan.runs.append(Run([plan.runs[0].placements[0]]))
    with pytest.raises(AutoprofError, match="placed 2 times"):
        validate(plan, catalog)


def test_schedule_json_contract(intel_dir):
    proc = process(
        "schedule", "--json", "--events-dir", str(intel_dir), "--cpu", "GenuineIntel-6-55-4",
        check=True,
    )  # fmt: skip
    data = json.loads(proc.stdout)
    assert set(data) == {"cpu", "lower_bound", "runs", "excluded"}
    assert data["cpu"] == "GenuineIntel-6-55-4" and len(data["runs"]) == data["lower_bound"]
    events = [e for r in data["runs"] for e in r["events"]]
    assert all(set(e) - {"leader"} == {"name", "pmu", "counter", "spec"} for e in events)
    assert all(set(r) == {"events", "perf_events"} for r in data["runs"])
    assert all(set(x) == {"name", "pmu", "reason"} for x in data["excluded"])


def _fits(events: list[Event], pmu: Pmu) -> bool:
    """Brute force, independent of the packer and the validator: one run can hold `events`."""
    generic = [e for e in events if e.counters]
    fixed = [e.fixed for e in events if e.fixed is not None]
    if len(fixed) != len(set(fixed)):
        return False
    if any(e.taken_alone for e in generic) and len(generic) > 1:
        return False
    slots = range(pmu.generic + pmu.reserved)
    needed = len(generic) + (pmu.reserved if generic else 0)
    if needed > len(slots):
        return False
    masks = [e.counters for e in generic] + [frozenset(slots)] * (pmu.reserved if generic else 0)
    if not any(
        all(c in mask for c, mask in zip(choice, masks, strict=True))
        for choice in itertools.permutations(slots, len(masks))
    ):
        return False
    wants = [e.registers for e in generic if e.registers]
    registers = sorted(set().union(*wants)) if wants else []
    return not wants or any(
        all(r in want for r, want in zip(choice, wants, strict=True))
        for choice in itertools.permutations(registers, len(wants))
    )


def _partitions(items: list):
    """Every set partition of `items` (Bell(n) of them: fine for n <= 7)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for partition in _partitions(rest):
        yield [[first], *partition]
        for i in range(len(partition)):
            yield [*partition[:i], [first, *partition[i]], *partition[i + 1 :]]


@st.composite
def tiny_catalogs(draw):
    counters = draw(st.integers(1, 3))
    reserved = draw(st.integers(0, 1)) if counters > 1 else 0
    fixed = draw(st.integers(0, 1))
    pmu = Pmu("cpu", generic=counters - reserved, fixed=fixed, reserved=reserved)
    masks = st.sets(st.integers(0, counters - 1), min_size=1).map(frozenset)
    registers = st.sampled_from([frozenset(), frozenset({"a", "b"}), frozenset({"a"})])
    events = []
    for i in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(["generic"] * 4 + ["alone", "fixed"]))
        if kind == "fixed" and fixed:
            events.append(Event(f"F{i}", "cpu", f"f{i}", fixed=0))
        else:
            mask = draw(masks)
            events.append(
                Event(
                    f"G{i}",
                    "cpu",
                    f"g{i}",
                    counters=mask,
                    registers=draw(registers),
                    taken_alone=kind == "alone",
                )
            )
    return Catalog("tiny", {"cpu": pmu}, events)


@pytest.mark.slow  # brute force over many hypothesis catalogs
@settings(max_examples=150, deadline=None)
@given(tiny_catalogs())
def test_tiny_catalogs_need_exactly_the_brute_force_minimum(catalog):
    """A bound that is too high would pass `len(plan) == lower_bound`; the true minimum, found
    by trying every partition of the events into runs, would not."""
    pmu = catalog.pmus["cpu"]
    minimum = min(
        len(partition)
        for partition in _partitions(catalog.events)
        if all(_fits(group, pmu) for group in partition)
    )
    plan = schedule(catalog)
    assert (len(plan), plan.lower_bound) == (minimum, minimum)


def test_the_schedule_table_is_a_renderer_that_writes_to_the_terminal_or_a_file(tmp_path):
    """The table `autoprof schedule` prints comes from ScheduleRenderer; for a file (no
    console) the same text, unwrapped, which the one writer puts there."""
    from rich.console import Console

    from autoprof.schedule.render import Scheduled, ScheduleRenderer
    from autoprof.util.renderer import write

    data = Scheduled(_breakpoints(6), schedule(_breakpoints(6)), 0.002)
    out = tmp_path / "plan.txt"
    assert write(ScheduleRenderer().render(data), out) == out
    text = out.read_text()
    assert "x: 6 events in 2 runs (lower bound 2, optimal)" in text
    row = next(line for line in text.splitlines() if "breakpoint" in line)
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert cells[:5] == ["breakpoint", "6", "4+0f", "2", "counters 2"]
    shown = ScheduleRenderer(Console(width=200)).render(data)
    assert shown.splitlines()[0] == text.splitlines()[0]
