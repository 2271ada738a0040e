"""`autoprof schedule`: the plan for every event of a CPU, with its lower bound."""

from __future__ import annotations

import time

import click

from autoprof.commands.common import (
    catalog_options,
    console,
    event_options,
    note,
    plan_flags,
    planning_options,
    takes_request,
)
from autoprof.run.request import Request


@click.command("schedule")
@catalog_options
@event_options
@plan_flags
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the plan as JSON (the contract): the bytes `profile --dry-run --json` prints.",
)
@planning_options
@takes_request
def schedule(request: Request, as_json: bool) -> None:
    """Pack every event into the fewest runs without multiplexing.

    The plan `profile` runs with the same options: a command's profile leaves out the PMUs
    that count system-wide only (-a or --cpu-list plans them)."""
    from autoprof.run import planning
    from autoprof.schedule.render import Scheduled, ScheduleRenderer
    from autoprof.util.renderer import write

    request.check()
    started = time.perf_counter()
    planned = planning.plan(request, note)
    elapsed = time.perf_counter() - started
    if as_json:
        click.echo(planning.plan_json(planned))
        return
    summary = planned.metrics.summary() if planned.metrics else None
    scheduled = Scheduled(planned.catalog, planned.plan, elapsed, summary, request.options.regions)
    write(ScheduleRenderer(console()).render(scheduled), None)
