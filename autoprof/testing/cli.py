"""`autoprof ARGS` for the tests and the benchmarks: in this process (`invoke`), as asv's tests
run commands, since most commands end in milliseconds while a fresh interpreter costs a second
of imports; or as a real process (`process`) where that is the point (profiles, signals,
workers, pipes, a real terminal or server), always with a timeout."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoprof.cli import cli


@dataclass(frozen=True)
class CliResult:
    """How an in-process `autoprof` command ended, named as subprocess.CompletedProcess."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """All it printed: standard output, then standard error."""
        return self.stdout + self.stderr


def parsed(command: Any, args: list[str]) -> dict[str, Any]:
    """The values click parses from ARGS for one of autoprof's commands, in a context under the
    `autoprof` group's, as on the command line: a context made without it would leave the
    command's help option cached without -h for the rest of the process (click keeps it)."""
    import click

    parent = click.Context(cli, info_name="autoprof", **cli.context_settings)
    return command.make_context(command.name, list(args), parent=parent).params


def invoke(
    *args: str | Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    terminal_width: int | None = None,
) -> CliResult:
    """`autoprof ARGS` through click's CliRunner on `autoprof.cli.cli`. An exception that is no
    SystemExit propagates: on the command line it would have been a traceback."""
    from click.testing import CliRunner

    with contextlib.chdir(cwd) if cwd else contextlib.nullcontext():
        result = CliRunner().invoke(
            cli,
            [str(a) for a in args],
            env=env,
            catch_exceptions=False,
            prog_name="autoprof",
            terminal_width=terminal_width,
        )
    return CliResult(result.exit_code, result.stdout, result.stderr)


# a command of a test that has not ended by then hangs: it fails, never blocks the suite
PROCESS_TIMEOUT_S = 300


def process(
    *args: str | Path, timeout: float = PROCESS_TIMEOUT_S, check: bool = False, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """`python -I -m autoprof ARGS` as a real process, isolated (no import from the working
    folder, no PYTHON* variable), text, output captured (`kwargs` go to
    subprocess.run: env, cwd, stdin, ...); subprocess.TimeoutExpired after `timeout` s."""
    return subprocess.run(
        [sys.executable, "-I", "-m", "autoprof", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
        **kwargs,
    )


def one_error_line(result: CliResult | subprocess.CompletedProcess, *says: str) -> str:
    """The contract for bad input (docs/REFERENCE.md, Usage): status 2, one `autoprof: error:`
    line on stderr, no traceback; each of `says` in it. Returns the line."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autoprof: error: "), result.stderr
    for text in says:
        assert text in lines[0], lines[0]
    return lines[0]
