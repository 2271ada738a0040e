"""`autoprof record` and `autoprof flamegraph`: sampling profiles and their flame graphs."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from autoprof.commands import common
from autoprof.errors import AutoprofError
from autoprof.flame.options import FlameOptions
from autoprof.flame.source import FoldOptions
from autoprof.perf.record import CALL_GRAPHS, RecordOptions
from autoprof.util.status import RunStatus

if TYPE_CHECKING:
    from autoprof.flame.fold import Folded


@click.command("record")
@click.option(
    "-F",
    "--freq",
    "frequency",
    type=click.IntRange(min=1),
    default=99,
    show_default=True,
    help="Samples a second (at most the kernel's perf_event_max_sample_rate).",
)
@click.option(
    "--call-graph",
    type=click.Choice(CALL_GRAPHS),
    default="fp",
    show_default=True,
    help="How perf walks stacks: frame pointers, DWARF unwinding or Intel LBR.",
)
@click.option("-e", "--event", "events", multiple=True, help="Event to sample (repeatable).")
@click.option("-p", "--pid", type=int, help="Sample this running process.")
@click.option("-a", "--all-cpus", "system_wide", is_flag=True, help="Sample the whole system.")
@click.option(
    "--duration",
    type=float,
    metavar="S",
    help="With -p or -a: stop after S seconds (else Ctrl-C or SIGTERM stops it, samples kept).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("out/record"),
    show_default=True,
    callback=common.existing_parent,
    help="Folder for perf.data, record.json and perf's messages.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def record_command(
    frequency: int,
    call_graph: str,
    events: tuple[str, ...],
    pid: int | None,
    system_wide: bool,
    duration: float | None,
    output: Path,
    command: tuple[str, ...],
) -> None:
    """Sample where a command spends its time (perf record).

    perf record with call graphs on.

    \b
    Example:  autoprof record -o out/rec -- ./myprog --input data
    Then:     autoprof flamegraph out/rec -o flame.svg
    """
    from autoprof.flame.capture import record
    from autoprof.perf.record import PERF_DATA

    options = RecordOptions(frequency, call_graph, list(events), pid, system_wide, duration)
    info = record(options, output, list(command))
    for finding in info.findings:
        click.echo(f"autoprof: {finding}", err=True)
    if info.status == RunStatus.WORKLOAD_FAILED:
        click.echo(
            f"autoprof: warning: the command exited with status {info.perf_exit}; samples kept",
            err=True,
        )
    following: list[str | Path] = (
        ["report", output] if len(events) > 1 else ["flamegraph", output, "-o", "flame.svg"]
    )
    click.echo(f"wrote {output / PERF_DATA}; {common.next_hint('autoprof', *following)}")
    if info.stopped_by in ("SIGTERM", "SIGHUP"):
        click.echo(f"autoprof: stopped by {info.stopped_by}; samples kept", err=True)
        sys.exit(128 + signal.Signals[info.stopped_by])


@click.command("flamegraph")
@click.argument("inputs", nargs=-1, type=click.Path(path_type=Path))
@common.declared_flags(FlameOptions)
@click.option(
    "--binary",
    "binaries",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="ELF",
    help="With --trace: the traced program (repeatable, for its libraries): symbols, code.",
)
@common.declared_flags(FoldOptions)
def flamegraph_command(inputs: tuple[Path, ...], binaries: tuple[Path, ...], **values: Any) -> None:
    """Draw a flame graph of a recording or a trace.

    Draw a flame graph of INPUT: a perf.data (or a `record` folder), `perf script` text
    (plain or .gz), or folded stacks. With --diff, INPUTS are BEFORE AFTER. With --trace, of
    every instruction of a trace (no INPUT).

    \b
    Example:  autoprof flamegraph out/rec -o flame.svg --title "myprog"
              autoprof flamegraph --diff before.data after.data -o diff.svg
              autoprof flamegraph --trace qemu.log --binary ./myprog -o flame.svg
              autoprof flamegraph --trace qemu.log --binary ./myprog --save out/trace
    """
    from autoprof.flame import kept
    from autoprof.flame.renderer import FlameRenderer, FoldedRenderer
    from autoprof.flame.speedscope import SpeedscopeRenderer
    from autoprof.flame.svg import SvgRenderer
    from autoprof.util.renderer import is_stdout, write

    flame = common.declared_values(FlameOptions, values)
    options = common.declared_values(FoldOptions, values)
    trace = Path(flame.trace) if flame.trace is not None else None
    if trace is not None or binaries:
        if trace is None or not binaries or inputs or flame.diff:
            raise AutoprofError("--trace FILE takes --binary ELF, and no INPUT nor --diff")
        if options != FoldOptions(inline=options.inline):
            raise AutoprofError("--trace takes none of the options of perf input (--pid, ...)")
    elif flame.save is not None:
        raise AutoprofError("--save keeps a trace's flame graph: it needs --trace")
    elif len(inputs) != (2 if flame.diff else 1):
        want = (
            "two inputs (BEFORE AFTER) with --diff" if flame.diff else "one input (or --diff A B)"
        )
        raise AutoprofError(f"flamegraph takes {want}, got {len(inputs)}")
    if trace is not None:
        profiles = [_load_trace(trace, binaries, options.inline)]
        inputs = (trace,)
        if flame.save is not None:
            kept.save(Path(flame.save), profiles[0], trace, list(binaries), options.inline)
    else:
        profiles = [_load(path, options) for path in inputs]
    after = profiles[-1]
    before = profiles[0] if flame.diff else None
    default = "-" if flame.folded else "diff.svg" if flame.diff else "flame.svg"
    output = Path(flame.output or default)
    renderer: FlameRenderer
    if flame.folded:
        renderer = FoldedRenderer(before)
    else:
        default_title = "Differential Flame Graph" if flame.diff else "Flame Graph"
        renderer = SvgRenderer(
            flame.title or default_title, flame.width, flame.minwidth, flame.inverted, before
        )
    write(renderer.render(after), output)
    if flame.speedscope is not None:
        write(SpeedscopeRenderer(flame.title or inputs[-1].name).render(after), flame.speedscope)
    quiet = is_stdout(output)  # stdout carries the data: messages go to stderr
    if before is not None:
        _print_changes(before, after, quiet)
    samples = after.sample_count
    if trace is not None:  # every instruction, weighted by its cycles when the trace has them
        counted = f"{after.total:,} {after.event}"
    else:
        counted = f"{samples if samples is not None else after.total:,} samples"
    click.echo(
        f"wrote {output}: {counted}, {len(after.stacks):,} stacks"
        + (f", event {after.event}" if after.event and trace is None else ""),
        err=quiet,
    )


def _load(path: Path, options: FoldOptions) -> Folded:
    from autoprof.flame.source import load

    folded = load(path, options)
    for note in folded.notes:
        click.echo(f"autoprof: note: {path}: {note}", err=True)
    return folded


def _load_trace(path: Path, binaries: tuple[Path, ...], inline: bool) -> Folded:
    from autoprof.flame.unwind import load_trace

    folded = load_trace(path, list(binaries), inline)
    for note in folded.notes:
        click.echo(f"autoprof: note: {path}: {note}", err=True)
    return folded


def _print_changes(before: Folded, after: Folded, err: bool, top: int = 5) -> None:
    from autoprof.flame.diff import changes, diff_tree

    found = changes(diff_tree(before, after))
    grown = [c for c in found if c.delta > 0][:top]
    shrunk = [c for c in reversed(found) if c.delta < 0][:top]
    for label, items in (("grew", grown), ("shrank", shrunk)):
        for c in items:
            click.echo(
                f"{label:>6} {100 * c.delta:+7.2f} pts  {c.name}"
                f"  ({100 * c.before:.2f}% -> {100 * c.after:.2f}%)",
                err=err,
            )
