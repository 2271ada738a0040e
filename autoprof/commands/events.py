"""`autoprof events list|search|show`: what this (or another) CPU can count."""

from __future__ import annotations

import json
import re

import click

from autoprof.catalog.model import Event
from autoprof.commands.common import build_catalog, catalog_options, console, takes_request
from autoprof.errors import AutoprofError
from autoprof.run.request import Request


@click.group()
def events() -> None:
    """List, search and describe the events of a CPU."""


NOT_HERE = "not countable here"  # the notes of an event this machine's kernel cannot count


def _uncountable(catalog, chosen: list[Event], request: Request) -> set[tuple[str, str]]:
    """The keys of the `chosen` events that this machine's kernel cannot count (none for
    --cpu), said once in a note: a VM without a virtual PMU lists its CPU's events all the
    same, marked."""
    from autoprof.catalog import host

    if request.cpu:
        return set()
    keys = {e.key for e in host.uncountable(catalog)} & {e.key for e in chosen}
    if keys:
        click.echo(
            f"autoprof: note: {host.no_pmu_note()}; the {len(keys)} hardware events listed are "
            f"marked {NOT_HERE!r}",
            err=True,
        )
    return keys


def _table(catalog, chosen, not_here: set[tuple[str, str]]) -> None:
    from rich.table import Table

    noun = "event" if len(chosen) == 1 else "events"
    table = Table(title=f"{len(chosen)} {noun} of {catalog.cpu}", show_lines=False)
    for col in ("event", "pmu", "counters", "notes"):
        table.add_column(col)
    for e in chosen:
        counters = (
            f"fixed {e.fixed}"
            if e.fixed is not None
            else ",".join(map(str, sorted(e.counters))) or "any"
        )
        notes = " ".join(
            n
            for n in (
                "alone" if e.taken_alone else "",
                "pair" if e.pair else "",
                "msr " + ",".join(sorted(e.registers)) if e.registers else "",
                NOT_HERE if e.key in not_here else "",
            )
            if n
        )
        table.add_row(e.name, e.pmu, counters, notes)
    console().print(table)


def event_json(e: Event, countable: bool = True) -> dict:
    """One event as `events list --json` prints it: what perf is given, what it needs, and
    whether this machine's kernel can count it."""
    return {
        "name": e.name,
        "pmu": e.pmu,
        "spec": e.spec,
        "counters": sorted(e.counters),
        "fixed": e.fixed,
        "taken_alone": e.taken_alone,
        "pair": e.pair,
        "registers": sorted(e.registers),
        "leader": e.leader,
        "description": e.description,
        "countable": countable,
    }


@events.command("list")
@catalog_options
@click.option("--pmu", help="Only this PMU's events.")
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON.")
@takes_request
def list_events(request: Request, pmu: str | None, as_json: bool) -> None:
    """List every event of the catalog."""
    catalog = build_catalog(request)
    chosen = [e for e in catalog.events if pmu is None or e.pmu == pmu]
    not_here = _uncountable(catalog, chosen, request)
    if as_json:
        click.echo(json.dumps([event_json(e, e.key not in not_here) for e in chosen], indent=1))
        return
    _table(catalog, chosen, not_here)


@events.command("search")
@click.argument("pattern")
@catalog_options
@takes_request
def search_events(request: Request, pattern: str) -> None:
    """Search the events by name or description.

    PATTERN is a regular expression, matched ignoring case."""
    try:
        regex = re.compile(pattern, re.IGNORECASE)
    except re.error as err:
        raise AutoprofError(f"bad pattern {pattern!r}: {err}") from None
    catalog = build_catalog(request)
    chosen = [e for e in catalog.events if regex.search(e.name) or regex.search(e.description)]
    if not chosen:
        _no_match(pattern, regex, request)
        return
    _table(catalog, chosen, _uncountable(catalog, chosen, request))


def _no_match(pattern: str, regex: re.Pattern, request: Request) -> None:
    """An empty search says so in one note instead of an empty table; on this machine it
    adds the tracepoints that match (listed only with --tracepoints, there are thousands),
    or why there are none."""
    import shlex

    from autoprof.catalog import host

    if request.cpu:
        click.echo(f"autoprof: note: no event of {request.cpu} matches {pattern!r}", err=True)
        return
    said = f"autoprof: note: no event matches {pattern!r}"
    hint = host.tracepoint_hint()
    found = [] if hint or request.selection.tracepoints else host.tracepoints()
    found = [t for t in found if regex.search(t)]
    if hint:
        said += f"; {hint}"
    elif found:
        again = shlex.join(["autoprof", "events", "search", pattern, "--tracepoints"])
        said += (
            f", but {len(found)} "
            f"{'tracepoint does' if len(found) == 1 else 'tracepoints do'} "
            f"({', '.join(found[:3])}{', ...' if len(found) > 3 else ''}): {again}"
        )
    click.echo(said, err=True)


@events.command("show")
@click.argument("name")
@catalog_options
@takes_request
def show_event(request: Request, name: str) -> None:
    """Everything known about one event."""
    from autoprof.catalog.host import resolve_events

    catalog = build_catalog(request)
    for e in resolve_events(catalog, [name]).events:
        click.echo(f"{e.name}  [{e.pmu}]")
        click.echo(f"  perf spec:   {e.spec}")
        if e.counters:
            pair = " (and the odd neighbour: a counter pair)" if e.pair else ""
            click.echo(f"  counters:    {','.join(map(str, sorted(e.counters)))}{pair}")
        if e.fixed is not None:
            click.echo(f"  counter:     fixed {e.fixed}")
        if e.registers:
            click.echo(f"  registers:   {','.join(sorted(e.registers))} (one per run)")
        if e.leader:
            click.echo(f"  group:       led by {e.leader} (perf gets them as one group)")
        if e.taken_alone:
            click.echo("  taken alone: no other generic counter in use in its run")
        if e.errata:
            click.echo(f"  errata:      {e.errata}")
        if e.description:
            click.echo(f"  {e.description}")


@events.command("update")
@click.option(
    "--from",
    "source",
    required=True,
    type=click.Path(file_okay=False),
    help="An Intel perfmon checkout, perf's arch/x86 or arch/arm64 folder, or a Linux checkout.",
)
@click.option(
    "--vendor",
    type=click.Choice(["intel", "amd", "arm64"]),
    help="Only this vendor's data (a Linux checkout holds AMD's and Arm64's).",
)
def update_events(source: str, vendor: str | None) -> None:
    """Use a newer copy of the event data autoprof ships.

    The copy is kept in the user's cache and replaces the shipped data from then on."""
    from pathlib import Path

    from autoprof.catalog import update

    for name, where, models in update.update(Path(source), vendor):
        click.echo(f"{name}: {models} models from {source}, now used from {where}")
