"""`autoprof analyze <name>`: the analyses of a results.csv, one subcommand each.

The scripts in `analyze/` run these same commands (`autoprof.cli.main_analyze`), so there is
one implementation and two entry points. The commands only read files, call an analysis of
`autoprof.analysis` and hand the result it returns to the renderer that `-o`'s extension picks.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from autoprof.analysis import choices
from autoprof.benchmark.options import GateOptions
from autoprof.commands.common import (
    console,
    declared_flags,
    declared_values,
    fail_if_option,
    metric_catalog_options,
    report_gates,
    store_option,
)

if TYPE_CHECKING:
    from autoprof.analysis.tables import Result

RESULTS = click.Path(exists=False, path_type=Path)


def _results(ctx: click.Context, param: click.Parameter, value: Path) -> Path:
    """A results.csv, or the profile folder that holds one (autoperf's `correlation.py ./out`)."""
    from autoprof.analysis import data

    return data.results_path(value)


def _results_argument(name: str):
    return click.argument(name, type=RESULTS, callback=_results)


def _out(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """An output no renderer can write (an unknown extension, a figure to standard output) is
    refused before the analysis runs."""
    from autoprof.analysis import renderers

    return renderers.check(value)


def _out_option(function):
    return click.option(
        "-o",
        "--out",
        type=click.Path(path_type=Path),
        default=None,
        callback=_out,
        help="A folder for every output [default: analysis/ beside the (first) results file], "
        "or one file whose extension picks the format: .png or .svg (the figure), .csv (the "
        "main table), .txt (the terminal's tables); - the main table as CSV on standard "
        "output, -.txt the tables.",
    )(function)


def _region_option(function):
    return click.option(
        "--region",
        metavar="NAME",
        default=None,
        help="Analyse region NAME's rows (profile --region) [default: the whole program's].",
    )(function)


def _top_option(default: int, text: str):
    return click.option(
        "--top", "k", type=click.IntRange(min=1), default=default, show_default=True, help=text
    )


def _show(result: Result, out: Path | None, folder: Path) -> None:
    """Hand `result` to the renderers (by `out`'s extension; no `out`: into `folder`), then
    tell its notes and the files written: on standard error when standard output carries the
    result (`-o -`)."""
    from autoprof.analysis import renderers

    written = renderers.render(result, out, folder, console(highlight=False))
    piped = renderers.stdout_format(out) is not None
    for line in result.notes():
        click.echo(line, err=piped)
    for path in written:
        click.echo(f"wrote {path}")


class _Names(click.Group):
    """Accept `event_detail` (the script's name) as well as `event-detail`."""

    def get_command(self, ctx: click.Context, cmd_name: str):
        return super().get_command(ctx, cmd_name.replace("_", "-"))


@click.group("analyze", cls=_Names)
def analyze() -> None:
    """Analyse a results.csv: correlation, stats, compare.

    correlation, event-detail, stats, compare and metrics."""


@analyze.command("correlation")
@_results_argument("results")
@_out_option
@click.option(
    "--method",
    type=click.Choice(choices.CORRELATION_METHODS),
    default="pearson",
    show_default=True,
    help="pearson: linear relation of the counts; spearman: of their ranks (any monotone one).",
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
@_region_option
def correlation(results, out, method, anchor, top, events, repeat, min_overlap, region) -> None:
    """Correlation matrix and heatmap of the events.

    Over the events' interval series, clustered.

    Events of different runs are aligned by interval index, so two events share only the
    intervals of the shorter run; pairs that share fewer than --min-overlap get no correlation.
    A region (--region) has one total per run and repeat: its samples are the repeats.
    """
    from autoprof.analysis import correlation as correlation_
    from autoprof.analysis import data

    frame = data.load(results, data.SERIES_COLUMNS, region)
    if region is not None:  # a region's repeats are its series
        frame = frame.assign(INDEX=frame["REPEAT"] - 1, REPEAT=1)
    manifest = data.read_manifest_beside(results)
    attached = manifest is not None and bool(manifest.attach)
    found = correlation_.analyse(frame, method, anchor, events, top, repeat, min_overlap, attached)
    _show(found, out, results.parent / "analysis")


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
    """Plot chosen events over time.

    Line plot of chosen events over time (the TIME column), as PNG and SVG. autoperf's
    AVG./MAX./MIN./STD. prefixes (-e MAX.EVENT) plot that statistic over CPUs/boxes.

    With no -e/--events, plots the most variable events.
    """
    from autoprof.analysis import data
    from autoprof.analysis import event_detail as event_detail_

    frame = data.load(results, [*data.SERIES_COLUMNS, "VALUE_UNIT"])
    found = event_detail_.analyse(frame, list(names), events, rate, shared, log)
    _show(found, out, results.parent / "analysis")


@analyze.command("stats")
@_results_argument("results")
@_out_option
@_top_option(10, "Rows in the top-K tables.")
@_region_option
def stats(results, out, k, region) -> None:
    """Summary of a results file: events, samples, sanity.

    Events, samples, zero and untrustworthy events, top events."""
    import pandas as pd

    from autoprof.analysis import data
    from autoprof.analysis import stats as stats_
    from autoprof.results import csvfile

    frame = data.load(results, region=region)
    manifest = data.read_manifest_beside(results)
    sides = pd.DataFrame()
    if region is None:  # the whole program beside its regions, or its threads
        everything = csvfile.read_csv(results)
        sides = data.region_totals(everything)
        if manifest is not None and manifest.options.per_thread:
            sides = data.thread_totals(everything)
    name = str(results) if region is None else f"{results} (region {region})"
    found = stats_.analyse(frame, data.read_report_beside(results), name, k, sides)
    _show(found, out, results.parent / "analysis")


@analyze.command("compare")
@click.argument("a_ref", metavar="A")
@click.argument("b_ref", metavar="B")
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
@fail_if_option
@declared_flags(GateOptions)
@store_option
@_region_option
def compare(a_ref, b_ref, out, test, alpha, k, gates, store_text, region, **declared) -> None:
    """What changed from results A to results B.

    Ratios, p-values, the largest changes. With --fail-if, a regression gate instead: A is
    the baseline, B the change (results, profile or bench folders, bench.json files or
    stored runs, store:ID or store:KEY=VALUE); exit 1 when a gate fails, 0 when all hold."""
    from autoprof.analysis import compare as compare_
    from autoprof.analysis import data

    gating = declared_values(GateOptions, declared)
    if gates:
        return _gate(a_ref, b_ref, gates, gating, store_text, region)
    a, b = data.results_path(a_ref), data.results_path(b_ref)

    frame_a = data.load(a, data.SERIES_COLUMNS, region)
    frame_b = data.load(b, data.SERIES_COLUMNS, region)
    for warning in compare_.check_same_cpu(a, b):
        click.echo(f"warning: {warning}", err=True)
    found = compare_.analyse(frame_a, frame_b, test, alpha, k, (str(a), str(b)))
    _show(found, out, a.parent / "analysis")


def _gate(a_ref: str, b_ref: str, texts, gating, store_text, region: str | None) -> None:
    """`compare --fail-if`: the gates of B against the baseline A (`analysis.gate`)."""
    import sys

    from autoprof.analysis import gate
    from autoprof.store import baseline

    gates = [gate.parse(t) for t in texts]
    base, a_name = baseline.samples(a_ref, store_text, region)
    now, b_name = baseline.samples(b_ref, store_text, region)
    found = gate.check(gates, base, now, (a_name, b_name), gating.confidence)
    report_gates(found, gating, console(stderr=True))
    if found.failed:
        sys.exit(1)


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


@click.command("metrics")
@click.argument("results", type=click.Path(path_type=Path))
@metric_catalog_options
@click.option(
    "-o",
    "--out",
    type=click.Path(path_type=Path),
    callback=_out,
    help="Output folder [default: analysis/ beside the results], or one file: .csv (the "
    "metrics.csv table), .txt (the terminal's lines); - the table as CSV on standard output, "
    "-.txt the lines.",
)
@click.option(
    "--metrics",
    "metric_words",
    multiple=True,
    metavar="all|GROUP|NAME",
    help="Only these metrics (repeatable).",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="NAME=VALUE",
    help="A constant (SYSTEM_TSC_FREQ=2.1e9, HYPERTHREADING_ON=1, SOCKET_COUNT=2, ...).",
)
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Show every TMA node, not only under crossed thresholds.",
)
@click.option("--tree", "tree_only", is_flag=True, help="Print the top-down tree only.")
@_region_option
def analyze_metrics(
    results, events_dir, cpu, metrics_files, out, metric_words, sets, show_all, tree_only, region
) -> None:
    """Metric values of a results file (top-down tree too).

    Metric values from RESULTS (a results.csv or a profile folder): metrics.csv,
    metrics_series.csv and the top-down tree (Intel's TMA, AMD's Pipeline levels, Arm's
    Topdown levels)."""
    from dataclasses import asdict

    from autoprof.analysis import data
    from autoprof.analysis import metrics as analysis
    from autoprof.catalog import host
    from autoprof.metrics import catalog, constants

    path = results / "results.csv" if results.is_dir() else results
    manifest = data.read_manifest_beside(path)
    cpu = cpu or (manifest.machine.cpu_id if manifest else None)
    found = catalog.for_machine(events_dir, cpu, metrics_files)
    chosen = found.select(list(metric_words) or ["all"])
    for note in found.notes:
        click.echo(f"autoprof: note: {note}", err=True)
    names = {c for m in chosen for c in m.constants.values()}
    machine = asdict(manifest.machine) if manifest else None
    known, sources = constants.gather(machine, found.cpu, constants.parse_sets(sets), names)
    directory = host.events_dir(events_dir)
    retire = catalog.retire_latencies(directory, found.cpu) if directory else {}
    frame = data.load(path, region=region)
    values = analysis.compute(frame, chosen, known, retire)
    shown = analysis.Metrics(values, found.title, show_all, found.refines, tree_only, sources)
    shown.hardware = analysis.counted_hardware(frame)
    _show(shown, out, path.parent / "analysis")


analyze.add_command(analyze_metrics)
