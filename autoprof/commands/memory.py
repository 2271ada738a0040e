"""`autoprof memory`: a heap profile over time under valgrind's massif."""

from __future__ import annotations

from pathlib import Path

import click

from autoprof.commands import common
from autoprof.util.status import RunStatus


@click.command("memory", context_settings={"ignore_unknown_options": True})
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("out/memory"),
    show_default=True,
    callback=common.existing_parent,
    help="Folder for massif.out, memory.json, memory.png and memory.svg.",
)
@click.option(
    "--threshold",
    type=float,
    default=1.0,
    show_default=True,
    help="Percent of the peak below which allocation sites are lumped together.",
)
@click.option("--pages-as-heap", is_flag=True, help="Count mapped pages, not malloc calls.")
@click.option(
    "--time-unit",
    type=click.Choice(["i", "ms", "B"]),
    default="i",
    show_default=True,
    help="Instructions, milliseconds or bytes allocated.",
)
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Allocation sites listed, largest first.",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def memory_command(
    output: Path,
    threshold: float,
    pages_as_heap: bool,
    time_unit: str,
    top: int,
    command: tuple[str, ...],
) -> None:
    """Profile the heap of a command over time (massif).

    Profile the heap of COMMAND over time (valgrind --tool=massif): a plot stacked by the
    top allocation sites and the peak's allocation tree.

    \b
    Example:  autoprof memory -o out/mem -- ./myprog input.dat
    """
    from autoprof.memory.profile import MEMORY_JSON, MemoryOptions, run

    profile = run(MemoryOptions(threshold, pages_as_heap, time_unit, top), output, list(command))
    for note in profile.notes:
        click.echo(f"autoprof: note: {note}", err=True)
    if profile.status == RunStatus.WORKLOAD_FAILED:
        click.echo(
            f"autoprof: warning: the command exited with status {profile.exit_code}", err=True
        )
    _print_peak(profile)
    click.echo(f"wrote {output / MEMORY_JSON}, memory.png, memory.svg")


def _print_peak(profile) -> None:
    from rich.table import Table
    from rich.text import Text

    mib = 1024 * 1024
    table = Table(title=f"peak heap {profile.peak_bytes / mib:,.2f} MiB at t={profile.peak_time}")
    table.add_column("MiB", justify="right")
    table.add_column("%", justify="right")
    table.add_column("allocation tree at the peak", overflow="fold")
    for row in profile.peak_tree[:25]:
        table.add_row(
            f"{row['bytes'] / mib:,.2f}",
            f"{row['percent']:.1f}",
            Text("  " * row["depth"] + row["location"]),
        )
    common.console().print(table)
