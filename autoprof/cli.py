"""The `autoprof` command line: a thin click shell over the library.

Each command lives in its own module under `autoprof/commands/` (asv style); this file only
builds the group and turns how a command ends into what a shell expects: `AutoprofError` is one
line and status 2; Ctrl-C is status 130 (128 + SIGINT), without a traceback; a reader that
closes the pipe early (`autoprof runs export ID -o - | head -1`) ends the command quietly, with
status 0, as for any tool whose output nobody reads any more.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from autoprof import __version__
from autoprof.errors import AutoprofError

INTERRUPTED_STATUS = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C


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
        except KeyboardInterrupt:
            _interrupted()
        except click.Abort as abort:  # click's prompts turn Ctrl-C into Abort
            if isinstance(abort.__context__, KeyboardInterrupt):
                _interrupted()
            raise
        except BrokenPipeError:
            _silence_stdout()
            sys.exit(0)


def _interrupted() -> None:
    click.echo("autoprof: interrupted", err=True)
    sys.exit(INTERRUPTED_STATUS)


def _silence_stdout() -> None:
    """Point stdout at /dev/null: the reader is gone, and the interpreter's last flush of what
    is still buffered must not fail with a second BrokenPipeError."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autoprof")
def cli() -> None:
    """Measure every performance event of this CPU for a program, without multiplexing."""


def main() -> None:
    try:
        cli()
    finally:
        try:
            sys.stdout.flush()
        except BrokenPipeError:  # the pipe closed after the command's last write
            _silence_stdout()


def main_analyze(name: str, argv: list[str]) -> None:
    """Entry point of the `analyze/<name>.py` scripts: `autoprof analyze <name> ARGS...`, with
    autoperf's own calling forms (`correlation.py ./out`, `event_detail.py --resultdir ./out
    --features AVG.EVENT`) accepted too."""
    from autoprof.commands.analyze import autoperf_args

    cli.main(args=["analyze", name, *autoperf_args(argv)], prog_name="autoprof")
