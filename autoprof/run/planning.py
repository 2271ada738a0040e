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

from autoprof import emulate
from autoprof.catalog import host, machine, modifiers
from autoprof.catalog.encoding import HYBRID_CORE_PMUS
from autoprof.catalog.model import Catalog, Exclusion
from autoprof.errors import AutoprofError
from autoprof.metrics import catalog as metric_catalog
from autoprof.metrics.plan import MetricPlan, plan_metrics, unavailable_pmus
from autoprof.perf import labels as perf_labels
from autoprof.perf import launch
from autoprof.run import attach, pinning, preflight
from autoprof.run.options import CORE_TYPES
from autoprof.run.request import Request
from autoprof.schedule import schedule
from autoprof.schedule.plan import SYSTEM_WIDE_ONLY, Plan


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


def anchor_event(draft: Draft) -> Draft:
    """The anchor (--anchor) is an event of the plan that needs no counter: it joins every run
    (`run.profile.tasks`; a metric plan places it in every run itself)."""
    anchor = draft.request.options.anchor
    if not anchor:
        return draft
    if draft.request.options.user:
        anchor = modifiers.named(anchor, modifiers.USER)
    found = [e for e in draft.catalog.events if anchor in (e.name, e.spec)]
    if not found:
        raise AutoprofError(f"anchor event {anchor} is not an event of this machine")
    if not draft.catalog.pmus[found[0].pmu].unconstrained:
        raise AutoprofError(
            f"anchor event {anchor} needs a {found[0].pmu} counter in every run; "
            "choose a software event such as task-clock"
        )
    return draft


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
