"""`autoprof demo`: profile the bundled example on this machine, end to end (`make demo`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click

from autoprof.examples import build_writes, slot_addresses


@click.command("demo")
@click.option("-o", "--output", default="out/demo", show_default=True, type=click.Path())
@click.option("--writes", default=20000, show_default=True, help="Writes per slot unit.")
def demo(output: str, writes: int) -> None:
    """Build the example workload, watch its 12 slots with hardware breakpoints plus software
    events (3 runs: 4 debug registers), aggregate, and print where results.csv is."""
    out = Path(output)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "autoprof" / "demo"
    binary = build_writes(cache)
    events = [f"mem:{a}:w" for a in slot_addresses(binary)]
    events += ["task-clock", "page-faults", "context-switches", "cpu-migrations"]
    base = [sys.executable, "-m", "autoprof"]
    args = [arg for e in events for arg in ("-e", e)]
    steps = [
        [*base, "profile", *args, "--force", "-o", str(out), "--", str(binary), str(writes)],
        [*base, "aggregate", str(out)],
    ]
    for step in steps:
        click.echo(f"$ autoprof {' '.join(step[3:5])} ...", err=True)
        if subprocess.run(step).returncode != 0:
            sys.exit(1)
    click.echo(
        f"\nresults.csv: {out / 'results.csv'}  (slot i of the example was written "
        f"{writes}*(i+1) times; compare the mem:ADDR:w totals)"
    )
