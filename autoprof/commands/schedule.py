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
    from rich.table import Table

    from autoprof.catalog.host import resolve_events
    from autoprof.schedule import schedule as make_plan
    from autoprof.schedule.bounds import pmu_bound

    metric_args = [options.pop(k) for k in ("metric_words", "metrics_files", "consistent")]
    started = time.perf_counter()
    if metric_args[0] or metric_args[1]:
        if event_names:
            raise AutoprofError("give events (-e) or --metrics, not both")
        planned = metric_plan(options, *metric_args)
        catalog, plan = planned.catalog, planned.plan
    else:
        catalog = build_catalog(**options)
        if event_names:
            catalog = resolve_events(catalog, list(event_names))
        plan = make_plan(catalog)
    elapsed = time.perf_counter() - started
    if as_json:
        click.echo(json.dumps(plan.to_json(), indent=1))
        return
    out = console()
    if metric_args[0] or metric_args[1]:
        out.print(f"metrics: {planned.summary()}")
    optimal = "optimal" if len(plan) == plan.lower_bound else "above the bound"
    out.print(
        f"[bold]{catalog.cpu}[/]: {len(catalog.events)} events in "
        f"[bold]{len(plan)} runs[/] (lower bound {plan.lower_bound}, {optimal}); "
        f"{len(plan.excluded)} excluded; scheduled in {elapsed * 1000:.0f} ms"
    )
    table = Table()
    for col in ("pmu", "events", "counters", "bound", "why", "events per run (min-max)"):
        table.add_column(col)
    by_pmu: dict[str, list] = {}
    for e in catalog.events:
        by_pmu.setdefault(e.pmu, []).append(e)
    load = plan.pmu_load()
    for name, evs in sorted(by_pmu.items()):
        pmu = plan.pmus[name]
        bound = pmu_bound(pmu, evs)
        why = ", ".join(
            f"{k} {v}"
            for k, v in (
                ("alone", bound.taken_alone),
                ("counters", bound.counters),
                ("registers", bound.registers),
                ("fixed", bound.fixed),
            )
            if v
        )
        counters = (
            "-"
            if pmu.unconstrained
            else (
                f"{pmu.generic}+{pmu.fixed}f"
                + (f" ({pmu.reserved} reserved)" if pmu.reserved else "")
            )
        )
        table.add_row(
            name,
            str(len(evs)),
            counters,
            str(bound.runs),
            why or "unconstrained",
            f"{min(load[name])}-{max(load[name])}",
        )
    out.print(table)
