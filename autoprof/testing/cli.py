"""`autoprof ARGS` in this process, as asv's tests run commands: most commands end in
milliseconds, while a fresh interpreter costs a second of imports. Where the point is a real
process (profile, signals, workers, pipes), a test starts one itself."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from autoprof.cli import cli


@dataclass(frozen=True)
class CliResult:
    """How an in-process `autoprof` command ended, named as subprocess.CompletedProcess."""

    returncode: int
    stdout: str
    stderr: str


def invoke(
    *args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> CliResult:
    """`autoprof ARGS` through click's CliRunner on `autoprof.cli.cli`. An exception that is no
    SystemExit propagates: on the command line it would have been a traceback."""
    from click.testing import CliRunner

    with contextlib.chdir(cwd) if cwd else contextlib.nullcontext():
        result = CliRunner().invoke(
            cli, [str(a) for a in args], env=env, catch_exceptions=False, prog_name="autoprof"
        )
    return CliResult(result.exit_code, result.stdout, result.stderr)
