"""`autoprof analyze <name>`: the analyses of a results.csv, one subcommand each.

The scripts in `analyze/` run these same commands (`run_script`), so there is one
implementation and two entry points. The commands only read files, call the pure functions of
`autoprof.analysis` and write what they return.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from autoprof.analysis import choices
from autoprof.commands.common import console
from autoprof.commands.metrics import analyze_metrics

if TYPE_CHECKING:
    import pandas as pd
    from rich.table import Table

RESULTS = click.Path(exists=False, path_type=Path)


def _results(ctx: click.Context, param: click.Parameter, value: Path) -> Path:
    """A results.csv, or the profile folder that holds one (autoperf's `correlation.py ./out`)."""
    from autoprof.analysis import data

    return data.results_path(value)


def _results_argument(name: str):
    return click.argument(name, type=RESULTS, callback=_results)


def _out_option(function):
    return click.option(
        "-o",
        "--out",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Folder for the outputs [default: analysis/ beside the (first) results file].",
    )(function)


def _top_option(default: int, text: str):
    return click.option(
        "--top", "k", type=click.IntRange(min=1), default=default, show_default=True, help=text
    )


def _out_dir(out: Path | None, results: Path) -> Path:
    folder = out if out is not None else results.parent / "analysis"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _wrote(*paths: Path) -> None:
    for path in paths:
        click.echo(f"wrote {path}")


def _rich_table(title: str, frame: pd.DataFrame, index: str | None = None) -> Table:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    if index:
        table.add_column(index)
    for name in frame.columns:
        table.add_column(str(name), justify="right" if frame[name].dtype.kind in "iuf" else "left")
    for label, row in frame.iterrows():
        cells = [_cell(v) for v in row]
        table.add_row(*([str(label)] if index else []), *cells)
    return table


def _cell(value: object) -> str:
    import pandas as pd

    if isinstance(value, float):
        if value != value:
            return ""
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.4e}"
    return "" if value is None or value is pd.NA else str(value)


class _Names(click.Group):
    """Accept `event_detail` (the script's name) as well as `event-detail`."""

    def get_command(self, ctx: click.Context, cmd_name: str):
        return super().get_command(ctx, cmd_name.replace("_", "-"))


@click.group("analyze", cls=_Names)
def analyze() -> None:
    """Analyses of a results.csv: correlation, event-detail, stats, compare, metrics."""


analyze.add_command(analyze_metrics)


