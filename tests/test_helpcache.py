"""`autoprof COMMAND --help` from the help cache (autoprof/commands/helpcache.py): click's own
texts, printed without importing click, and only while nothing they were rendered from has
changed."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autoprof.cli import cli
from autoprof.commands import COMMANDS, helpcache


def write(path: Path) -> list[str]:
    """The command `make install` runs, writing to `path`."""
    code = f"from autoprof.cli import write_help_cache; write_help_cache({str(path)!r})"
    return [sys.executable, "-c", code]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> dict:
    """A cache of this checkout, built as `make install` builds it (a fresh interpreter)."""
    path = tmp_path_factory.mktemp("helpcache") / "help.cache"
    subprocess.run(write(path), check=True, timeout=300)
    loaded = helpcache.load(str(path))
    assert loaded is not None
    return loaded


def clicks(prog: str, argv: list[str]) -> str:
    done = CliRunner().invoke(cli, argv, prog_name=prog, terminal_width=helpcache.HELP_WIDTH)
    assert done.exit_code == 0, done.output
    return done.stdout


WIDE = {**os.environ, "COLUMNS": "120"}


@pytest.mark.parametrize("prog", helpcache.PROGS)
def test_every_cached_help_is_what_click_prints(cache, prog):
    """Each command's help (and `autoprof --help`), with --help and with -h, under both names
    the program goes by, is click's rendering on a terminal of 80 columns or more."""
    for command in ["", *COMMANDS]:
        for option in helpcache.HELP_OPTIONS:
            argv = [command, option] if command else [option]
            assert helpcache.lookup(cache, argv, prog, WIDE) == clicks(prog, argv), argv


def test_click_renders_what_the_cache_cannot_say(cache):
    """Another command line, another program name, a narrower terminal: click's to print."""
    assert helpcache.lookup(cache, ["profile", "--help"], "autoprof", WIDE) is not None
    for argv in (["profile"], ["profile", "--help", "x"], ["--help", "profile"], ["nope", "-h"]):
        assert helpcache.lookup(cache, argv, "autoprof", WIDE) is None, argv
    assert helpcache.lookup(cache, ["profile", "--help"], "ap", WIDE) is None
    narrow = {**WIDE, "COLUMNS": "79"}
    assert helpcache.lookup(cache, ["profile", "--help"], "autoprof", narrow) is None


def test_a_change_to_what_a_help_was_rendered_from_sends_it_to_click(cache, tmp_path):
    """A file it read, modified; a variable it read (HOME: the default store's folder), set
    otherwise: the cached text is no longer used."""
    argv, prog = ["upload", "--help"], "autoprof"
    assert "HOME" in cache["env"][""]  # read when the commands were imported
    moved = {**WIDE, "HOME": "/elsewhere"}
    assert helpcache.lookup(cache, argv, prog, moved) is None
    source = tmp_path / "module.py"
    source.write_text("x = 1\n")
    info = source.stat()
    edited = {**cache, "files": [*cache["files"], (str(source), info.st_mtime_ns, info.st_size)]}
    assert helpcache.lookup(edited, argv, prog, WIDE) is not None
    os.utime(source, ns=(info.st_atime_ns, info.st_mtime_ns + 1))
    assert helpcache.lookup(edited, argv, prog, WIDE) is None
    source.unlink()
    assert helpcache.lookup(edited, argv, prog, WIDE) is None


def test_the_installed_cache_prints_help_without_click_while_current():
    """`python -m autoprof profile --help` as a user runs it: from the cache `make install`
    wrote, without importing click, where it is current; through click where it is not (a
    source edited since). The same text either way."""
    cache = helpcache.load()
    fresh = cache is not None and helpcache.current(cache, WIDE, ["profile"])
    argv = [sys.executable, "-X", "importtime", "-m", "autoprof", "profile", "--help"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=WIDE, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == clicks("python -m autoprof", ["profile", "--help"])
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()}
    assert ("click" not in imported) == fresh, f"cache current: {fresh}"


def test_a_reader_that_stops_early_ends_it_quietly():
    autoprof = shlex.join([sys.executable, "-m", "autoprof", "profile", "--help"])
    proc = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {autoprof} | head -1"],
        capture_output=True,
        text=True,
        env=WIDE,
        timeout=60,
    )
    assert proc.stdout.startswith("Usage: ") and proc.stdout.count("\n") == 1
    assert proc.stderr == "" and proc.returncode == 0


def test_a_cache_of_another_interpreter_is_not_read(tmp_path):
    path = tmp_path / "help.cache"
    path.write_bytes(b"autoprof-help/1 3.0.0 (another)\n" + b"\0" * 16)
    assert helpcache.load(str(path)) is None
    path.write_bytes(helpcache.HEADER + b"\xff")
    assert helpcache.load(str(path)) is None
    assert helpcache.load(str(tmp_path / "missing")) is None


def test_make_install_writes_the_cache_again_only_when_it_is_not_current(tmp_path):
    path = tmp_path / "help.cache"
    argv = write(path)
    subprocess.run(argv, check=True, timeout=300)
    first = path.stat().st_mtime_ns
    subprocess.run(argv, check=True, timeout=300)
    assert path.stat().st_mtime_ns == first
    subprocess.run(argv, check=True, timeout=300, env={**os.environ, "HOME": str(tmp_path)})
    assert path.stat().st_mtime_ns != first
    cache = helpcache.load(str(path))
    assert cache is not None and cache["env"][""]["HOME"] == str(tmp_path)
    assert Path(str(tmp_path)).is_dir()
