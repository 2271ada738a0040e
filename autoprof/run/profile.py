"""Profile a command: the body of `autoprof profile` as library calls, so the CLI and the queue
worker run one and the same code.

    planned = planning.plan(request)                        # run.planning: the plan's one home
    warnings = planning.check(request, planned)             # raises on what cannot work
    outcome = profile(out, command, planned.catalog, planned.plan, options, on_event=...)

A split profile is the same call with `options.part`/`options.parts` and the `profile_id` its
parts share: each part runs its share of the plan (`outdir.planned`) under the plan's global
run numbers, so the parts' results put together are one machine's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autoprof import __version__, emulate
from autoprof.catalog import machine
from autoprof.catalog.facts import MachineFacts
from autoprof.catalog.model import Catalog
from autoprof.perf import command as perf_command
from autoprof.perf.launch import control_args
from autoprof.run import attach, outdir
from autoprof.run.emulated import EmulatedRunner
from autoprof.run.journal import finished
from autoprof.run.options import ProfileOptions
from autoprof.run.outdir import Manifest, RunRecord
from autoprof.run.runner import Listener, Runner, Task, counts_workload, perf_argv
from autoprof.schedule.plan import Plan
from autoprof.util.clock import now_iso
from autoprof.util.owned import own_folder
from autoprof.util.status import RunStatus


@dataclass
class Outcome:
    manifest: Manifest
    records: list[RunRecord]  # the runs done by this call (resumed ones are not repeated)
    failed: list[tuple[int, int]]  # (run, repeat) whose workload or perf failed
    # (run, repeat) not finished after this call: an attached target exited before them
    missing: list[tuple[int, int]] = field(default_factory=list)
    planned: int = 0  # the (run, repeat) pairs of this profile (of this part)

    def failure(self) -> str:
        """The failed runs in words: how many of how many, which, and the first one's reason
        ("the run failed (timed out after --timeout 1 s ...)" for a profile of one run)."""
        reasons = {(r.run, r.repeat): r.error or str(r.status) for r in self.records}
        first = self.failed[0]
        reason = reasons.get(first, "see its run.json")
        if len(self.failed) == 1 and self.planned == 1:
            return f"the run failed ({reason})"
        listed = ", ".join(f"{run}.{rep}" for run, rep in self.failed[:10])
        listed += " ..." if len(self.failed) > 10 else ""
        n = len(self.failed)
        head = f"all {n} runs failed" if n == self.planned else f"{n} of {self.planned} runs failed"
        return f"{head} (run.repeat {listed}; {first[0]}.{first[1]}: {reason})"


def tasks(plan: Plan, options: ProfileOptions) -> Iterator[Task]:
    """The (run, repeat) tasks of this part (all of them for a plain profile), each counting
    its run's events as the plan lists them (the anchor is in every run there); made as the
    runner asks."""
    return (
        Task(run, rep, tuple(plan.runs[run - 1].events))
        for run, rep in outdir.planned(len(plan.runs), options.repeat, options.part, options.parts)
    )


def already_done(out: Path, plan: Plan, options: ProfileOptions) -> tuple[int, int]:
    """(how many of this part's (run, repeat) pairs `out` holds finished already, how many it
    has): what a resume skips (none with --force, which runs them again)."""
    done = set() if options.force else finished(out)
    pairs = [(task.run, task.repeat) for task in tasks(plan, options)]
    return sum(pair in done for pair in pairs), len(pairs)


# what `dry_run` prints for the values only a run knows: the pid of the workload autoprof starts
# and the two ends of perf's control pipe (`perf.launch`)
DRY_RUN_PLACEHOLDERS = ("WORKLOAD_PID", "CTL_FD", "ACK_FD")
DRY_RUN_NOTE = (
    "WORKLOAD_PID: COMMAND, which autoprof starts held at its exec until perf counts "
    "(CTL_FD, ACK_FD: perf's control pipe); see README, the runner"
)


def regions_note(options: ProfileOptions) -> str:
    """What a dry run says of --region: the command's marker channel, and no run more."""
    from autoprof.markers import ENV
    from autoprof.run.regions import CHANNEL_FD

    named = ", ".join(options.regions)
    return (
        f"regions {named}: COMMAND runs with {ENV}={CHANNEL_FD} (its markers' channel, or the "
        "next free descriptor); every run below counts them too, no run more"
    )


