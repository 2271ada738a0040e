"""`autoprof schedule`: the plan for every event of a CPU, with its lower bound."""

from __future__ import annotations

import json
import time

import click

from autoprof.commands.common import (
    build_catalog,
    catalog_options,
    console,
    metric_plan,
    note_unmeasurable,
    planning_options,
)
from autoprof.errors import AutoprofError


@click.command("schedule")
@catalog_options
@click.option(
    "-e", "--event", "event_names", multiple=True, help="Schedule only these events (repeatable)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON (the contract).")
@planning_options
def schedule(event_names: tuple[str, ...], as_json: bool, **options) -> None:
    """Pack every event into the fewest runs without multiplexing."""
    from autoprof.catalog.host import resolve_events
    from autoprof.schedule import schedule as make_plan
    from autoprof.schedule.render import Scheduled, ScheduleRenderer
    from autoprof.util.renderer import write

    metric_args = [options.pop(k) for k in ("metric_words", "metrics_files", "consistent")]
    started = time.perf_counter()
    summary = None
    if metric_args[0] or metric_args[1]:
        if event_names:
            raise AutoprofError("give events (-e) or --metrics, not both")
        planned = metric_plan(options, *metric_args)
        catalog, plan, summary = planned.catalog, planned.plan, planned.summary()
        note_unmeasurable(planned)
    else:
        catalog = build_catalog(every_event=not event_names, **options)
        if event_names:
            catalog = resolve_events(catalog, list(event_names))
        plan = make_plan(catalog)
    elapsed = time.perf_counter() - started
    if as_json:
        click.echo(json.dumps(plan.to_json(), indent=1))
        return
    write(ScheduleRenderer(console()).render(Scheduled(catalog, plan, elapsed, summary)), None)
