"""`autoprof aggregate OUT`: a profile folder -> results.csv and report.json."""

from __future__ import annotations

from pathlib import Path

import click

from autoprof import outdir
from autoprof.commands.common import console


@click.command("aggregate")
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"results file (default OUT/{outdir.RESULTS}); the report goes to OUT/{outdir.REPORT}",
)
def aggregate(out: Path, output: Path | None) -> None:
    """Parse every run of the profile folder OUT into one long-format results.csv."""
    from autoprof import aggregate as agg

    result = agg.aggregate(out, results_name=str(output or outdir.RESULTS))
    path = agg.write(out, result, output)
    agg.render_report(result.report, console())
    click.echo(f"results: {path}")
    click.echo(f"report:  {Path(out) / outdir.REPORT}")
