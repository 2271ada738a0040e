"""Options shared by several commands (asv's common_args), and the catalog they describe.

Every command module imports this one at its top, so it imports nothing beyond click: the
catalog, the runner and their libraries are imported by the functions that use them.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from autoprof.errors import AutoprofError
from autoprof.store import url as store_url

if TYPE_CHECKING:
    from rich.console import Console

    from autoprof.catalog.model import Catalog
    from autoprof.runner import ProfileOptions

# rich's width where the output is no terminal: lines (and table rows) are never wrapped there,
# since scripts and `grep` read them whole
UNWRAPPED_WIDTH = 100_000

# autoprof.catalog.host.ENV_EVENTS_DIR, spelled out so that --help needs no catalog import
# (tests/test_cli.py checks they agree)
ENV_EVENTS_DIR = "AUTOPROF_EVENTS_DIR"

__all__ = [
    "build_catalog",
    "catalog_options",
    "event_names",
    "key_values",
    "measure_options",
    "profile_options",
    "redis_option",
    "selection_options",
    "store_option",
]


def build_catalog(**options) -> Catalog:
    """The catalog the command-line options describe (`autoprof.catalog.host.build_catalog`,
    imported when a command first needs one), refusing a --reserve that the CPU's counters
    cannot honour."""
    from autoprof import preflight
    from autoprof.catalog import host

    catalog = host.build_catalog(**options)
    preflight.check_reserve(catalog.pmus.values(), options.get("reserve", 0))
    return catalog


def console(stderr: bool = False, highlight: bool = True) -> Console:
    """A rich console on stdout (or stderr): the terminal's width on a terminal; in a pipe or a
    file no wrapping at all (rich would assume 80 columns and cut lines in two)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else UNWRAPPED_WIDTH
    return Console(stderr=stderr, width=width, highlight=highlight)


def next_hint(*argv: str | Path) -> str:
    """ "next: autoprof ..." with every argument shell-quoted, so it can be pasted as is."""
    return "next: " + shlex.join(str(arg) for arg in argv)


def _apply(func: Callable, options: list) -> Callable:
    for option in reversed(options):
        func = option(func)
    return func


def selection_options(func: Callable) -> Callable:
    """--reserve and the opt-in event sets: what to measure, whatever the machine."""
    return _apply(
        func,
        [
            click.option(
                "--reserve",
                type=click.IntRange(0, 8),
                default=0,
                show_default=True,
                help="Generic counters taken by others in every run (1 with the NMI watchdog on).",
            ),
            click.option(
                "--experimental", is_flag=True, help="Include experimental uncore events."
            ),
            click.option("--deprecated", is_flag=True, help="Include deprecated events."),
            click.option(
                "--offcore-matrix",
                is_flag=True,
                help="Include every request x response of old offcore matrix files.",
            ),
            click.option("--tracepoints", is_flag=True, help="Include this machine's tracepoints."),
        ],
    )


def catalog_options(func: Callable) -> Callable:
    """--events-dir, --cpu, --smt (which machine's catalog), then the selection options."""
    return _apply(
        func,
        [
            click.option(
                "--events-dir",
                type=click.Path(file_okay=False),
                help=f"Intel perfmon directory (mapfile.csv); default ${ENV_EVENTS_DIR} "
                "or ~/.cache/autoprof/events/intel.",
            ),
            click.option(
                "--cpu",
                help="CPU id (GenuineIntel-6-55-4) or platform (SKX); default: this machine.",
            ),
            click.option(
                "--smt",
                type=click.Choice(["on", "off"]),
                default=None,
                help="SMT state the plan is for (off uses CounterHTOff); default: this "
                "machine's, or on for another --cpu.",
            ),
            selection_options,
        ],
    )


def measure_options(func: Callable) -> Callable:
    """-e/--events (which events) and how each run measures: shared by `profile` and `submit`."""
    return _apply(
        func,
        [
            click.option(
                "-e",
                "--event",
                "event_names",
                multiple=True,
                help="Measure only these events (repeatable): catalog names, tracepoints, "
                "mem:ADDR:w breakpoints.",
            ),
            click.option(
                "--events",
                "events_file",
                type=click.Path(dir_okay=False),
                help="File with one event per line (# comments).",
            ),
            click.option(
                "--interval",
                "interval_ms",
                default=100,
                show_default=True,
                type=click.IntRange(10),
                help="perf stat -I interval in ms.",
            ),
            click.option(
                "--repeat",
                default=1,
                show_default=True,
                type=click.IntRange(1),
                help="Run every group this many times.",
            ),
            click.option(
                "-a", "--system-wide", is_flag=True, help="Count on all CPUs (perf -a -A)."
            ),
            click.option("--cpu-list", help="Count on these CPUs only (perf -C LIST -A)."),
            click.option(
                "--timeout",
                type=click.FloatRange(0, min_open=True),
                help="Seconds after which a run is stopped.",
            ),
            click.option(
                "--fail-fast", is_flag=True, help="Stop at the first run whose workload fails."
            ),
            click.option(
                "--anchor",
                metavar="EVENT",
                help="Count this software event (task-clock) in every run, so analyses can "
                "normalise events of different runs by it.",
            ),
            click.option(
                "--retries",
                default=0,
                show_default=True,
                type=click.IntRange(0, 10),
                help="Run a failed run again up to N times (failed attempts are kept in "
                "OUT/attempts/).",
            ),
        ],
    )


def event_names(event_names: tuple[str, ...], events_file: str | None) -> list[str]:
    """The -e events, then the --events file's (one per line, # comments)."""
    names = list(event_names)
    if events_file:
        try:
            lines = Path(events_file).read_text().splitlines()
        except OSError as err:
            raise AutoprofError(
                f"cannot read --events file {events_file}: {err.strerror}"
            ) from None
        names += [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]
    return names


def key_values(values: tuple[str, ...], option: str) -> dict[str, str]:
    """KEY=VALUE option values (--tag) as a dict."""
    pairs = {}
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise AutoprofError(f"{option} {text!r}: expected KEY=VALUE")
        pairs[key.strip()] = value.strip()
    return pairs


def profile_options(
    interval_ms: int,
    repeat: int,
    system_wide: bool,
    cpu_list: str | None,
    timeout: float | None,
    fail_fast: bool,
    retries: int = 0,
    anchor: str | None = None,
    **more,
) -> ProfileOptions:
    """ProfileOptions from the measure_options values (plus force, part, parts if given)."""
    from autoprof.runner import ProfileOptions

    return ProfileOptions(
        interval_ms=interval_ms,
        repeat=repeat,
        system_wide=system_wide,
        cpu_list=cpu_list,
        timeout=timeout,
        fail_fast=fail_fast,
        retries=retries,
        anchor=anchor,
        **more,
    )


# the queue's library (redis, rq) is imported inside the queue commands; $AUTOPROF_REDIS is read
# by autoprof.queue.connection.resolve
redis_option = click.option(
    "--redis",
    "redis_text",
    metavar="URL",
    help="redis://[USER:PASSWORD@]HOST[:PORT][/DB] or rediss://... (TLS) "
    "[default: $AUTOPROF_REDIS]",
)

# the store's library (SQLAlchemy) is imported inside the store commands; store.url is plain
store_option = click.option(
    "--store",
    "store_text",
    metavar="URL",
    envvar=store_url.ENV_VAR,
    show_envvar=True,
    help="postgresql://USER[:PASSWORD]@HOST[:PORT]/DB, sqlite:///PATH or a file path "
    f"[default: {store_url.default_path()}]",
)
