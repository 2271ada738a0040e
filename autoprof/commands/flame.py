"""`autoprof record` and `autoprof flamegraph`: sampling profiles and their flame graphs."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click

from autoprof.commands import common
from autoprof.flame.options import FlameOptions
from autoprof.flame.request import FlameRequest
from autoprof.flame.source import FoldOptions
from autoprof.perf.record import CALL_GRAPHS, RecordOptions
from autoprof.util.status import RunStatus


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
    from autoprof.flame.diff import change_lines
    from autoprof.util.renderer import is_stdout, write

    request = FlameRequest(
        inputs,
        binaries,
        common.declared_values(FlameOptions, values),
        common.declared_values(FoldOptions, values),
    ).check()
    profiles = []
    for path in request.sources:
        profiles.append(request.load(path))
        for note in profiles[-1].notes:
            click.echo(f"autoprof: note: {path}: {note}", err=True)
    if request.flame.save is not None:
        request.save(profiles[0])
    after = profiles[-1]
    before = profiles[0] if request.flame.diff else None
    write(request.renderer(before).render(after), request.output)
    if request.flame.speedscope is not None:
        write(request.speedscope().render(after), request.flame.speedscope)
    quiet = is_stdout(request.output)  # stdout carries the data: messages go to stderr
    if before is not None:
        for line in change_lines(before, after):
            click.echo(line, err=quiet)
    click.echo(request.wrote(after), err=quiet)
