"""`autoprof COMMAND --help` without importing click: the help texts click renders, kept in a
file beside this module (`make install` writes it: `autoprof.cli.write_help_cache`).

Importing click alone costs about what Python's own start costs (inspect, typing, ...), so a
help printed through click takes twice `python -c pass` and more. The cache holds, for each
command (and `autoprof --help` itself), the exact text click prints for the two names the
program goes by (`autoprof`, `python -m autoprof`) on a terminal of 80 columns or more (click's
help is 78 wide there; narrower, it wraps differently and click renders it).

A cached text is printed only while it is still what click would print: every file its
rendering read (autoprof's and click's modules; the standard library's are the interpreter's
own, named by its version) has the size and modification time it had, and every environment
variable it read (HOME, for the store's default path) has the value it had. Anything else, and
any other command line, goes to click (`autoprof.cli`). tests/test_helpcache.py compares every
cached text with click's.

What the fast path imports is only what Python's start has imported already (os, sys) and
marshal (built in): no typing, pathlib or collections, which would cost a third of the start.
"""

from __future__ import annotations

import marshal
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from collections.abc import Mapping, MutableMapping
    from typing import Any

    import click

CACHE = os.path.join(os.path.dirname(__file__), "help.cache")
# the interpreter's version (marshal's format, the standard library) and the cache's layout
HEADER = f"autoprof-help/1 {sys.version}\n".encode()
PROGS = ("autoprof", "python -m autoprof")
HELP_WIDTH = 78  # click's help on a terminal of 80 columns or more
HELP_OPTIONS = ("--help", "-h")


def columns(env: Mapping[str, str]) -> int:
    """The terminal's width as click takes it (shutil.get_terminal_size: $COLUMNS, else the
    terminal of stdout, else 80), without importing shutil."""
    try:
        wide = int(env.get("COLUMNS", ""))
    except ValueError:
        wide = 0
    if wide > 0:
        return wide
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


def lookup(
    cache: Mapping[str, Any], argv: list[str], prog: str, env: Mapping[str, str]
) -> str | None:
    """The text `prog ARGV` prints from `cache` (as `load` returns it), or None where click
    must render it: another command line, program name or terminal width, a file or an
    environment variable the rendering read that has changed since."""
    if len(argv) == 1 and argv[0] in HELP_OPTIONS:
        command = ""
    elif len(argv) == 2 and argv[1] in HELP_OPTIONS and not argv[0].startswith("-"):
        command = argv[0]
    else:
        return None
    text = cache["texts"].get(prog, {}).get(command)
    if text is None or (argv[-1] == "-h" and command not in cache["short"]):
        return None  # not cached, or -h is no help option of this command
    if columns(env) < HELP_WIDTH + 2 or not current(cache, env, [command]):
        return None
    return text


def current(cache: Mapping[str, Any], env: Mapping[str, str], commands: list[str]) -> bool:
    """Whether the help of `commands` in `cache` is what click would render now: the files and
    the environment variables read then are unchanged."""
    for command in ["", *commands]:  # "": read by the imports (and by `autoprof --help`)
        if any(env.get(name) != value for name, value in cache["env"].get(command, {}).items()):
            return False
    for path, mtime_ns, size in cache["files"]:
        try:
            info = os.stat(path)
        except OSError:
            return False
        if info.st_mtime_ns != mtime_ns or info.st_size != size:
            return False
    return True


