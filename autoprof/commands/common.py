"""Options shared by several commands (asv's common_args), and the catalog they describe.

Every command module imports this one at its top, so it imports nothing beyond click and
`autoprof.run.options` (plain dataclasses): the catalog, the runner and their libraries are imported
by the functions that use them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from autoprof.errors import AutoprofError
from autoprof.run.options import EventSelection, ProfileOptions
from autoprof.run.request import PLAN_OPTIONS, Request
from autoprof.store import url as store_url
from autoprof.util.declared import Declared, Option, kind_of, option_fields

if TYPE_CHECKING:
    from rich.console import Console

    from autoprof.catalog.model import Catalog
    from autoprof.perf.process import Interrupted

D = TypeVar("D", bound=Declared)
R = TypeVar("R")

# rich's width where the output is no terminal: lines (and table rows) are never wrapped there,
# since scripts and `grep` read them whole
UNWRAPPED_WIDTH = 100_000

# autoprof.catalog.host.ENV_EVENTS_DIR, spelled out so that --help needs no catalog import
# (tests/test_cli.py checks they agree)
ENV_EVENTS_DIR = "AUTOPROF_EVENTS_DIR"

__all__ = [
    "Progress",
    "build_catalog",
    "catalog_options",
    "event_names",
    "event_options",
    "fail_if_option",
    "key_values",
    "measure_options",
    "metric_catalog_options",
    "metric_file_option",
    "note",
    "plan_flags",
    "planning_options",
    "profile_flags",
    "redis_option",
    "report_gates",
    "request_from",
    "reserve_option",
    "selection_options",
    "store_option",
    "takes_request",
    "with_progress",
]


# The click values a `Request` takes as they are (the value's name: the Request's field, and
# what makes it the field's type); `request_from` adds the events, the tags and the fields of
# ProfileOptions and EventSelection, each by its name.
_REQUEST_FIELDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "command": ("command", list),
    "metric_words": ("metrics", tuple),
    "metrics_files": ("metrics_files", tuple),
    "consistent": ("consistent", bool),
    "events_dir": ("events_dir", str),
    "cpu": ("cpu", str),
    "smt": ("smt", str),
    "counters": ("counters", tuple),
    "probe": ("probe", bool),
}
REQUEST_VALUES = frozenset(
    [*_REQUEST_FIELDS, "event_names", "events_file", "tags"]
    + [f.name for f, _ in option_fields(ProfileOptions)]
    + [f.name for f, _ in option_fields(EventSelection)]
)


def request_from(values: Mapping[str, Any]) -> Request:
    """The one typed Request a command's click values describe, built at the CLI edge: each
    value read by its name (`REQUEST_VALUES`), one the command does not take keeps the
    Request's default. Each declared value (ProfileOptions, EventSelection) is checked here as
    click checks its types, with a job spec's very refusal; how the values go together is
    `Request.check`'s, which the command calls where its own checks (`profile`'s target) have
    had their say."""
    fields = {
        field: convert(values[name])
        for name, (field, convert) in _REQUEST_FIELDS.items()
        if values.get(name) is not None
    }
    return Request(
        **fields,
        options=declared_values(ProfileOptions, values),
        selection=declared_values(EventSelection, values),
        events=event_names(values.get("event_names", ()), values.get("events_file")),
        tags=key_values(values.get("tags", ()), "--tag"),
    )


def takes_request(func: Callable[..., R]) -> Callable[..., R]:
    """The command's click values that describe a measurement (`REQUEST_VALUES`) given to it
    as one typed `Request`, its first argument (`request_from`); its other values as they are.
    Put it under the click decorators, right above the function."""

    @functools.wraps(func)
    def command(**values: Any) -> R:
        own = {name: value for name, value in values.items() if name not in REQUEST_VALUES}
        return func(request_from(values), **own)

    return command


def existing_parent(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A click callback for an output path the user gave: the folder it goes in must exist, so a
    typo'd parent (`-o /nonexistent/f.svg`) is one line, not a tree of folders made silently. A
    default (`out/record`) is made as needed; `-` is standard output."""
    if value is None or str(value) == "-" or param.name is None:
        return value
    if ctx.get_parameter_source(param.name) is click.core.ParameterSource.DEFAULT:
        return value
    parent = Path(value).expanduser().absolute().parent
    if parent.exists() and not parent.is_dir():
        raise click.BadParameter(f"{value}: {parent}: Not a directory")
    if not parent.is_dir():
        raise click.BadParameter(f"{value}: no folder {parent} (a typo? create it first)")
    return value


