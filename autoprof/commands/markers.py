"""`autoprof markers`: where the region markers' C header is, for a build."""

from __future__ import annotations

from pathlib import Path

import click

import autoprof.markers


@click.command()
@click.option("--cflags", is_flag=True, help="Print the -I flag of autoprof.h (one line).")
@click.option("--header", is_flag=True, help="Print the path of autoprof.h.")
def markers(cflags: bool, header: bool) -> None:
    """Compiler flags for autoprof.h, the C and C++ region markers.

    cc $(autoprof markers --cflags) prog.c: `#include <autoprof.h>`, then
    autoprof_begin("name") ... autoprof_end("name"); no library to link. Python programs use
    `from autoprof.markers import region`. Measure with `autoprof profile --region NAME`.
    """
    folder = Path(autoprof.markers.__file__).resolve().parent
    if header:
        click.echo(str(folder / "autoprof.h"))
    if cflags or not header:
        click.echo(f"-I{folder}")