@analyze.command("correlation")
@_results_argument("results")
@_out_option
@click.option(
    "--method", type=click.Choice(choices.CORRELATION_METHODS), default="pearson", show_default=True
)
@click.option(
    "--anchor",
    metavar="EVENT",
    help="Divide counts by this event's count (per run and interval), e.g. task-clock.",
)
@click.option(
    "--top", type=click.IntRange(min=2), metavar="K", help="Keep the K most variable events."
)
@click.option("--events", metavar="REGEX", help="Only events whose name matches REGEX.")
@click.option(
    "--repeat", type=click.IntRange(min=1), help="Use this repetition only [default: mean of all]."
)
@click.option(
    "--min-overlap",
    type=click.IntRange(min=2),
    default=None,
    metavar="N",
    help=f"Fewest intervals two events must share to be correlated [default: "
    f"{choices.CORRELATION_MIN_OVERLAP}, or the results' number of intervals when fewer, at "
    f"least {choices.CORRELATION_FEWEST_OVERLAP}].",
)
def correlation(results, out, method, anchor, top, events, repeat, min_overlap) -> None:
    """Correlation matrix and clustered heatmap of the events' interval series.

    Events of different runs are aligned by interval index, so two events share only the
    intervals of the shorter run; pairs that share fewer than --min-overlap get no correlation.
    """
    from autoprof.analysis import correlation as correlation_
    from autoprof.analysis import data

    frame = data.load(results, data.SERIES_COLUMNS)
    result = correlation_.analyse(frame, method, anchor, events, top, repeat, min_overlap)
    min_overlap = result.min_overlap
    if result.min_overlap_chosen and min_overlap != correlation_.MIN_OVERLAP:
        click.echo(
            f"--min-overlap {min_overlap} chosen from the data: the results have "
            f"{result.intervals} intervals, fewer than the default {correlation_.MIN_OVERLAP} "
            "(set --min-overlap to change it)"
        )
    folder = _out_dir(out, results)
    matrix_path = folder / "correlation_matrix.csv"
    result.matrix.to_csv(matrix_path, index_label="event", float_format="%.6g")
    heatmap_path = folder / "correlation_heatmap.png"
    correlation_.heatmap(result).savefig(heatmap_path)
    written = [matrix_path, heatmap_path]
    if not result.labelled:
        index_path = folder / "correlation_index.csv"
        result.index_table().to_csv(index_path, index=False)
        written.append(index_path)
    if len(result.excluded):
        excluded_path = folder / "correlation_excluded.csv"
        result.excluded.to_csv(excluded_path, index=False)
        written.append(excluded_path)
        shown = ", ".join(f"{e} ({r})" for e, r in result.excluded.head(10).to_numpy())
        more = f" and {len(result.excluded) - 10} more" if len(result.excluded) > 10 else ""
        click.echo(f"left out {len(result.excluded)} event(s): {shown}{more}")
    if len(result.short_pairs):
        short_path = folder / "correlation_short_pairs.csv"
        result.short_pairs.to_csv(short_path, index=False)
        written.append(short_path)
        click.echo(
            f"{len(result.short_pairs)} pair(s) of events share fewer than {min_overlap} "
            "intervals (runs of different lengths): no correlation, grey on the heatmap"
        )
    manifest = data.read_manifest_beside(results)
    if manifest is not None and manifest.attach:
        cross = correlation_.cross_run_pairs(frame, list(result.matrix.index))
        cross_path = folder / "correlation_cross_run.csv"
        cross.to_csv(cross_path, index=False)
        written.append(cross_path)
        click.echo(
            f"warning: attached profile: {len(cross)} pair(s) of events were measured in "
            "different runs, i.e. at different moments of the target; their correlation "
            "aligns intervals by index, not by time (listed in correlation_cross_run.csv)"
        )
    click.echo(
        f"{len(result.matrix)} events over {result.intervals} intervals, {method} correlation"
    )
    _wrote(*written)


@analyze.command("event-detail")
@_results_argument("results")
@_out_option
@click.option(
    "-e", "--event", "names", multiple=True, metavar="NAME", help="An event to plot (repeatable)."
)
@click.option("--events", metavar="REGEX", help="Also plot the events whose name matches REGEX.")
@click.option(
    "--shared", is_flag=True, help="All events on one set of axes instead of one panel each."
)
@click.option("--rate", is_flag=True, help="Plot counts per second of each interval's real length.")
@click.option("--log", is_flag=True, help="Logarithmic value axis.")
def event_detail(results, out, names, events, shared, rate, log) -> None:
    """Line plot of chosen events over time (the TIME column), as PNG and SVG. autoperf's
    AVG./MAX./MIN./STD. prefixes (-e MAX.EVENT) plot that statistic over CPUs/boxes.

    With no -e/--events, plots the most variable events.
    """
    from autoprof.analysis import data
    from autoprof.analysis import event_detail as event_detail_

    frame = data.load(results, [*data.SERIES_COLUMNS, "VALUE_UNIT"])
    intervals = event_detail_.add_features(frame, data.per_interval(frame), list(names))
    chosen = event_detail_.choose(intervals, list(names), events)
    lines = event_detail_.timelines(intervals, chosen, rate)
    event_detail_.check_plottable(lines, chosen)
    units = event_detail_.feature_units(event_detail_.value_units(frame), chosen)
    figure = event_detail_.plot(lines, chosen, units, shared, rate, log)
    folder = _out_dir(out, results)
    paths = [folder / "event_detail.png", folder / "event_detail.svg"]
    for path in paths:
        figure.savefig(path)
    click.echo(f"plotted {', '.join(chosen)}")
    _wrote(*paths)


