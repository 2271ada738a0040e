"""The `autoprof` command line: a thin click shell over the library.

Each command lives in its own module under `autoprof/commands/` (asv style); this file only
builds the group and turns `AutoprofError` into one line and a non-zero exit.
"""

from __future__ import annotations

import importlib
import sys

import click

from autoprof import __version__
from autoprof.errors import AutoprofError


class _Group(click.Group):
    """Commands are imported on first use (click's documented lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from autoprof.commands import COMMANDS

        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        from autoprof.commands import COMMANDS

        target = COMMANDS.get(name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)

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


def main() -> None:
    cli()
