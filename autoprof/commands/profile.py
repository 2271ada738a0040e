"""`autoprof profile -- CMD`: schedule the events, run perf once per group, keep everything."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from autoprof.commands import common
from autoprof.commands.common import catalog_options, measure_options, profile_flags, takes_request
from autoprof.errors import AutoprofError
from autoprof.run.options import ProfileOptions
from autoprof.run.request import Request
from autoprof.util.status import RunStatus


def check_attach(command: list[str], options: ProfileOptions) -> None:
    """A command, or a target (-p, --cgroup, -a or --cpu-list: the CPUs' every process) with
    --duration: never both, never neither."""
    target = options.pids or options.cgroup
    if target and command:
        raise AutoprofError("give either a COMMAND or -p/--cgroup, not both")
    if options.pids and options.cgroup:
        raise AutoprofError("give -p or --cgroup, not both")
    if options.attached and command:
        raise AutoprofError(
            "--duration is for attached profiles (-p, --cgroup, -a or --cpu-list without COMMAND)"
        )
    if not command and not (target or options.system_scope):
        raise AutoprofError(
            "nothing to profile: give -- COMMAND, -p PID, --cgroup NAME, -a or --cpu-list CPUS"
        )
    if not command and not options.attached:
        raise AutoprofError(
            "an attached profile (-p, --cgroup, -a or --cpu-list without COMMAND) needs "
            "--duration S"
        )


@click.command("profile", context_settings={"ignore_unknown_options": False})
@catalog_options
@measure_options
@click.option(
    "-o",
    "--output",
    default="out",
    show_default=True,
    type=click.Path(),
    callback=common.existing_parent,
    help="Folder for the raw outputs (resumes a profile already there).",
)
@click.option("--dry-run", is_flag=True, help="Print the perf commands and stop.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="With --dry-run: print the plan as JSON instead, the bytes `schedule --json` prints "
    "for the same options.",
)
@profile_flags(spec=False)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue an attached profile against another process (-p NEWPID).",
)
@common.planning_options
@click.argument("command", nargs=-1, required=False, type=click.UNPROCESSED)
@takes_request
def profile(request: Request, output: str, dry_run: bool, as_json: bool, resume: bool) -> None:
    """Measure every event for a command, without multiplexing.

    Every event of this machine (or the chosen ones) for COMMAND, one perf stat run per
    group; or attach to running processes (-p), a cgroup or the whole system (-a) for
    --duration per group.

    Ctrl-C, SIGTERM or SIGHUP stop the run in progress (perf and the command's whole process
    group), keep the finished runs (run the same command again to resume) and exit with
    128 + the signal's number (130 for Ctrl-C).
    """
    from autoprof.pipeline import measure
    from autoprof.run import planning
    from autoprof.run import profile as library

    command, options = request.command, request.options
    check_attach(command, options)
    if as_json and not dry_run:
        raise AutoprofError("--json prints the plan of --dry-run: give both")
    request.check()
    planned = planning.plan(request, common.note)
    if planned.metrics:
        click.echo(planned.metrics.summary(), err=True)
    out = Path(output)
    if dry_run and as_json:
        click.echo(planning.plan_json(planned))
        return
    if dry_run:
        if not options.attached and not options.emulate:
            click.echo(f"autoprof: note: {library.DRY_RUN_NOTE}", err=True)
        if options.regions:
            click.echo(f"autoprof: note: {library.regions_note(options)}", err=True)
        prefix = "" if options.emulate else "LC_ALL=C "  # perf runs so, a command as it is
        for argv in library.dry_run(out, command, planned.plan, options):
            click.echo(f"{prefix}{shlex.join(argv)}")
        return
    _run(measure, request, planned, out, resume)


def _run(measure, request, planned, out, resume) -> None:
    """Run the profile, reporting progress; a signal ends it with 128 + its number."""
    from autoprof.run import attach
    from autoprof.run import profile as library
    from autoprof.run.runner import TaskEnded, TaskEvent, TaskRetried, TaskStarted

    options, plan = request.options, planned.plan
    what = attach.describe(options) if options.attached else shlex.join(request.command)

    def work(report: common.Progress):
        def ready(planned) -> None:
            report.say(
                f"profiling {what}: {len(planned.catalog.events)} events in "
                f"{len(plan)} runs (lower bound {plan.lower_bound}) x {options.repeat} -> {out}/"
            )
            skipped, pairs = library.already_done(out, plan, options)
            if skipped:
                report.say(f"resuming: {_resumed(skipped, pairs)}")

        def on_event(event: TaskEvent) -> None:
            task = event.task
            if isinstance(event, TaskStarted):
                names = ", ".join(e.name for e in task.events[:3])
                more = f" +{len(task.events) - 3}" if len(task.events) > 3 else ""
                report.describe(f"run {task.run} rep {task.repeat}: {names}{more}")
            elif isinstance(event, TaskRetried):
                record = event.record
                report.say(
                    f"run {task.run} rep {task.repeat}: {record.status}: {record.error}; "
                    f"running it again (attempt {record.attempt + 1} of {options.retries + 1})"
                )
            else:
                report.advance()
                if isinstance(event, TaskEnded) and event.record.status != RunStatus.OK:
                    record = event.record
                    report.say(f"run {task.run} rep {task.repeat}: {record.status}: {record.error}")

        hooks = measure.Hooks(
            warn=lambda text: report.say(f"warning: {text}", "yellow"), ready=ready, run=on_event
        )
        return measure.measure(request, out, None, hooks, planned=planned, resume=resume)

    def stopped(stop) -> str:
        return (
            f"interrupted by {stop.name}; finished runs are kept in {out}/: run the same "
            "command again to resume"
        )

    done = common.with_progress([("runs", len(plan) * options.repeat)], work, stopped)
    outcome = done.outcome
    failed = outcome.failed
    if options.emulate:
        _say_emulated(out, outcome)
    hint = common.next_hint("autoprof", "aggregate", out)
    if outcome.missing:
        listed = ", ".join(f"{run}.{rep}" for run, rep in outcome.missing[:20])
        more = " ..." if len(outcome.missing) > 20 else ""
        raise AutoprofError(
            f"{attach.describe(options)} exited: {len(outcome.missing)} runs missing "
            f"(run.repeat {listed}{more}); measure them on a new process with "
            f"autoprof profile -o {out} -p NEWPID --resume ..."
        )
    if failed:
        kept = (
            "its output is"
            if outcome.planned == 1
            else "the others' results are"
            if len(failed) < outcome.planned
            else "their output is"
        )
        rest = (
            f": {hint.removeprefix('next: ')} reads them" if len(failed) < outcome.planned else ""
        )
        raise AutoprofError(f"{outcome.failure()}; {kept} kept in {out}/{rest}")
    measured = len({(r.run, r.repeat) for r in outcome.records})
    skipped = outcome.planned - measured
    done = f": {_measured(measured, skipped)}" if skipped else ""
    click.echo(f"profile {outcome.manifest.id} in {out}/{done}; {hint}", err=True)


def _resumed(skipped: int, planned: int) -> str:
    """What a resume said before its runs: how many it skips, or that it measures nothing."""
    if skipped == planned:
        return f"all {planned} runs are done already: nothing to measure (--force runs them again)"
    are = "is" if skipped == 1 else "are"
    return (
        f"{skipped} of {planned} runs {are} done already; measuring the other {planned - skipped}"
    )


def _measured(measured: int, skipped: int) -> str:
    """What a resume measured, said in its last line."""
    if not measured:
        return f"nothing measured, all {skipped} runs were done already"
    runs = "run" if measured == 1 else "runs"
    return f"measured {measured} {runs}, {skipped} {'was' if skipped == 1 else 'were'} done already"


def _say_emulated(out: Path, outcome) -> None:
    """What counted an emulated profile, and at what cost."""
    from autoprof.run import emulated

    engine = outcome.manifest.plan.get("cpu", "an emulator")
    slowdown = emulated.slowdown(out, outcome.records)
    cost = f", {slowdown:.1f}x slower than natively (median run)" if slowdown else ""
    click.echo(f"counted under {engine} (emulated counts, user mode only){cost}", err=True)