def dry_run(out: Path, command: list[str], plan: Plan, options: ProfileOptions) -> list[list[str]]:
    """The argv of every run this profile would execute, exactly as `Runner` executes them, with
    `DRY_RUN_PLACEHOLDERS` for the workload's pid and perf's control pipe (--emulate: the
    emulator's, as `EmulatedRunner` runs it after the command's native run)."""
    if options.emulate:  # the emulator's command line, in each run's folder
        engine = emulate.engine_for(command)
        return [
            engine.argv(command, [e.name for e in t.events], outdir.run_dir(out, t.run, t.repeat))
            for t in tasks(plan, options)
        ]
    perf = perf_command.perf_path()
    found = []
    for t in tasks(plan, options):
        argv = perf_argv(
            outdir.run_dir(out, t.run, t.repeat), list(t.events), command, options, perf
        )
        if not options.attached:
            pid, ctl, ack = DRY_RUN_PLACEHOLDERS
            argv += control_args(pid if counts_workload(options) else None, ctl, ack)
        found.append(argv)
    return found


def open_profile(
    out: Path,
    command: list[str],
    plan: Plan,
    options: ProfileOptions,
    facts: MachineFacts,
    profile_id: str | None = None,
) -> Manifest:
    """The manifest of `out`: created for a new profile, or the existing one when `out`
    holds this very profile (same command, plan, measurement options and part) to resume.

    `profile_id` names the profile (the parts of a split profile share one); default a new uuid.
    """
    if (out / outdir.MANIFEST).exists():
        own_folder(out)  # a record another user could have written is not read
        manifest = outdir.read_manifest(out)
        manifest.check_resume(out, command, plan.to_json(), options, facts, profile_id)
        if manifest.options.repeat < options.repeat:
            manifest.options = replace(manifest.options, repeat=options.repeat)
            outdir.write_manifest(out, manifest)
        return manifest
    own_folder(out)
    manifest = Manifest(
        id=profile_id or str(uuid.uuid4()),
        autoprof_version=__version__,
        created=now_iso(),
        command=list(command),
        machine=facts,
        plan=plan.to_json(),
        options=options,
    )
    outdir.write_manifest(out, manifest)
    return manifest


def profile(
    out: Path,
    command: list[str],
    catalog: Catalog,
    plan: Plan,
    options: ProfileOptions,
    *,
    facts: MachineFacts | None = None,
    profile_id: str | None = None,
    job: dict[str, Any] | None = None,
    on_event: Listener | None = None,
    resume: bool = False,
    env: dict[str, str] | None = None,
) -> Outcome:
    """Run (or resume) the profile in `out`; raises perf.process.Interrupted on Ctrl-C, SIGTERM or
    SIGHUP (after stopping the run in progress).

    `facts` default to this machine's; `job` is recorded in the manifest (the queue job that
    asked for this profile). An attached profile (`options.attached`) continues against
    another target only with `resume`. `env`: variables a job sets for its workload only.
    """
    out = own_folder(out)  # then used by its resolved name: no one else can swap it
    manifest = open_profile(
        out, command, plan, options, facts or machine.read_facts(catalog), profile_id
    )
    if job is not None and manifest.job != job:
        manifest.job = dict(job)
        outdir.write_manifest(out, manifest)
    if options.attached:
        attach.start(out, manifest, options, resume)
    runner = EmulatedRunner if options.emulate else Runner
    records = runner(out, command, options, on_event, env).run_all(tasks(plan, options))
    if options.attached:
        attach.record_runs(out, manifest, records, options)
    done = finished(out)
    shape = (len(plan.runs), options.repeat, options.part, options.parts)
    missing = [pair for pair in outdir.planned(*shape) if pair not in done]
    failed = sorted({(r.run, r.repeat) for r in records if r.status != RunStatus.OK} - set(missing))
    return Outcome(manifest, records, failed, missing, outdir.planned_count(*shape))
