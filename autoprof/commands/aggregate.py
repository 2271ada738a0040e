"""`autoprof aggregate OUT`: a profile folder -> results.csv and report.json."""

from __future__ import annotations

from pathlib import Path

import click

from autoprof import outdir
from autoprof.commands.common import console
from autoprof.errors import AutoprofError


@click.command("aggregate")
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"results file (default OUT/{outdir.RESULTS}); the report goes to OUT/{outdir.REPORT}",
)
@click.option(
    "--exact-only",
    is_flag=True,
    help="write only rows counted 100% of the time (default: every row with a value, "
    "multiplexed ones marked in STATUS)",
)
def aggregate(out: Path, output: Path | None, exact_only: bool) -> None:
    """Parse every run of the profile folder OUT into one long-format results.csv."""
    from autoprof import aggregate as agg
    from autoprof import sanity

    result = agg.aggregate_to(out, output, str(output or outdir.RESULTS), exact_only)
    sanity.render(result.report, console())
    path = output or Path(out) / outdir.RESULTS
    click.echo(f"results: {path}")
    click.echo(f"report:  {Path(out) / outdir.REPORT}")
    if not result.usable:
        raise AutoprofError(f"nothing usable in {out}: {agg.summary(result.report)}")
