"""`autoprof demo`: profile the bundled example on this machine, end to end (`make demo`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import click

from autoprof.commands import common
from autoprof.errors import AutoprofError
from autoprof.examples import build_writes, expected_writes, slot_addresses
from autoprof.run import outdir
from autoprof.util import children, owned, xdg


@click.command("demo")
@click.option(
    "-o",
    "--output",
    default="out/demo",
    show_default=True,
    type=click.Path(),
    callback=common.existing_parent,
    help="Folder for the demo's profile, results and analyses.",
)
@click.option("--writes", default=20000, show_default=True, help="Writes per slot unit.")
def demo(output: str, writes: int) -> None:
    """Profile the bundled example and check its counts.

    Build the example workload, watch its 12 slots with hardware breakpoints plus software
    events (3 runs: 4 debug registers), aggregate, and check every count against the writes
    the example made."""
    from autoprof.perf.selfcheck import breakpoint_miscount  # perf's CSV reader: pandas
    from autoprof.results import csvfile

    out = Path(output)
    if not out.parent.is_dir():  # the default's out/, made as needed (`common.existing_parent`):
        owned.own_folder(out.parent)  # the profile below, given -o, would refuse it missing
    binary = build_writes(xdg.cache_dir() / "demo")
    why = breakpoint_miscount(binary)
    if why:  # the demo checks exact counts: say so now rather than after minutes of runs
        raise AutoprofError(f"{why}; the demo's exact counts cannot hold here")
    events = [f"mem:{a}:w" for a in slot_addresses(binary)]
    events += ["task-clock", "page-faults", "context-switches", "cpu-migrations"]
    if (out / outdir.MANIFEST).exists() and outdir.read_manifest(out).command[:1] == [str(binary)]:
        shutil.rmtree(out)  # an earlier demo's output: the demo starts afresh, nothing else goes
    base = children.python_argv("autoprof")
    args = [arg for e in events for arg in ("-e", e)]
    steps = [
        [*base, "profile", *args, "--retries", "2", "-o", str(out), "--", str(binary), str(writes)],
        [*base, "aggregate", str(out)],
    ]
    for step in steps:
        click.echo(f"$ autoprof {' '.join(step[4:6])} ...", err=True)
        if subprocess.run(step).returncode != 0:
            sys.exit(1)
    frame = csvfile.read_csv(out / outdir.RESULTS)
    counted = frame.groupby("EVENT_NAME")["SAMPLE_VALUE"].sum()
    click.echo("\nslot  event               written  counted")
    exact = 0
    for slot, (event, want) in enumerate(zip(events, expected_writes(writes), strict=False)):
        got = counted.get(event, float("nan"))
        exact += got == want
        click.echo(f"{slot:>4}  {event:<18} {want:>8} {got:>8.0f}")
    click.echo(
        f"{exact} of {len(slot_addresses(binary))} breakpoint counts exact; "
        f"results.csv: {out / outdir.RESULTS}"
    )
    if exact != len(slot_addresses(binary)):
        raise AutoprofError("some breakpoint counts differ from the writes the example made")