def load(path: str = CACHE) -> dict[str, Any] | None:
    """The cache, or None where there is none, or one of another interpreter or layout."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    if not data.startswith(HEADER):
        return None
    try:
        cache = marshal.loads(data[len(HEADER) :])
    except (EOFError, ValueError, TypeError):
        return None
    return cache if isinstance(cache, dict) else None


def printed(argv: list[str], prog: str) -> bool:
    """Print `prog ARGV`'s help from the cache, when it holds it and it is current; whether it
    did (False: click must run)."""
    if not 0 < len(argv) <= 2 or argv[-1] not in HELP_OPTIONS:
        return False  # not a help: any other command does not read the cache
    cache = load()
    text = None if cache is None else lookup(cache, argv, prog, os.environ)
    if text is None:
        return False
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # a reader that stopped early (`| head -1`), as autoprof.cli does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return True


def _watched(environ: MutableMapping[str, str]) -> Any:
    """os.environ, noting each variable read (its value, None where unset) in `.read`."""
    from collections.abc import Iterator, MutableMapping

    class Watched(MutableMapping[str, str]):
        def __init__(self) -> None:
            self.read: dict[str, str | None] = {}

        def __getitem__(self, name: str) -> str:
            self.read[name] = environ.get(name)
            return environ[name]

        def __contains__(self, name: object) -> bool:
            if isinstance(name, str):
                self.read[name] = environ.get(name)
            return name in environ

        def __setitem__(self, name: str, value: str) -> None:
            environ[name] = value

        def __delitem__(self, name: str) -> None:
            del environ[name]

        def __iter__(self) -> Iterator[str]:
            self.read.update(environ)  # the whole environment: every variable counts
            return iter(environ)

        def __len__(self) -> int:
            return len(environ)

        def copy(self) -> dict[str, str]:
            return dict(self)

    return Watched()


def build(group: click.Group) -> dict[str, Any]:
    """Every command's help as click renders it (`group`: autoprof's), with what the rendering
    read: the command modules are imported here, while os.environ is watched (in a fresh
    process, `autoprof.cli.write_help_cache`, so that none was imported before)."""
    import click
    from click.testing import CliRunner

    from autoprof.commands import COMMANDS

    environ = os.environ
    recorded = _watched(environ)
    os.environ = recorded  # noqa: B003 (watched, not replaced)
    try:
        with click.Context(group) as ctx:  # what the modules read as they are imported
            for command in COMMANDS:
                group.get_command(ctx, command)

        def rendered(prog: str, args: list[str]) -> str | None:
            done = CliRunner().invoke(
                group, args, prog_name=prog, terminal_width=HELP_WIDTH, catch_exceptions=False
            )
            return done.stdout if done.exit_code == 0 else None

        # env[""]: read by the imports and by `autoprof --help`, so by every help
        env: dict[str, dict[str, str | None]] = {"": dict(recorded.read)}
        texts: dict[str, dict[str, str]] = {prog: {} for prog in PROGS}
        short = []
        for command in ["", *COMMANDS]:
            recorded.read = {}
            for prog in PROGS:
                text = rendered(prog, [command, "--help"] if command else ["--help"])
                if text is not None:
                    texts[prog][command] = text
            if rendered(PROGS[0], [command, "-h"] if command else ["-h"]) == texts[PROGS[0]].get(
                command
            ):
                short.append(command)
            env[command] = env[command] | recorded.read if command == "" else recorded.read
    finally:
        os.environ = environ  # noqa: B003
    # the terminal's width is checked apart (`columns`)
    env = {
        cmd: {k: v for k, v in read.items() if k not in ("COLUMNS", "LINES")}
        for cmd, read in env.items()
    }
    return {"texts": texts, "short": short, "env": env, "files": _read_files()}


def _read_files() -> list[tuple[str, int, int]]:
    """The source of every module loaded but the standard library's (its version is in
    HEADER): autoprof's, click's."""
    stdlib = os.path.dirname(os.__file__)
    found = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path or path.startswith(stdlib + os.sep) or not os.path.isfile(path):
            continue
        if module.__name__ == "__main__":
            continue
        info = os.stat(path)
        found.append((path, info.st_mtime_ns, info.st_size))
    return sorted(set(found))


def write(cache: dict[str, Any], path: str = CACHE) -> None:
    """Write the cache whole, then put it in place (a reader sees the old one or the new)."""
    folder, name = os.path.split(path)
    part = os.path.join(folder, f".{name}.{os.getpid()}")
    with open(part, "wb") as handle:
        handle.write(HEADER + marshal.dumps(cache))
    os.replace(part, path)


def refresh(group: click.Group, path: str = CACHE) -> None:
    """Write the cache of `group` to `path` unless the one there is current."""
    cache = load(path)
    if cache is None or not current(cache, os.environ, list(cache["env"])):
        write(build(group), path)
