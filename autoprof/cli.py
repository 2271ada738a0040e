"""The `autoprof` command line: a thin click shell over the library.

Each command lives in its own module under `autoprof/commands/` (asv style); this file only
builds the group and turns how a command ends into what a shell expects: `AutoprofError`, a
malformed command line (click's usage errors) and a file the system refuses (an `OSError` that
names its file: a read-only or missing folder, a path under a regular file, a full disk) are
one line and status 2; Ctrl-C is status 130 (128 + SIGINT), without a traceback; a reader that
closes the pipe early (`autoprof runs export ID -o - | head -1`) ends the command quietly, with
status 0, as for any tool whose output nobody reads any more.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from typing import NoReturn

import click

from autoprof import __version__
from autoprof.errors import AutoprofError

INTERRUPTED_STATUS = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C


class _Group(click.Group):
    """Commands are imported on first use (click's documented lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from autoprof.commands import COMMANDS

        return list(COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their whole one-line summaries, from the table: listing them imports
        no command module."""
        from autoprof.commands import SUMMARIES

        with formatter.section("Commands"):
            formatter.write_dl(list(SUMMARIES.items()))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        from autoprof.commands import COMMANDS

        target = COMMANDS.get(name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.ClickException as err:
            _click_error(err)
        except BrokenPipeError:  # --help or --version into a closed pipe
            _silence_stdout()
            sys.exit(0)
        except OSError as err:  # --help or --version printed to a full disk
            _os_failure(err)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except AutoprofError as err:
            _fail(str(err))
        except click.ClickException as err:
            _click_error(err)
        except KeyboardInterrupt:
            _interrupted()
        except click.Abort as abort:  # click's prompts turn Ctrl-C into Abort
            if isinstance(abort.__context__, KeyboardInterrupt):
                _interrupted()
            raise
        except BrokenPipeError:
            _silence_stdout()
            sys.exit(0)
        except OSError as err:
            _os_failure(err)


def _os_failure(err: OSError) -> NoReturn:
    """A full disk, an I/O error: the path (if known) and the system's reason, in one line."""
    if err.filename is not None:
        _fail(_file_refused(err))
    _silence_stdout()  # standard output, most likely: its last flush would fail again
    _fail(err.strerror or str(err))


def _fail(message: str, status: int = 2) -> NoReturn:
    click.echo(f"autoprof: error: {' '.join(message.split())}", err=True)
    sys.exit(status)


def _click_error(err: click.ClickException) -> NoReturn:
    """click's usage error (and its file errors) as our one line, with where to look for a
    usage error, instead of usage + `Error:`; click's own status (2 for usage). A command's
    help shown for want of arguments is no error: click shows it."""
    if isinstance(err, click.exceptions.NoArgsIsHelpError):
        raise err
    where = ""
    if isinstance(err, click.UsageError) and err.ctx is not None:
        where = f" (see '{err.ctx.command_path} --help')"
    _fail(err.format_message() + where, err.exit_code)


def _file_refused(err: OSError) -> str:
    """`PATH: Not a directory`: the path and the system's reason (reading or writing is left
    unsaid: the errno does not tell, and the path says which file)."""
    path = err.filename if err.filename2 is None else f"{err.filename} -> {err.filename2}"
    return f"{path}: {err.strerror or err}"


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
        except OSError as err:  # a full disk under standard output (> /dev/full)
            _silence_stdout()
            _fail(f"standard output: {err.strerror or err}")
        # the process ends here: the interpreter's collections on the way out would trace every
        # object the command imported or made (0.1-0.4 s after a store command); frozen, they
        # are left to the exit, which frees the memory anyway
        gc.freeze()


def write_help_cache(path: str | None = None) -> None:
    """`make install`: the help cache (`commands.helpcache`) written again, to `path` or beside
    its module, unless it is current. Run in a fresh interpreter: no command imported yet."""
    from autoprof.commands import helpcache

    helpcache.refresh(cli, path or helpcache.CACHE)


def main_analyze(name: str, argv: list[str]) -> None:
    """Entry point of the `analyze/<name>.py` scripts: `autoprof analyze <name> ARGS...`, with
    autoperf's own calling forms (`correlation.py ./out`, `event_detail.py --resultdir ./out
    --features AVG.EVENT`) accepted too."""
    from autoprof.commands.analyze import autoperf_args

    cli.main(args=["analyze", name, *autoperf_args(argv)], prog_name="autoprof")
