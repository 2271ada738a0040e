"""The `autoprof` command line: a thin click shell over the library.

Each command lives in its own module under `autoprof/commands/` (asv style); this file only
builds the group and turns `AutoprofError` into one line and a non-zero exit.
"""

from __future__ import annotations

import sys

import click

from autoprof import __version__
from autoprof.errors import AutoprofError


class _Group(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except AutoprofError as err:
            click.echo(f"autoprof: error: {err}", err=True)
            sys.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autoprof")
def cli() -> None:
    """Measure every performance event of this CPU for a program, without multiplexing."""


def _register() -> None:
    from autoprof.commands import COMMANDS

    for command in COMMANDS:
        cli.add_command(command)


_register()


def main() -> None:
    cli()
