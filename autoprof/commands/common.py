"""Options shared by several commands (asv's common_args), and the catalog they describe."""

from __future__ import annotations

from collections.abc import Callable

import click

from autoprof.catalog import host
from autoprof.catalog.host import build_catalog

__all__ = ["build_catalog", "catalog_options"]


def catalog_options(func: Callable) -> Callable:
    """--events-dir, --cpu, --smt, --reserve and the opt-in event sets."""
    options = [
        click.option(
            "--events-dir",
            type=click.Path(file_okay=False),
            help=f"Intel perfmon directory (mapfile.csv); default ${host.ENV_EVENTS_DIR} "
            "or ~/.cache/autoprof/events/intel.",
        ),
        click.option(
            "--cpu", help="CPU id (GenuineIntel-6-55-4) or platform (SKX); default: this machine."
        ),
        click.option(
            "--smt",
            type=click.Choice(["on", "off"]),
            default=None,
            help="SMT state the plan is for (off uses CounterHTOff); default: this "
            "machine's, or on for another --cpu.",
        ),
        click.option(
            "--reserve",
            type=click.IntRange(0, 8),
            default=0,
            show_default=True,
            help="Generic counters taken by others in every run (1 with the NMI watchdog on).",
        ),
        click.option("--experimental", is_flag=True, help="Include experimental uncore events."),
        click.option("--deprecated", is_flag=True, help="Include deprecated events."),
        click.option(
            "--offcore-matrix",
            is_flag=True,
            help="Include every request x response of old offcore matrix files.",
        ),
        click.option("--tracepoints", is_flag=True, help="Include this machine's tracepoints."),
    ]
    for option in reversed(options):
        func = option(func)
    return func
