"""`autoprof callgraph`: a recording's call graph as SVG, PNG or dot (gprof2dot + Graphviz)."""

from __future__ import annotations

from pathlib import Path

import click

from autoprof.commands import common


@click.command("callgraph")
@click.argument("recording", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("callgraph.svg"),
    show_default=True,
    callback=common.existing_parent,
    help="graph.svg, graph.png or graph.dot.",
)
@click.option("--event", help="Event to draw (default: the first recorded).")
@click.option("--node-thres", type=float, default=0.5, show_default=True, help="Percent.")
@click.option("--edge-thres", type=float, default=0.1, show_default=True, help="Percent.")
@click.option("--root", help="Only FUNC and what it calls.")
@click.option("--leaf", help="Only FUNC and its callers.")
@click.option("--kernel/--no-kernel", default=True, show_default=True, help="Kernel frames.")
def callgraph_command(
    recording: Path,
    output: Path,
    event: str | None,
    node_thres: float,
    edge_thres: float,
    root: str | None,
    leaf: str | None,
    kernel: bool,
) -> None:
    """Draw the call graph of a recording (Graphviz).

    Draw the call graph of RECORDING (an `autoprof record` folder, a perf.data or `perf
    script` text): nodes coloured by total time, labelled total % and (self %).

    \b
    Example:  autoprof callgraph out/rec -o graph.svg --node-thres 1
    """
    from autoprof.callgraph.graph import GraphOptions, output_format, write
    from autoprof.flame.source import FoldOptions, load
    from autoprof.functions.recording import recorded_events

    output_format(output)
    if event is None:
        events = recorded_events(recording)
        event = events[0] if events else None
    folded = load(recording, FoldOptions(event=event, kernel=kernel))
    for note in folded.notes:
        click.echo(f"autoprof: note: {recording}: {note}", err=True)
    write(folded, output, GraphOptions(node_thres, edge_thres, root, leaf))
    click.echo(f"wrote {output}: event {folded.event}, {folded.sample_count or 0:,} samples")
