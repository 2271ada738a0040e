"""Planning has one home: the catalog of the machine planned for -> the plan steps -> the checks.

`autoprof schedule`, `autoprof profile` (and its --dry-run), `autoprof bench`, the queue worker
and the web's jobs all plan here, so what `schedule` prints is what `profile` runs (`schedule
--json` and `profile --dry-run --json` print the same bytes).

    planned = plan(request, note=print)         # catalog_for, then every step of STEPS
    warnings = check(request, planned)          # this machine can run it (profile only)

Each step takes the draft plan and returns the next one (pyinstrument's processors); `STEPS`
lists them in their order, and a new rule of planning is one more step there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from autoprof import emulate
from autoprof.catalog import host, machine, modifiers
from autoprof.catalog.encoding import HYBRID_CORE_PMUS
from autoprof.catalog.model import Catalog, Event, Exclusion
from autoprof.errors import AutoprofError
from autoprof.perf import labels as perf_labels
from autoprof.perf import launch
from autoprof.run import attach, pinning, preflight
from autoprof.run.options import CORE_TYPES
from autoprof.run.request import Request
from autoprof.schedule import rules, schedule
from autoprof.schedule.bounds import plan_bound
from autoprof.schedule.plan import SYSTEM_WIDE_ONLY, Placement, Plan, run_problems

if TYPE_CHECKING:
    from autoprof.metrics.plan import MetricPlan


def _ignore(_: str) -> None:
    return None


@dataclass(frozen=True)
class Planned:
    """A request's plan: the events it measures (`catalog`), their runs, and for --metrics the
    metric plan (what each metric needs, which are measured in one run)."""

    catalog: Catalog
    plan: Plan
    metrics: MetricPlan | None = None


@dataclass(frozen=True)
class Draft:
    """A plan in the making: what each step reads and returns."""

    request: Request
    catalog: Catalog
    plan: Plan | None = None  # made by `scheduled` (or with the metric plan)
    metrics: MetricPlan | None = None
    note: Callable[[str], None] = _ignore  # what the steps say of the plan (left-out metrics)
    # a hardware anchor planned around (`anchor_counter`): the event, the counter it takes and
    # the catalog as it was before
    anchored: tuple[Event, str, Catalog] | None = None


Step = Callable[[Draft], Draft]


def machine_catalog(request: Request) -> Catalog:
    """The catalog of the machine the request names (this one, or --cpu's) with its selection
    (metrics use deprecated and experimental events too); refuses a --reserve that the CPU's
    counters cannot honour."""
    selection = request.selection
    if request.by_metrics:
        selection = replace(selection, deprecated=True, experimental=True)
    catalog = host.build_catalog(
        events_dir=request.events_dir,
        cpu=request.cpu,
        smt=request.smt,
        counters=request.counters,
        probe=request.probe,
        **selection.to_json(),
    )
    preflight.check_reserve(catalog, selection.reserve)
    return catalog


def catalog_for(request: Request, note: Callable[[str], None] = _ignore) -> Catalog:
    """`machine_catalog`; every event of this machine means every event its kernel can count
    (a VM without a PMU: no hardware events). `note` hears what the catalog says of the
    machine (a CPU no event data knows, no hardware PMU)."""
    catalog = machine_catalog(request)
    if not request.events and not request.by_metrics and not request.cpu:
        catalog = host.countable(catalog)
    if catalog.note:
        note(catalog.note)
    return catalog


def chosen_events(draft: Draft) -> Draft:
    """The events asked for by name (-e), and the anchor; every event when none is named (an
    emulated profile's catalog holds the chosen events already)."""
    request, anchor = draft.request, draft.request.options.anchor
    if request.by_metrics or not request.events or request.options.emulate:
        return draft
    names = [*request.events, *([anchor] if anchor and anchor not in request.events else [])]
    return replace(draft, catalog=host.resolve_events(draft.catalog, names))


def metric_events(draft: Draft) -> Draft:
    """For --metrics: exactly the events the metrics need (and the anchor), co-scheduled so
    each metric's events share a run where they can. A metric that reads an event this
    profile cannot count (a system-wide-only PMU without -a, a hardware event on a machine
    without a PMU) is left out, in one note per reason."""
    request = draft.request
    if not request.by_metrics:
        return draft
    from autoprof.metrics import catalog as metric_catalog  # --metrics only (~8 ms of a start)
    from autoprof.metrics.plan import plan_metrics, unavailable_pmus

    metrics = metric_catalog.for_machine(request.events_dir, request.cpu, request.metrics_files)
    chosen = metrics.select(list(request.metrics) or ["all"])
    for text in metrics.notes:
        draft.note(text)
    catalog = draft.catalog
    smt_on = host.planned_smt(request.smt, request.cpu)
    directory = host.events_dir(request.events_dir)
    retire = metric_catalog.retire_latencies(directory, metrics.cpu) if directory else {}
    anchor = request.options.anchor
    here = bool(request.cpu) or machine.has_core_pmu()  # --cpu: planned for that machine
    unavailable = unavailable_pmus(catalog, request.options.system_scope, here)
    planned = plan_metrics(
        catalog, chosen, smt_on, request.consistent, retire, [anchor] if anchor else [], unavailable
    )
    by_reason: dict[str, list[str]] = {}
    for name, missing in planned.unmeasurable.items():
        by_reason.setdefault(missing[0].split(": ", 1)[-1], []).append(name)
    for reason, names in by_reason.items():
        what = f"{len(names)} metrics" if len(names) > 1 else "1 metric"
        draft.note(f"{what} not measured, {reason}: {', '.join(names)}")
    return replace(draft, catalog=planned.catalog, plan=planned.plan, metrics=planned)


def task_bound(draft: Draft) -> Draft:
    """A profile that is not system-wide (a command's, a process's) leaves out the events of
    PMUs that count system-wide only (Intel's uncore_*, AMD's amd_l3/amd_df/amd_umc, Arm's
    uncore: the kernel refuses a task-bound event there), each with the reason; an event
    chosen by name there is refused instead, in one line."""
    catalog = draft.catalog
    wide = {n for n, p in catalog.pmus.items() if p.system_wide}
    dropped = [e for e in catalog.events if e.pmu in wide]
    if draft.request.options.system_scope or not dropped:
        return draft
    why = f"{dropped[0].pmu} counts system-wide only (the kernel refuses task-bound events)"
    if draft.request.events:
        raise AutoprofError(f"{dropped[0].name}: {why}: profile it with -a")
    kept = Catalog(
        catalog.cpu,
        {n: p for n, p in catalog.pmus.items() if n not in wide},
        [e for e in catalog.events if e.pmu not in wide],
        catalog.excluded + [Exclusion(e.name, e.pmu, SYSTEM_WIDE_ONLY) for e in dropped],
        catalog.source,
        catalog.note,
    )
    return replace(draft, catalog=kept)


def core_type(draft: Draft) -> Draft:
    """--core-type: the command runs on one kind of core of a hybrid CPU, so only that core
    PMU's events can count (cpu_core or cpu_atom); the other core PMUs' events are left out,
    each with the reason (one chosen by name is refused instead). A CPU without that PMU (not
    hybrid) is refused in one line."""
    kind = draft.request.options.core_type
    if kind is None:
        return draft
    catalog, keep = draft.catalog, CORE_TYPES[kind]
    if keep not in catalog.pmus:
        raise AutoprofError(f"--core-type {kind}: {catalog.cpu} has no {keep} PMU (not hybrid)")
    other = {n for n in catalog.pmus if n in HYBRID_CORE_PMUS and n != keep}
    dropped = [e for e in catalog.events if e.pmu in other]
    why = f"counts on the other cores (--core-type {kind} runs the command on {keep}'s)"
    if draft.request.events and dropped:
        raise AutoprofError(f"{dropped[0].name}: {dropped[0].pmu} {why}")
    kept = Catalog(
        catalog.cpu,
        {n: p for n, p in catalog.pmus.items() if n not in other},
        [e for e in catalog.events if e.pmu not in other],
        catalog.excluded + [Exclusion(e.name, e.pmu, f"{e.pmu} {why}") for e in dropped],
        catalog.source,
        catalog.note,
    )
    return replace(draft, catalog=kept)


def user_mode(draft: Draft) -> Draft:
    """--user: every event counted in user mode only (`modifiers.user_only`); an emulator
    counts nothing else (its events are named NAME:u already)."""
    if not draft.request.options.user or draft.request.options.emulate:
        return draft
    return replace(draft, catalog=modifiers.user_only(draft.catalog))


def scheduled(draft: Draft) -> Draft:
    """The events packed into the fewest runs without multiplexing (`schedule`)."""
    if not draft.catalog.events:
        raise AutoprofError("no events to measure")
    return draft if draft.plan is not None else replace(draft, plan=schedule(draft.catalog))


def _anchor(draft: Draft) -> Event | None:
    """The event --anchor names (NAME:u with --user); None without --anchor."""
    name = draft.request.options.anchor
    if not name:
        return None
    if draft.request.options.user:
        name = modifiers.named(name, modifiers.USER)
    found = [e for e in draft.catalog.events if name in (e.name, e.spec)]
    if not found:
        raise AutoprofError(f"anchor event {name} is not an event of this machine")
    return found[0]


def anchor_counter(draft: Draft) -> Draft:
    """A hardware anchor (--anchor INST_RETIRED.ANY, cycles on AMD or Arm) takes one counter in
    every run, so the other events are planned around it: a fixed-counter anchor holds its fixed
    counter (the events that need that one are left out, each with the reason); a generic one
    takes a generic counter of its PMU in every run, as a reserved counter does (the TakenAlone
    events, which want every counter, are left out). `anchor_event` then puts it in every run.
    A software anchor needs no counter: nothing to do here."""
    anchor = _anchor(draft)
    if anchor is None or draft.catalog.pmus[anchor.pmu].unconstrained:
        return draft
    pmu = draft.catalog.pmus[anchor.pmu]
    if anchor.leader or anchor.pair or anchor.registers or anchor.taken_alone:
        raise AutoprofError(
            f"anchor event {anchor.name} cannot count in every run (it leads a group, takes "
            "two counters, a shared register or the whole PMU): choose another, such as "
            "task-clock"
        )
    if draft.request.by_metrics:
        raise AutoprofError(
            f"anchor event {anchor.name} needs a {anchor.pmu} counter in every run, which a "
            "metric plan does not leave: with --metrics, anchor on a software event such as "
            "task-clock"
        )
    if anchor.fixed is not None:
        taken = f"{pmu.name}'s fixed{anchor.fixed}"
        clash = [e for e in draft.catalog.events if e.fixed == anchor.fixed and e.pmu == pmu.name]
    else:
        taken = f"one of {pmu.name}'s {pmu.generic} generic counters"
        clash = [e for e in draft.catalog.events if e.pmu == pmu.name and e.taken_alone]
        if pmu.generic < 2 and any(e.counters for e in draft.catalog.events if e != anchor):
            raise AutoprofError(
                f"anchor event {anchor.name} would take the last free generic counter of "
                f"{pmu.name} in every run, leaving none for its other events: choose a "
                "fixed-counter or software anchor"
            )
        pmu = replace(pmu, generic=pmu.generic - 1, reserved=pmu.reserved + 1)
    clash = [e for e in clash if e != anchor]
    named = [e for e in clash if e.name in draft.request.events]
    why = (
        f"needs {taken}, which the anchor {anchor.name} holds in every run"
        if anchor.fixed is not None
        else f"takes every generic counter of {anchor.pmu} (TakenAlone), and the anchor "
        f"{anchor.name} holds one in every run"
    )
    if named:
        raise AutoprofError(f"{named[0].name} {why}")
    catalog = draft.catalog
    kept = Catalog(
        catalog.cpu,
        catalog.pmus | {pmu.name: pmu},
        [e for e in catalog.events if e != anchor and e not in clash],
        catalog.excluded + [Exclusion(e.name, e.pmu, why) for e in clash],
        catalog.source,
        catalog.note,
    )
    return replace(draft, catalog=kept, anchored=(anchor, taken, catalog))


def anchor_event(draft: Draft) -> Draft:
    """The anchor (--anchor) joins every run of the plan, as perf then counts it: a software
    one beside the others, a hardware one on the counter `anchor_counter` kept for it, each
    run checked again against the PMU's real counters. What a hardware anchor costs, in runs,
    is noted. `schedule --json` lists the anchor in every run, as `profile` runs it."""
    assert draft.plan is not None  # after `scheduled`
    plan = draft.plan
    if draft.anchored is None:
        anchor = _anchor(draft)
        if anchor is None:
            return draft
        for run in plan.runs:  # a metric plan has it in every run already
            if anchor not in run.events:
                run.placements.append(Placement(anchor, None))
        return draft
    anchor, taken, catalog = draft.anchored
    pmu = catalog.pmus[anchor.pmu]
    for number, run in enumerate(plan.runs, 1):
        others = [p for p in run.placements if p.event.pmu != pmu.name]
        events = [p.event for p in run.placements if p.event.pmu == pmu.name] + [anchor]
        counters = rules.assign(pmu, events)
        if counters is None:
            raise AutoprofError(
                f"anchor event {anchor.name} finds no counter of {pmu.name} free in run "
                f"{number} (it counts on counters {sorted(anchor.counters)} only): choose "
                "another anchor, such as task-clock"
            )
        run.placements[:] = others + [Placement(e, counters[i]) for i, e in enumerate(events)]
    problems = [p for run in plan.runs for p in run_problems(run, catalog.pmus)]
    if problems:
        raise AssertionError(f"anchored plan invalid: {problems[0]}")
    plain = plan_bound(catalog.pmus, catalog.events)
    runs = len(plan.runs)
    cost = (
        f"as many as without it ({plain})"
        if runs <= plain
        else f"{runs - plain} more than the {plain} without it"
    )
    earlier = set(catalog.excluded)  # thousands on a big catalog: a list's `in` was seconds
    left = [x for x in draft.catalog.excluded if x not in earlier]
    shown = ", ".join(x.name for x in left[:3]) + (", ..." if len(left) > 3 else "")
    draft.note(
        f"anchor {anchor.name} takes {taken} in every run: "
        f"{runs} run{'s' if runs > 1 else ''}, {cost}"
        + (f"; {len(left)} left out, each {left[0].reason}: {shown}" if left else "")
    )
    kept = Catalog(
        catalog.cpu,
        catalog.pmus,
        [e for e in draft.catalog.events] + [anchor],
        draft.catalog.excluded,
        catalog.source,
        catalog.note,
    )
    plan.pmus = dict(catalog.pmus)
    return replace(draft, catalog=kept)


def distinct_labels(draft: Draft) -> Draft:
    """No two events of a run print the same label in perf's output (their counts could not be
    told apart)."""
    assert draft.plan is not None  # after `scheduled`
    for run in draft.plan.runs:
        clash = perf_labels.first_clash((e.pmu, e.label, e.spec, e.key) for e in run.events)
        if clash:
            printed, (pmu_a, a), (pmu_b, b) = clash
            raise AutoprofError(
                f"{pmu_a}/{a} and {pmu_b}/{b} would both print as {printed!r} in perf's output "
                "of one run, so their counts could not be told apart: give one a name= of its own"
            )
    return draft


# The plan steps, in order: what to measure, what this kind of profile can count, the runs,
# then the checks of the plan.
STEPS: tuple[Step, ...] = (
    chosen_events,
    metric_events,
    task_bound,
    core_type,
    user_mode,
    anchor_counter,
    scheduled,
    anchor_event,
    distinct_labels,
)


def plan_catalog(
    catalog: Catalog, request: Request, note: Callable[[str], None] = _ignore
) -> Planned:
    """The request planned on `catalog` (the machine's, from `catalog_for`): every step of
    STEPS in turn. Raises AutoprofError (one line) for what no run could measure."""
    draft = Draft(request.check(), catalog, note=note)
    for step in STEPS:
        draft = step(draft)
    assert draft.plan is not None  # `scheduled` made one
    return Planned(draft.catalog, draft.plan, draft.metrics)


def plan(request: Request, note: Callable[[str], None] = _ignore) -> Planned:
    """The request's plan on the machine it names (this one, or --cpu's), or, with --emulate,
    on the emulator the command needs (`emulate.catalog`). `note` hears what planning says (a
    CPU no event data knows, a kernel without a hardware PMU, metrics left out)."""
    request = request.check()
    if request.options.emulate:
        return plan_catalog(emulate.catalog(request.command, request.events), request, note)
    return plan_catalog(catalog_for(request, note), request, note)


def plan_json(planned: Planned) -> str:
    """The plan as `schedule --json` and `profile --dry-run --json` print it (the contract)."""
    return json.dumps(planned.plan.to_json(), indent=1)


def check(request: Request, planned: Planned) -> list[str]:
    """That this machine can run the planned profile: raises AutoprofError (one line) for what
    cannot work (perf unusable, CPUs the machine lacks, a catalog of another CPU, hardware
    events without a PMU, the command or target not found); returns the warnings. An
    emulated profile needs no perf and no counter: only its command."""
    options = request.options
    if options.emulate:
        launch.resolve(request.command[0])
        return []
    findings = preflight.check(
        system_wide=options.system_wide or bool(options.cpu_list or options.cgroup),
        kernel=False,
        counters=any(not p.unconstrained for p in planned.catalog.pmus.values()),
        cpu_list=options.cpu_list,
    )
    preflight.fail_on_fatal(findings)
    here = machine.cpu_id()
    # family and model decide the events (a platform's representative id may differ in stepping)
    if request.cpu and planned.catalog.cpu.split("-")[:3] != here.split("-")[:3]:
        raise AutoprofError(
            f"--cpu {request.cpu} ({planned.catalog.cpu}) is not this machine ({here}): profile "
            f"counts here; plan for another CPU with: autoprof schedule --cpu {request.cpu}"
        )
    host.refuse_uncountable(planned.catalog)
    pinning.workload_cpus(options)  # --pin, --core-type: CPUs this machine has
    if options.attached:
        attach.check_target(options)
    else:
        launch.resolve(request.command[0])  # not found, or not to be run: one line now
    warnings = []
    for finding in findings:
        if finding.severity != preflight.FATAL:
            fix = f" (fix: {finding.fix})" if finding.fix else ""
            warnings.append(f"{finding.message}{fix}")
    if options.attached and len(planned.plan.runs) > 1:  # one run sees one moment
        warnings.append(attach.WARNING)
    return warnings