@analyze.command("stats")
@_results_argument("results")
@_out_option
@_top_option(10, "Rows in the top-K tables.")
def stats(results, out, k) -> None:
    """Summary of a results file: events, samples, zero and untrustworthy events, top events."""
    from autoprof.analysis import data
    from autoprof.analysis import stats as stats_

    frame = data.load(results)
    table = stats_.event_table(frame)
    summary = stats_.summarize(frame, table, data.read_report_beside(results))
    out_console = console(highlight=False)
    out_console.print(_rich_table(f"{results}", summary.table().set_index("metric"), "metric"))
    out_console.print(f"sanity lists from the {summary.source}")
    for warning in summary.warnings:
        out_console.print(f"warning: {warning}")
    if len(summary.sanity):
        out_console.print(_rich_table("Events not to trust blindly", summary.sanity.head(3 * k)))
    out_console.print(
        _rich_table(f"Top {k} events by total count", stats_.top(table, "total", k), "event")
    )
    out_console.print(
        _rich_table(f"Top {k} events by variability (cv)", stats_.top(table, "cv", k), "event")
    )
    folder = _out_dir(out, results)
    paths = [folder / "stats.csv", folder / "stats_summary.csv", folder / "stats_sanity.csv"]
    table.to_csv(paths[0])
    summary.table().to_csv(paths[1], index=False)
    summary.sanity.to_csv(paths[2], index=False)
    _wrote(*paths)


@analyze.command("compare")
@_results_argument("a")
@_results_argument("b")
@_out_option
@click.option(
    "--test",
    type=click.Choice(choices.COMPARE_TESTS),
    default="welch",
    show_default=True,
    help="Welch's t-test or Mann-Whitney U across repeats.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="False discovery rate for 'significant'.",
)
@_top_option(20, "Changes to show and plot.")
def compare(a, b, out, test, alpha, k) -> None:
    """What changed from results A to results B: ratios, p-values, the largest changes."""
    from autoprof.analysis import compare as compare_
    from autoprof.analysis import data

    frame_a, frame_b = data.load(a, data.SERIES_COLUMNS), data.load(b, data.SERIES_COLUMNS)
    for warning in compare_.check_same_cpu(a, b):
        click.echo(f"warning: {warning}", err=True)
    table = compare_.compare(frame_a, frame_b, test, alpha)
    figure = compare_.plot(table, k, test)  # refuses before anything is written
    folder = _out_dir(out, a)
    paths = [folder / "compare.csv", folder / "compare.png"]
    table.to_csv(paths[0], index=False)
    figure.savefig(paths[1])
    significant = int(table["significant"].sum())
    shown = table.head(k).set_index("event")[
        ["total_a", "total_b", "ratio", "p_value", "q_value", "significant", "note"]
    ]
    out_console = console(highlight=False)
    out_console.print(_rich_table(f"Largest changes, B = {b} vs A = {a}", shown, "event"))
    out_console.print(
        f"{significant} of {len(table)} events changed significantly (q < {alpha}, {test})"
    )
    _wrote(*paths)


def autoperf_args(argv: list[str]) -> list[str]:
    """autoperf's `event_detail.py --resultdir DIR --features F1 F2 ...` as this command's
    `DIR -e F1 -e F2`; other arguments pass through unchanged."""
    out: list[str] = []
    words = iter(argv)
    features = False
    for word in words:
        if word == "--resultdir":
            out.insert(0, next(words, ""))
            features = False
        elif word.startswith("--resultdir="):
            out.insert(0, word.partition("=")[2])
        elif word == "--features":
            features = True
        elif features and not word.startswith("-"):
            out += ["-e", word]
        else:
            features = False
            out.append(word)
    return out


def run_script(name: str) -> None:
    """Entry point of the `analyze/<name>.py` scripts: `autoprof analyze <name> ARGS...`,
    with autoperf's own calling forms (`correlation.py ./out`, `event_detail.py --resultdir
    ./out --features AVG.EVENT`) accepted too."""
    from autoprof.cli import cli

    cli.main(args=["analyze", name, *autoperf_args(sys.argv[1:])], prog_name="autoprof")
