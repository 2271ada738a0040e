"""The CLI shell: version, help, and the one-line error contract."""

from __future__ import annotations

import subprocess
import sys

from autoprof import __version__


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autoprof", *args], capture_output=True, text=True)


def test_version():
    proc = run("--version")
    assert proc.returncode == 0
    assert __version__ in proc.stdout


def test_unknown_command_is_an_error():
    proc = run("no-such-command")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
