"""`autoprof profile -- CMD`: schedule the events, run perf once per group, keep everything."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from autoprof import attach, outdir
from autoprof import profile as library
from autoprof.commands import common
from autoprof.commands.common import (
    build_catalog,
    catalog_options,
    measure_options,
    profile_options,
)
from autoprof.errors import AutoprofError
from autoprof.runner import Interrupted


def attach_options(func):
    """-p/--cgroup/--duration/--resume: profile what already runs instead of a command."""
    for option in reversed(
        [
            click.option(
                "-p", "--pid", "pids", metavar="PID[,PID...]", help="Attach to these processes."
            ),
            click.option("--cgroup", metavar="NAME", help="Attach to this cgroup (perf -a -G)."),
            click.option(
                "--duration",
                type=click.FloatRange(0.01),
                help="Seconds each group measures the attached target (or the system with -a).",
            ),
            click.option(
                "--resume",
                is_flag=True,
                help="Continue an attached profile against another process (-p NEWPID).",
            ),
        ]
    ):
        func = option(func)
    return func


def check_attach(command, system_wide, pids, cgroup, duration) -> None:
    """A command, or a target (-p, --cgroup, -a) with --duration: never both, never neither."""
    if (pids or cgroup) and command:
        raise AutoprofError("give either a COMMAND or -p/--cgroup, not both")
    if pids and cgroup:
        raise AutoprofError("give -p or --cgroup, not both")
    if duration is not None and command:
        raise AutoprofError(
            "--duration is for attached profiles (-p, --cgroup, -a without COMMAND)"
        )
    if not command and not (pids or cgroup or system_wide):
        raise AutoprofError("nothing to profile: give -- COMMAND, -p PID, --cgroup NAME or -a")
    if not command and duration is None:
        raise AutoprofError(
            "an attached profile (-p, --cgroup, -a without COMMAND) needs --duration S"
        )


MEASURE_KEYS = (
    "interval_ms",
    "repeat",
    "system_wide",
    "cpu_list",
    "timeout",
    "fail_fast",
    "retries",
    "anchor",
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
    help="Folder for the raw outputs (resumes a profile already there).",
)
@click.option("--force", is_flag=True, help="Run again the runs already finished.")
@click.option("--dry-run", is_flag=True, help="Print the perf commands and stop.")
@attach_options
@click.argument("command", nargs=-1, required=False, type=click.UNPROCESSED)
def profile(event_names, events_file, output, force, dry_run, command, **opts) -> None:
    """Measure every event (or the chosen ones) for COMMAND, without multiplexing; or attach
    to running processes (-p), a cgroup or the whole system (-a) for --duration per group."""
    command = list(command)
    measure = {k: opts.pop(k) for k in MEASURE_KEYS}
    target = {k: opts.pop(k) for k in ("pids", "cgroup", "duration")}
    resume = opts.pop("resume")
    check_attach(command, measure["system_wide"], **target)
    options = profile_options(**measure, **target, force=force)
    names = common.event_names(event_names, events_file)
    catalog, plan = library.plan_for(build_catalog(**opts), names, options.anchor)
    out = Path(output)
    if dry_run:
        for argv in library.dry_run(out, command, plan, options):
            click.echo(f"LC_ALL=C {shlex.join(argv)}")
        return
    console = Console(stderr=True)
    for warning in library.check_machine(catalog, options, command):
        console.print(f"[yellow]warning:[/] {warning}")
    if options.attached:
        console.print(f"[yellow]warning:[/] {attach.WARNING}")
    what = attach.describe(options) if options.attached else shlex.join(command)
    console.print(
        f"profiling [bold]{what}[/]: {len(catalog.events)} events in "
        f"{len(plan)} runs (lower bound {plan.lower_bound}) x {options.repeat} -> {out}/"
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=not sys.stderr.isatty(),
    ) as progress:
        bar = progress.add_task("runs", total=len(plan) * options.repeat)

        def on_event(kind, task, record):
            if kind == "start":
                names = ", ".join(e.name for e in task.events[:3])
                more = f" +{len(task.events) - 3}" if len(task.events) > 3 else ""
                progress.update(bar, description=f"run {task.run} rep {task.repeat}: {names}{more}")
            elif kind == "retry":
                progress.console.print(
                    f"run {task.run} rep {task.repeat}: {record.status}: {record.error}; "
                    f"running it again (attempt {record.attempt + 1} of {options.retries + 1})"
                )
            else:
                progress.advance(bar)
                if record is not None and record.status != outdir.RUN_OK:
                    progress.console.print(
                        f"run {task.run} rep {task.repeat}: {record.status}: {record.error}"
                    )

        try:
            outcome = library.profile(
                out, command, catalog, plan, options, on_event=on_event, resume=resume
            )
        except Interrupted:
            raise AutoprofError(
                f"interrupted; finished runs are kept in {out}/: run the same "
                "command again to resume"
            ) from None
    failed = outcome.failed
    console.print(f"profile {outcome.manifest.id} in {out}/; next: autoprof aggregate {out}")
    if outcome.missing:
        listed = ", ".join(f"{run}.{rep}" for run, rep in outcome.missing[:20])
        more = " ..." if len(outcome.missing) > 20 else ""
        raise AutoprofError(
            f"{attach.describe(options)} exited: {len(outcome.missing)} runs missing "
            f"(run.repeat {listed}{more}); measure them on a new process with "
            f"autoprof profile -o {out} -p NEWPID --resume ..."
        )
    if failed:
        listed = ", ".join(f"{run}.{rep}" for run, rep in failed[:10])
        raise AutoprofError(
            f"{len(failed)} runs failed (run.repeat {listed}); the others' "
            f"results are kept in {out}/"
        )
