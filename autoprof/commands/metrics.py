"""`autoprof metrics list|show`: the metric catalog (Intel's perfmon metrics, perf's own AMD
and Arm metrics, and YAML files)."""

from __future__ import annotations

import click

from autoprof.commands import common


@click.group("metrics")
def metrics() -> None:
    """List and describe the metrics of a CPU.

    Intel's perfmon metrics (TMA tree, Info, Bottlenecks), perf's own for AMD Zen and Arm cores
    (Pipeline and Topdown levels, ...) and your own (--metrics-file)."""


@metrics.command("list")
@common.metric_catalog_options
@click.option("--group", help="Only metrics of this group (TmaL1, Summary, ...).")
def list_command(events_dir, cpu, metrics_files, group) -> None:
    """List the metrics: name, level, parent, groups, unit."""
    from rich.table import Table

    from autoprof.metrics import catalog as metric_catalog

    found = metric_catalog.for_machine(events_dir, cpu, metrics_files)
    chosen = found.select([group]) if group else list(found.metrics.values())
    for note in found.notes:
        click.echo(f"autoprof: note: {note}", err=True)
    if not cpu:
        _say_what_counts_here()
    table = Table(title=f"{found.title}: {len(chosen)} metrics", title_justify="left")
    for column in ("metric", "level", "parent", "groups", "unit"):
        table.add_column(column)
    for m in chosen:
        unit = f"{m.scale:g} {m.unit}".strip() if m.scale != 1 else m.unit
        table.add_row(m.name, str(m.level), m.parent or "", ";".join(m.groups), unit)
    out = common.console(highlight=False)
    out.print(table)
    for name, why in [] if group else found.unreadable.items():
        out.print(f"not read: {name}: {why}", markup=False)


@metrics.command("show")
@common.metric_catalog_options
@click.argument("name")
def show_command(events_dir, cpu, metrics_files, name) -> None:
    """Everything about one metric.

    Its formula, events, constants and threshold."""
    from autoprof.metrics import catalog as metric_catalog

    found = metric_catalog.for_machine(events_dir, cpu, metrics_files)
    if not cpu:
        _say_what_counts_here()
    for m in found.select([name]):
        click.echo(f"{m.name} ({m.source}, level {m.level}, parent {m.parent or '-'})")
        click.echo(f"  {m.description}")
        scale = f" x {m.scale:g}" if m.scale != 1 else ""
        shown = f"   perf stat's default: {m.default_group}" if m.default_group else ""
        click.echo(f"  groups: {';'.join(m.groups) or '-'}   unit: {m.unit or '-'}{scale}{shown}")
        click.echo(f"  formula: {m.formula.text}")
        if m.refs:
            click.echo(f"  reads metrics: {', '.join(m.refs)}")
        for alias, event in m.events.items():
            click.echo(f"    {alias} = {event}")
        for alias, constant in m.constants.items():
            click.echo(f"    {alias} = constant {constant}")
        if m.threshold is not None:
            click.echo(f"  threshold: {m.threshold.text}")
            for alias, other in m.threshold_metrics.items():
                click.echo(f"    {alias} = metric {other}")


def _say_what_counts_here() -> None:
    """Before this machine's metrics: on a kernel without a hardware PMU (most cloud VMs), that
    none reading hardware events can be computed from a profile made here, and what can be."""
    from autoprof.catalog import host, machine

    if not machine.has_core_pmu():
        click.echo(
            f"autoprof: note: {host.no_pmu_note()}; the CPU's metrics read hardware events, so "
            "a profile made here computes none of them (analyze stats shows what it counts)",
            err=True,
        )
