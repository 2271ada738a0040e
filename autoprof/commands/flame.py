"""`autoprof record` and `autoprof flamegraph`: sampling profiles and their flame graphs."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from autoprof.commands import common
from autoprof.errors import AutoprofError
from autoprof.perf.record import CALL_GRAPHS, RecordOptions
from autoprof.util.status import RunStatus

if TYPE_CHECKING:
    from autoprof.flame.fold import Folded
    from autoprof.flame.source import FoldOptions


@click.command("record")
@click.option("-F", "--freq", "frequency", default=99, show_default=True, help="Samples/second.")
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
    """Sample where COMMAND spends its time (perf record, call graphs on).

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
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), help="Output file ('-' for stdout)."
)
@click.option("--folded", is_flag=True, help="Write folded stacks (FlameGraph's format), not SVG.")
@click.option(
    "--speedscope",
    type=click.Path(path_type=Path),
    help="Also write speedscope's JSON format to this file.",
)
@click.option("--diff", is_flag=True, help="INPUTS are BEFORE AFTER: a differential graph.")
@click.option("--pid", is_flag=True, help="Split by process (root frames comm-pid).")
@click.option("--tid", is_flag=True, help="Split by thread (root frames comm-pid/tid).")
@click.option("--kernel/--no-kernel", default=True, show_default=True, help="Kernel frames.")
@click.option("--event", help="Event to show when several were sampled (default: the first).")
@click.option("--annotate-kernel", is_flag=True, help="Mark kernel frames with _[k].")
@click.option("--annotate-jit", is_flag=True, help="Mark JIT frames (/tmp/perf-PID.map) _[j].")
@click.option("--all", "annotate_all", is_flag=True, help="Both annotations.")
@click.option("--addrs", is_flag=True, help="Raw addresses for frames without a symbol.")
@click.option("--inline", is_flag=True, help="Inlined frames from addr2line.")
@click.option("--context", is_flag=True, help="With --inline: file:line of each frame.")
@click.option("--srcline", is_flag=True, help="Input is `perf script -F+srcline`: add lines.")
@click.option(
    "--skip-switches",
    is_flag=True,
    help="Keep perf's context-switch records (PERF_RECORD_SWITCH) out of the samples.",
)
@click.option("--title", help="Title of the graph.")
@click.option("--width", type=click.IntRange(min=100), default=1200, show_default=True)
@click.option(
    "--minwidth",
    default="0.1",
    show_default=True,
    help="Omit frames narrower than this: pixels, or a percentage such as 0.5%.",
)
@click.option("--inverted", is_flag=True, help="Icicle graph: roots at the top.")
def flamegraph_command(
    inputs: tuple[Path, ...],
    output: Path | None,
    folded: bool,
    speedscope: Path | None,
    diff: bool,
    pid: bool,
    tid: bool,
    kernel: bool,
    event: str | None,
    annotate_kernel: bool,
    annotate_jit: bool,
    annotate_all: bool,
    addrs: bool,
    inline: bool,
    context: bool,
    srcline: bool,
    skip_switches: bool,
    title: str | None,
    width: int,
    minwidth: str,
    inverted: bool,
) -> None:
    """Draw a flame graph of INPUT: a perf.data (or a `record` folder), `perf script` text
    (plain or .gz), or folded stacks. With --diff, INPUTS are BEFORE AFTER.

    \b
    Example:  autoprof flamegraph out/rec -o flame.svg --title "myprog"
              autoprof flamegraph --diff before.data after.data -o diff.svg
    """
    from autoprof.flame.diff import diff_folded_lines
    from autoprof.flame.renderer import FoldedRenderer
    from autoprof.flame.source import FoldOptions
    from autoprof.flame.speedscope import SpeedscopeRenderer
    from autoprof.flame.svg import SvgRenderer

    if len(inputs) != (2 if diff else 1):
        want = "two inputs (BEFORE AFTER) with --diff" if diff else "one input (or --diff A B)"
        raise AutoprofError(f"flamegraph takes {want}, got {len(inputs)}")
    options = FoldOptions(
        pid=pid,
        tid=tid,
        kernel=kernel,
        event=event,
        annotate_kernel=annotate_kernel or annotate_all,
        annotate_jit=annotate_jit or annotate_all,
        addrs=addrs,
        inline=inline,
        context=context,
        srcline=srcline,
        skip_switches=skip_switches,
    )
    profiles = [_load(path, options) for path in inputs]
    after = profiles[-1]
    before = profiles[0] if diff else None
    if output is None:
        output = Path("-") if folded else Path("diff.svg" if diff else "flame.svg")
    if folded:
        text = (
            "".join(diff_folded_lines(before, after))
            if before is not None
            else FoldedRenderer().render(after)
        )
    else:
        default_title = "Differential Flame Graph" if diff else "Flame Graph"
        renderer = SvgRenderer(title or default_title, width, minwidth, inverted, before)
        text = renderer.render(after)
    _write(output, text)
    if speedscope is not None:
        _write(speedscope, SpeedscopeRenderer(title or inputs[-1].name).render(after))
    quiet = str(output) == "-"  # stdout carries the data: messages go to stderr
    if before is not None:
        _print_changes(before, after, quiet)
    samples = after.sample_count
    counted = f"{samples:,} samples" if samples is not None else f"{after.total:,} samples"
    click.echo(
        f"wrote {output}: {counted}, {len(after.stacks):,} stacks"
        + (f", event {after.event}" if after.event else ""),
        err=quiet,
    )


def _load(path: Path, options: FoldOptions) -> Folded:
    from autoprof.flame.source import load

    folded = load(path, options)
    for note in folded.notes:
        click.echo(f"autoprof: note: {path}: {note}", err=True)
    return folded


def _write(path: Path, text: str) -> None:
    if str(path) == "-":
        sys.stdout.write(text)
        return
    try:
        path.write_text(text, errors="surrogateescape")
    except OSError as err:
        raise AutoprofError(f"cannot write {path}: {err.strerror}") from err


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
