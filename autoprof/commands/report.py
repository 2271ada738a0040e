"""`autoprof report`: one row per function with every sampled event side by side."""

from __future__ import annotations

from pathlib import Path

import click

from autoprof.commands import common


@click.command("report")
@click.argument("recording", type=click.Path(path_type=Path))
@click.option("--sort", "sort_event", help="Order by this event (default: the first sampled).")
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Rows printed, the most sampled first (--csv writes all).",
)
@click.option(
    "--by",
    type=click.Choice(["symbol", "dso", "comm"]),
    default="symbol",
    show_default=True,
    help="One row per function, per shared object or per process.",
)
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), help="Write all rows ('-').")
def report_command(
    recording: Path, sort_event: str | None, top: int, by: str, csv_path: Path | None
) -> None:
    """Print the per-function samples of a recording.

    Per-function samples of every event of RECORDING (an `autoprof record` folder, a
    perf.data or `perf script` text): weighted by period, shares, and ratios.

    \b
    Example:  autoprof record -e cpu-clock -e page-faults -o out/rec -- ./myprog
              autoprof report out/rec --top 10 --csv functions.csv
    """
    from autoprof.functions.recording import read_table
    from autoprof.functions.render import CsvRenderer, TopRenderer
    from autoprof.util.renderer import write

    table, notes = read_table(recording, by, sort_event)
    for note in notes:
        click.echo(f"autoprof: note: {recording}: {note}", err=True)
    if csv_path is not None:
        if write(CsvRenderer().render(table), csv_path) is None:
            return  # standard output carries the CSV alone
        click.echo(f"wrote {csv_path}: {len(table.rows)} rows", err=True)
    title = f"{recording}: self {table.counted} by {by}"
    write(TopRenderer(top, title, common.console()).render(table), None)
