"""`autoprof metrics list|show` (the metric catalog) and `autoprof analyze metrics` (metric
values from a results file); the options `profile --metrics` and `schedule --metrics` share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from autoprof.commands import common
from autoprof.errors import AutoprofError


def metric_file_option(func: Callable) -> Callable:
    return click.option(
        "--metrics-file",
        "metrics_files",
        multiple=True,
        type=click.Path(dir_okay=False),
        help="A YAML file of your own metrics, or `software` (shipped; repeatable).",
    )(func)


def planning_options(func: Callable) -> Callable:
    """--metrics, --metrics-file, --consistent: for `profile` and `schedule`."""
    func = click.option(
        "--consistent",
        is_flag=True,
        help="With --metrics: add runs so every metric whose events fit one run is measured "
        "in one run.",
    )(func)
    func = metric_file_option(func)
    return click.option(
        "--metrics",
        "metric_words",
        multiple=True,
        metavar="all|GROUP|NAME",
        help="Measure exactly the events these metrics need (repeatable; see `metrics list`).",
    )(func)


def load_metrics(events_dir: str | None, cpu: str | None, files: tuple[str, ...]):
    """The metric set for --events-dir/--cpu (this machine by default) plus YAML files."""
    from autoprof.catalog import host
    from autoprof.metrics import catalog

    directory = host.events_dir(events_dir)
    files = tuple(f if Path(f).exists() else _builtin(f) for f in files)
    if directory is None and not files:
        raise AutoprofError(
            f"no metrics: pass --events-dir (or set {host.ENV_EVENTS_DIR}) or --metrics-file"
        )
    return catalog.load(directory, cpu or host.cpu_id(), [Path(f) for f in files])


def _builtin(name: str) -> str:
    """A metrics file shipped with autoprof (``software``), or the name as given."""
    from autoprof.catalog.yaml import BUILTIN_DIR

    shipped = BUILTIN_DIR / "metrics" / f"{name}.yaml"
    return str(shipped) if shipped.is_file() else name


def metric_plan(options: dict, words, files, consistent: bool, anchor: str | None = None):
    """The co-scheduled plan for `profile --metrics` / `schedule --metrics` (catalog options as
    the commands take them; deprecated and experimental events included, as metrics use them)."""
    from autoprof.catalog import host
    from autoprof.metrics import catalog as metric_catalog
    from autoprof.metrics.plan import plan_metrics

    metrics = load_metrics(options.get("events_dir"), options.get("cpu"), files)
    chosen = metrics.select(list(words) or ["all"])
    built = common.build_catalog(**{**options, "deprecated": True, "experimental": True})
    smt = options.get("smt")
    smt_on = host.smt_active() if smt is None and not options.get("cpu") else smt != "off"
    directory = host.events_dir(options.get("events_dir"))
    retire = metric_catalog.retire_latencies(directory, metrics.cpu) if directory else {}
    return plan_metrics(built, chosen, smt_on, consistent, retire, [anchor] if anchor else [])


@click.group("metrics")
def metrics() -> None:
    """The metric catalog: Intel's perfmon metrics (TMA tree, Info, Bottlenecks) and yours."""


def _catalog_args(func: Callable) -> Callable:
    func = metric_file_option(func)
    func = click.option("--cpu", help="CPU id or platform (SKX); default: this machine.")(func)
    return click.option(
        "--events-dir", type=click.Path(file_okay=False), help="Intel perfmon directory."
    )(func)


@metrics.command("list")
@_catalog_args
@click.option("--group", help="Only metrics of this group (TmaL1, Summary, ...).")
def list_command(events_dir, cpu, metrics_files, group) -> None:
    """List the metrics: name, level, parent, groups, unit."""
    from rich.table import Table

    found = load_metrics(events_dir, cpu, metrics_files)
    chosen = found.select([group]) if group else list(found.metrics.values())
    table = Table(title=f"{found.cpu}: {len(chosen)} metrics", title_justify="left")
    for column in ("metric", "level", "parent", "groups", "unit"):
        table.add_column(column)
    for m in chosen:
        table.add_row(m.name, str(m.level), m.parent or "", ";".join(m.groups), m.unit)
    common.console(highlight=False).print(table)


@metrics.command("show")
@_catalog_args
@click.argument("name")
def show_command(events_dir, cpu, metrics_files, name) -> None:
    """Everything about one metric: formula, events, constants, threshold."""
    found = load_metrics(events_dir, cpu, metrics_files)
    for m in found.select([name]):
        click.echo(f"{m.name} ({m.source}, level {m.level}, parent {m.parent or '-'})")
        click.echo(f"  {m.description}")
        click.echo(f"  groups: {';'.join(m.groups) or '-'}   unit: {m.unit or '-'}")
        click.echo(f"  formula: {m.formula.text}")
        for alias, event in m.events.items():
            click.echo(f"    {alias} = {event}")
        for alias, constant in m.constants.items():
            click.echo(f"    {alias} = constant {constant}")
        if m.threshold is not None:
            click.echo(f"  threshold: {m.threshold.text}")
            for alias, other in m.threshold_metrics.items():
                click.echo(f"    {alias} = metric {other}")


def _checked_out(ctx: click.Context, param: click.Parameter, out: Path | None) -> Path | None:
    """An output extension no renderer knows is refused before the metrics are computed."""
    from autoprof.analysis import renderers

    return renderers.check(out)


@click.command("metrics")
@click.argument("results", type=click.Path(path_type=Path))
@_catalog_args
@click.option(
    "-o",
    "--out",
    type=click.Path(path_type=Path),
    callback=_checked_out,
    help="Output folder [default: analysis/ beside the results], or one file: .csv (the "
    "metrics.csv table), .txt (the terminal's lines).",
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
def analyze_metrics(
    results, events_dir, cpu, metrics_files, out, metric_words, sets, show_all
) -> None:
    """Metric values from RESULTS (a results.csv or a profile folder): metrics.csv,
    metrics_series.csv and the TMA tree."""
    from dataclasses import asdict

    from autoprof.analysis import data, renderers
    from autoprof.analysis import metrics as analysis
    from autoprof.catalog import host
    from autoprof.metrics import catalog, constants

    path = results / "results.csv" if results.is_dir() else results
    manifest = data.read_manifest_beside(path)
    cpu = cpu or (manifest.machine.cpu_id if manifest else None)
    found = load_metrics(events_dir, cpu, metrics_files)
    known = constants.from_machine(asdict(manifest.machine) if manifest else None)
    known.update(constants.parse_sets(sets))
    directory = host.events_dir(events_dir)
    retire = catalog.retire_latencies(directory, found.cpu) if directory else {}
    values = analysis.compute(
        data.load(path), found.select(list(metric_words) or ["all"]), known, retire
    )
    shown = analysis.Metrics(values, found.cpu, show_all)
    folder = path.parent / "analysis"
    written = renderers.render(shown, out, folder, common.console(highlight=False))
    for line in shown.notes():
        click.echo(line)
    for written_path in written:
        click.echo(f"wrote {written_path}")
