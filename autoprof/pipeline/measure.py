"""One measurement, the same for every caller: plan -> check -> profile -> aggregate -> upload.

`autoprof profile` (no store: it stops after the profile), the queue worker and the web's job
process call `measure`, so the plan and its checks (`run.planning`: a --reserve the counters
cannot honour, a CPU that is not this one, a missing command) refuse the same request the same
way everywhere.
What differs per caller comes in through `Hooks`: how progress and warnings are shown, and what
must happen between the checks and the first run (the worker waits for a quiet machine).

    planned = planning.plan(request)                  # optional: `measure` plans when not given
    measured = measure(request, out, store, Hooks(warn=print), planned=planned)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoprof.catalog import machine
from autoprof.run import planning
from autoprof.run import profile as library
from autoprof.run.planning import Planned
from autoprof.run.profile import Outcome
from autoprof.run.request import Request
from autoprof.run.runner import Listener
from autoprof.util.owned import own_folder

if TYPE_CHECKING:  # the store's libraries (SQLAlchemy, pandas) load only to upload
    from autoprof.store.upload import Uploaded


def _ignore(*_: Any) -> None:
    return None


@dataclass(frozen=True)
class Hooks:
    """How a caller follows a measurement. `ready(planned)` runs after every check passed and
    before the first run; what it returns goes into the manifest as the profile's `job`."""

    warn: Callable[[str], None] = _ignore
    phase: Callable[[str], None] = _ignore  # checking, profiling, aggregating, uploading, done
    ready: Callable[[Planned], dict[str, Any] | None] = _ignore
    run: Listener | None = None  # the runner's progress (`run.runner.TaskEvent`)


@dataclass
class Measured:
    out: Path
    outcome: Outcome
    warnings: list[str]
    stored: Uploaded | None = None  # None: no store given (the CLI's profile)

    @property
    def failed_runs(self) -> list[str]:
        return [f"{run}.{repeat}" for run, repeat in self.outcome.failed]


def measure(
    request: Request,
    out: Path,
    store: str | None = None,
    hooks: Hooks = Hooks(),
    *,
    planned: Planned | None = None,
    hostname: str | None = None,
    resume: bool = False,
) -> Measured:
    """Measure `request` into `out`; with a `store` URL, aggregate and upload it too (once: a part
    already stored is not stored again, so a job run twice stores one run).

    Raises AutoprofError before any run for a refused request, and perf.process.Interrupted when a
    signal stops the profile (finished runs are kept in `out` for a resume)."""
    hooks.phase("checking")
    planned = planned or planning.plan(request, hooks.warn)
    warnings = planning.check(request, planned)
    for warning in warnings:
        hooks.warn(warning)
    facts = machine.read_facts(planned.catalog)
    if hostname:  # the name a worker was given (--hostname), not the kernel's
        facts = replace(facts, hostname=hostname)
    # the folder is made (or found to hold this very profile) before anything says "profiling":
    # an -o that cannot be written, or holds another profile, is the one line said
    out = own_folder(out)  # then used by its resolved name: no one else can swap it
    library.open_profile(
        out, request.command, planned.plan, request.options, facts, request.profile_id
    )
    job = hooks.ready(planned)
    hooks.phase("profiling")
    outcome = library.profile(
        out,
        request.command,
        planned.catalog,
        planned.plan,
        request.options,
        facts=facts,
        profile_id=request.profile_id,
        job=job,
        on_event=hooks.run,
        resume=resume,
        env=request.env,
    )
    measured = Measured(out, outcome, warnings)
    if store is not None:
        measured.stored = store_profile(out, store, request.tags, hooks)
    hooks.phase("done")
    return measured


def store_profile(out: Path, store: str, tags: dict[str, str], hooks: Hooks) -> Uploaded:
    """Aggregate `out` and upload it to the store at URL `store`."""
    from autoprof.results import aggregate
    from autoprof.store import driver, upload

    hooks.phase("aggregating")
    aggregate.aggregate_to(out)
    hooks.phase("uploading")
    return upload.upload(driver.Database.of(store), out, tags)
