"""One measurement, the same for every caller: plan -> check -> profile -> aggregate -> upload.

`autoprof profile` (no store: it stops after the profile), the queue worker and the web's job
process call `measure`, so a check added here (a --reserve the counters cannot honour, a CPU
that is not this one, a missing command) refuses the same request the same way everywhere.
What differs per caller comes in through `Hooks`: how progress and warnings are shown, and what
must happen between the checks and the first run (the worker waits for a quiet machine).

    planned = plan(spec)                              # optional: `measure` plans when not given
    measured = measure(spec, out, store, Hooks(warn=print), planned=planned)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoprof.catalog import host
from autoprof.catalog.model import Catalog
from autoprof.run import attach, preflight
from autoprof.run import profile as library
from autoprof.run.options import EventSelection, ProfileOptions
from autoprof.run.outdir import RunRecord
from autoprof.run.profile import Outcome
from autoprof.run.runner import Task
from autoprof.schedule.plan import Plan

if TYPE_CHECKING:  # the store's libraries (SQLAlchemy, pandas) load only to upload
    from autoprof.store.upload import Uploaded


@dataclass(frozen=True)
class MeasureSpec:
    """What to measure and how: the fields a command line, a queue job or the web form give."""

    command: list[str]
    events: list[str] = field(default_factory=list)  # empty: every event of the machine
    options: ProfileOptions = field(default_factory=ProfileOptions)
    selection: EventSelection = field(default_factory=EventSelection)
    events_dir: str | None = None
    cpu: str | None = None  # another machine's catalog (--cpu): refused by the checks
    smt: str | None = None
    counters: tuple[str, ...] = ()  # PMU=N where the model table's count is wrong (AMD, Arm)
    probe: bool = True  # this machine's core PMU counters probed (--no-probe: the table's)
    profile_id: str | None = None  # the store's run id (shared by a split profile's parts)
    tags: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # a web job's variables, for its workload


@dataclass(frozen=True)
class Planned:
    catalog: Catalog
    plan: Plan


def _ignore(*_: Any) -> None:
    return None


@dataclass(frozen=True)
class Hooks:
    """How a caller follows a measurement. `ready(planned)` runs after every check passed and
    before the first run; what it returns goes into the manifest as the profile's `job`."""

    warn: Callable[[str], None] = _ignore
    phase: Callable[[str], None] = _ignore  # checking, profiling, aggregating, uploading, done
    ready: Callable[[Planned], dict[str, Any] | None] = _ignore
    run: Callable[[str, Task, RunRecord | None], None] | None = None  # the runner's progress


@dataclass
class Measured:
    out: Path
    outcome: Outcome
    warnings: list[str]
    stored: Uploaded | None = None  # None: no store given (the CLI's profile)

    @property
    def failed_runs(self) -> list[str]:
        return [f"{run}.{repeat}" for run, repeat in self.outcome.failed]


def plan(spec: MeasureSpec, note: Callable[[str], None] = _ignore) -> Planned:
    """This machine's catalog for the spec's selection, restricted to its events, scheduled;
    refuses a --reserve that the CPU's counters cannot honour. `note` hears what the catalog
    says of this machine (a CPU no event data knows, a kernel without a hardware PMU). Every
    event of this machine means every event its kernel can count."""
    selection = spec.selection.check()
    catalog = host.build_catalog(
        events_dir=spec.events_dir,
        cpu=spec.cpu,
        smt=spec.smt,
        counters=spec.counters,
        probe=spec.probe,
        **selection.to_json(),
    )
    preflight.check_reserve(catalog.pmus.values(), selection.reserve)
    if not spec.events and not spec.cpu:
        catalog = host.countable(catalog)
    if catalog.note:
        note(catalog.note)
    options = spec.options
    catalog, schedule = library.plan_for(
        catalog, spec.events, options.anchor, options.system_scope, user=options.user
    )
    return Planned(catalog, schedule)


def check(spec: MeasureSpec, planned: Planned) -> list[str]:
    """Refuse what cannot work here (AutoprofError, one line); return the warnings."""
    warnings = library.check_machine(planned.catalog, spec.options, spec.command, cpu=spec.cpu)
    if spec.options.attached and len(planned.plan.runs) > 1:  # one run sees one moment
        warnings.append(attach.WARNING)
    return warnings


def measure(
    spec: MeasureSpec,
    out: Path,
    store: str | None = None,
    hooks: Hooks = Hooks(),
    *,
    planned: Planned | None = None,
    hostname: str | None = None,
    resume: bool = False,
) -> Measured:
    """Measure `spec` into `out`; with a `store` URL, aggregate and upload it too (once: a part
    already stored is not stored again, so a job run twice stores one run).

    Raises AutoprofError before any run for a refused spec, and perf.process.Interrupted when a
    signal stops the profile (finished runs are kept in `out` for a resume)."""
    hooks.phase("checking")
    planned = planned or plan(spec, hooks.warn)
    warnings = check(spec, planned)
    for warning in warnings:
        hooks.warn(warning)
    facts = host.read_facts(planned.catalog)
    if hostname:  # the name a worker was given (--hostname), not the kernel's
        facts = replace(facts, hostname=hostname)
    # the folder is made (or found to hold this very profile) before anything says "profiling":
    # an -o that cannot be written, or holds another profile, is the one line said
    library.open_profile(out, spec.command, planned.plan, spec.options, facts, spec.profile_id)
    job = hooks.ready(planned)
    hooks.phase("profiling")
    outcome = library.profile(
        out,
        spec.command,
        planned.catalog,
        planned.plan,
        spec.options,
        facts=facts,
        profile_id=spec.profile_id,
        job=job,
        on_event=hooks.run,
        resume=resume,
        env=spec.env,
    )
    measured = Measured(out, outcome, warnings)
    if store is not None:
        measured.stored = store_profile(out, store, spec.tags, hooks)
    hooks.phase("done")
    return measured


def store_profile(out: Path, store: str, tags: dict[str, str], hooks: Hooks) -> Uploaded:
    """Aggregate `out` and upload it to the store at URL `store` (its engine closed after)."""
    from autoprof.results import aggregate
    from autoprof.store import engine, upload

    hooks.phase("aggregating")
    aggregate.aggregate_to(out)
    hooks.phase("uploading")
    opened = engine.open_store(store)
    try:
        return upload.upload(opened, out, tags)
    finally:
        opened.engine.dispose()