def note(text: str) -> None:
    """What planning says of the machine or the plan, one note line on stderr."""
    click.echo(f"autoprof: note: {text}", err=True)


def build_catalog(request: Request) -> Catalog:
    """The catalog the command-line options describe (`run.planning.machine_catalog`, imported
    when a command first needs one), with its note."""
    from autoprof.run import planning

    catalog = planning.machine_catalog(request.check())
    if catalog.note:
        note(catalog.note)
    return catalog


def console(stderr: bool = False, highlight: bool = True) -> Console:
    """A rich console on stdout (or stderr): the terminal's width on a terminal; in a pipe or a
    file no wrapping at all (rich would assume 80 columns and cut lines in two)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else UNWRAPPED_WIDTH
    return Console(stderr=stderr, width=width, highlight=highlight)


class Progress:
    """How a long command (`profile`, `bench`) shows its progress on stderr: here as plain
    lines (not a terminal: a log, a pipe, a test), what it says and nothing of its bars."""

    def say(self, text: str, style: str | None = None) -> None:
        click.echo(text, err=True)

    def describe(self, text: str, bar: int = 0) -> None:
        """What bar `bar` is at now (the run in progress)."""

    def advance(self, bar: int = 0) -> None:
        """One more step of bar `bar` done."""


@contextlib.contextmanager
def _progress(bars: Sequence[tuple[str, int]]) -> Iterator[Progress]:
    """Progress bars on a terminal (rich, imported only then), one per (description, total)
    of `bars`, each started at its first step; plain lines elsewhere."""
    if not sys.stderr.isatty():
        yield Progress()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as Bars

    console = Console(stderr=True, soft_wrap=True)  # one line per message
    columns = (BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    with Bars(TextColumn("{task.description}"), *columns, console=console) as shown:
        ids = [shown.add_task(text, total=total, start=False) for text, total in bars]

        class OnBars(Progress):
            def say(self, text: str, style: str | None = None) -> None:
                shown.console.print(text, style=style, markup=False, highlight=False)

            def describe(self, text: str, bar: int = 0) -> None:
                shown.start_task(ids[bar])
                shown.update(ids[bar], description=text)

            def advance(self, bar: int = 0) -> None:
                shown.start_task(ids[bar])
                shown.advance(ids[bar])

        yield OnBars()


def with_progress(
    bars: Sequence[tuple[str, int]],
    work: Callable[[Progress], R],
    stopped: Callable[[Interrupted], str],
) -> R:
    """What `work(progress)` returns, run with its progress shown (bars on a terminal, one per
    (description, total) of `bars`) and a signal's end made the shell's: Ctrl-C, SIGTERM or
    SIGHUP (`Interrupted`, under a `Stopper`) closes the bars, then `stopped(signal)` is the
    one error line (what was kept) and the status is 128 + the signal's number (130 for
    Ctrl-C). What `profile` and `bench` share."""
    from autoprof.perf.process import Interrupted, Stopper

    with Stopper(), _progress(bars) as progress:
        try:
            return work(progress)
        except Interrupted as stop:
            interrupted = stop
    click.echo(f"autoprof: error: {stopped(interrupted)}", err=True)
    sys.exit(interrupted.exit_code)


def next_hint(*argv: str | Path) -> str:
    """ "next: autoprof ..." with every argument shell-quoted, so it can be pasted as is."""
    return "next: " + shlex.join(str(arg) for arg in argv)


def _apply(func: Callable, options: list) -> Callable:
    for option in reversed(options):
        func = option(func)
    return func


def selection_options(func: Callable) -> Callable:
    """--reserve and the opt-in event sets (EventSelection): what to measure, whatever the
    machine; checked by `request_from` (or the job spec) as EventSelection says, not by click."""
    return _apply(
        func,
        [_flag(EventSelection, f.name, f.default, o) for f, o in option_fields(EventSelection)],
    )


def reserve_option(func: Callable) -> Callable:
    """--reserve alone (EventSelection's declaration), for commands that take no opt-in sets."""
    field, option = next((f, o) for f, o in option_fields(EventSelection) if f.name == "reserve")
    return _flag(EventSelection, field.name, field.default, option)(func)


def catalog_options(func: Callable) -> Callable:
    """--events-dir, --cpu, --smt (which machine's catalog), then the selection options."""
    return _apply(
        func,
        [
            click.option(
                "--events-dir",
                type=click.Path(file_okay=False),
                help=f"Event data directory (mapfile.csv: Intel perfmon, perf's AMD or arm64 "
                f"data); default ${ENV_EVENTS_DIR}, ~/.cache/autoprof/events/VENDOR or the "
                "data autoprof ships.",
            ),
            click.option(
                "--cpu",
                help="CPU id (GenuineIntel-6-55-4, AuthenticAMD-25-11-1, an Arm MIDR) or model "
                "(SKX, zen4, neoverse-n1); default: this machine.",
            ),
            click.option(
                "--counters",
                multiple=True,
                metavar="PMU=N",
                help="Generic counters of a PMU where the model table's number is wrong for "
                "the machine planned for (AMD, Arm; repeatable), e.g. amd_df=4; on this "
                "machine no more than the probe found.",
            ),
            click.option(
                "--no-probe",
                "probe",
                flag_value=False,
                default=True,
                help="Plan this machine's AMD or Arm core PMU with the model table (or "
                "--counters) instead of the counters probed here; a plan past the real "
                "counters is then caught when the runs are aggregated.",
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


def event_options(func: Callable) -> Callable:
    """-e/--event and --events FILE: which events (`event_names`)."""
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
        ],
    )


def measure_options(func: Callable) -> Callable:
    """-e/--events (which events) and how each run measures (the options a job spec carries):
    shared by `profile` and `submit`."""
    return _apply(func, [event_options, profile_flags(spec=True)])


def plan_flags(func: Callable) -> Callable:
    """The ProfileOptions that change a plan (`run.request.PLAN_OPTIONS`: -a, --cpu-list,
    --user, --anchor), for `schedule`: it plans what `profile` with them runs."""
    return _apply(
        func,
        [
            _flag(ProfileOptions, f.name, f.default, o)
            for f, o in option_fields(ProfileOptions)
            if f.name in PLAN_OPTIONS
        ],
    )


def profile_flags(*, spec: bool) -> Callable[[Callable], Callable]:
    """The click options of the ProfileOptions fields that have flags, derived from their
    declarations: those a job spec carries (spec=True) or the others (spec=False). Their values
    are checked by `request_from` as a job spec's are (one line, status 2), not by click; --help
    shows each range as click shows an IntRange's."""
    return functools.partial(
        _apply,
        options=[
            _flag(ProfileOptions, f.name, f.default, option)
            for f, option in option_fields(ProfileOptions)
            if option.flags and option.spec == spec
        ],
    )


def where_flags(func: Callable) -> Callable:
    """--pin, --core-type and --emulate as `profile` declares them (ProfileOptions), for
    `bench`: where the benchmarked commands run, and what counts them."""
    return _apply(
        func,
        [
            _flag(ProfileOptions, f.name, f.default, o)
            for f, o in option_fields(ProfileOptions)
            if f.name in ("pin", "core_type", "emulate")
        ],
    )


def declared_flags(cls: type) -> Callable[[Callable], Callable]:
    """The click options of every field of the `Declared` class `cls` that has flags; the
    command builds `cls` from them with `declared_values`."""
    return functools.partial(
        _apply,
        options=[
            _flag(cls, f.name, f.default, option)
            for f, option in option_fields(cls)
            if option.flags
        ],
    )


def declared_values(cls: type[D], values: Mapping[str, Any]) -> D:
    """`cls` from a command's keyword values (those of its fields), checked: a bad value is
    one line (AutoprofError), as a job spec's."""
    fields = option_fields(cast(type, cls))  # a class is hashable: mypy cannot tell for D
    return cls(**{f.name: values[f.name] for f, _ in fields if f.name in values}).check()


def _flag(cls: type, name: str, default: Any, option: Option) -> Callable:
    kind, _ = kind_of(name, cls)
    if kind is bool:  # a --x/--no-x pair may default to on
        return click.option(
            *option.flags,
            name,
            is_flag=True,
            default=default,
            show_default=default,
            help=option.help,
        )
    if kind is tuple:  # repeatable: --region A --region B
        return click.option(
            *option.flags, name, multiple=True, metavar=option.metavar, help=option.help
        )
    extra = [f"default: {default}"] if default is not None else []
    extra += [option.range_text] if option.range_text else []
    number = click.INT if kind is int else click.FLOAT
    choices = "|".join(option.choices) or None
    return click.option(
        *option.flags,
        name,
        default=default,
        type=None if kind is str else number,
        metavar=option.metavar
        or choices
        or (f"{number.name.upper()} RANGE" if option.range_text else None),
        help=option.help + (f"  [{'; '.join(extra)}]" if extra else ""),
    )


def event_names(event_names: tuple[str, ...], events_file: str | None) -> list[str]:
    """The -e events, then the --events file's (one per line, # comments). A file that names
    no event is an error: an empty list would mean "every event" (57 runs on a Zen 4)."""
    names = list(event_names)
    if events_file:
        try:
            lines = Path(events_file).read_text().splitlines()
        except OSError as err:
            raise AutoprofError(
                f"cannot read --events file {events_file}: {err.strerror}"
            ) from None
        except UnicodeDecodeError as err:
            raise AutoprofError(
                f"--events file {events_file} is not UTF-8 text (byte {err.object[err.start]:#04x} "
                f"at offset {err.start})"
            ) from None
        listed = [line.split("#")[0].strip() for line in lines]
        if not any(listed):
            raise AutoprofError(
                f"--events file {events_file} names no event (one per line, # starts a comment)"
            )
        names += [name for name in listed if name]
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


# the queue's library (redis, rq) is imported inside the queue commands; $AUTOPROF_REDIS is read
# by autoprof.queue.connection.resolve
redis_option = click.option(
    "--redis",
    "redis_text",
    metavar="URL",
    help="redis://[USER:PASSWORD@]HOST[:PORT][/DB] or rediss://... (TLS) "
    "[default: $AUTOPROF_REDIS]",
)

excel_safe_option = click.option(
    "--excel-safe",
    is_flag=True,
    help="Prefix text cells that start with = + - @ with ' so that a spreadsheet shows them "
    "instead of running them as formulas.",
)

# the store's library (SQLAlchemy) is imported inside the store commands; store.url is plain
fail_if_option = click.option(
    "--fail-if",
    "gates",
    multiple=True,
    metavar="'METRIC > +N%'",
    help="Exit 1 when METRIC changed past N% from the baseline (bench: --baseline, or the "
    "first of two commands) (repeatable): an event "
    "(instructions:u), wall, user, sys, max-rss or energy; exact counts compare exactly, noisy "
    "ones fail only when significant.",
)


def existing_store_folder(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """--store given on the command line as a SQLite file: its folder must exist (a typo'd
    folder is one line; the default store's folder is made as needed)."""
    text = str(value or "")
    path = text.removeprefix("sqlite:///") if text.startswith("sqlite:///") else text
    if not path or "://" in path or param.name is None:
        return value
    if ctx.get_parameter_source(param.name) is not click.core.ParameterSource.COMMANDLINE:
        return value
    parent = Path(path).expanduser().absolute().parent
    if parent.exists() and not parent.is_dir():
        raise AutoprofError(f"no store at {path}: {parent}: Not a directory")
    if not parent.is_dir():
        raise AutoprofError(
            f"no store at {path} and no folder {parent} to make one in (a typo? create it first)"
        )
    return value


store_option = click.option(
    "--store",
    "store_text",
    metavar="URL",
    envvar=store_url.ENV_VAR,
    show_envvar=True,
    callback=existing_store_folder,
    help="postgresql://USER[:PASSWORD]@HOST[:PORT]/DB, sqlite:///PATH or a file path "
    f"[default: {store_url.default_path()}]",
)


def metric_file_option(func: Callable) -> Callable:
    return click.option(
        "--metrics-file",
        "metrics_files",
        multiple=True,
        type=click.Path(dir_okay=False),
        help="A YAML file of your own metrics, or `software` (shipped; repeatable).",
    )(func)


def metric_catalog_options(func: Callable) -> Callable:
    """--events-dir, --cpu, --metrics-file: which metric catalog (`metrics`, `analyze metrics`)."""
    func = metric_file_option(func)
    func = click.option("--cpu", help="CPU id or platform (SKX); default: this machine.")(func)
    return click.option(
        "--events-dir",
        type=click.Path(file_okay=False),
        help="Event data directory (Intel perfmon, or perf's x86 or arm64 pmu-events).",
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


def report_gates(found, gating, console) -> None:
    """The gates' table on the terminal, and the --summary and --summary-json files
    (`bench --baseline`, `analyze compare --fail-if`)."""
    from autoprof.analysis import gate
    from autoprof.analysis.renderers.gate import MarkdownSummary, TextSummary

    console.print(TextSummary().render(found), end="", markup=False, highlight=False)
    for note in found.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    if gating.summary == "-":
        click.echo(MarkdownSummary().render(found), nl=False)
    elif gating.summary:
        with open(gating.summary, "a") as fh:  # GitHub's step summary is appended to
            fh.write(MarkdownSummary().render(found))
    if gating.summary_json:
        Path(gating.summary_json).write_text(json.dumps(gate.to_json(found), indent=1) + "\n")
    failed = [v for v in found.verdicts if v.failed]
    for verdict in failed:
        console.print(f"gate failed: {verdict.gate}: {verdict.change:+.2%}", markup=False)
