"""perf lives in one room (issue #41, item 1): no module outside `autoprof/perf/` runs perf,
looks for it on PATH, builds its command line or reads what it prints, so a perf version change
touches one package (docs/DESIGN.md, "perf's formats").

Two walks: one over every module's source (`ast`: its imports, so `from subprocess import run`
counts as much as `subprocess.run`, and its calls and literals), one over the processes a few
commands start (an audit hook sees each `subprocess.Popen` and the Python frame that asked for
it; `bench` starts perf under its rusage helper, a Python given the argv `perf.command` built).
`autoprof/testing/` (the tests' own harness, which nothing in the package imports) is left out
of the first.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from types import FrameType

import pytest

from autoprof.perf import command as perf_command
from autoprof.testing.cli import invoke

PACKAGE = Path(__file__).resolve().parents[1] / "autoprof"
ROOM = PACKAGE / "perf"
HARNESS = PACKAGE / "testing"

# the calls that start a program, or look one up on PATH, by their qualified names
STARTERS = {
    *(f"subprocess.{f}" for f in ("run", "Popen", "call", "check_call", "check_output")),
    *(f"subprocess.{f}" for f in ("getoutput", "getstatusoutput")),
    *(f"os.{f}" for f in ("system", "popen", "execv", "execvp", "execve", "execvpe", "execl")),
    *(f"os.{f}" for f in ("execlp", "posix_spawn", "posix_spawnp", "spawnv", "spawnvp")),
    "asyncio.create_subprocess_exec",
    "asyncio.create_subprocess_shell",
    "shutil.which",
}
# perf's subcommands: a literal list ["perf", "stat", ...] is a perf command line
SUBCOMMANDS = {"stat", "record", "script", "report", "list", "trace", "annotate", "--version"}
# what only perf's own output holds: reading it is parsing perf
OUTPUT_MARKERS = ("<not counted>", "<not supported>", "Performance counter stats", "perf version")


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> qualified name, from the module's imports (`import subprocess as sp`,
    `from shutil import which`)."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                found[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                found[a.asname or a.name] = f"{node.module}.{a.name}"
    return found


def _qualified(func: ast.expr, aliases: dict[str, str]) -> str:
    if isinstance(func, ast.Name):
        return aliases.get(func.id, func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{aliases.get(func.value.id, func.value.id)}.{func.attr}"
    return ""


def _is_perf(node: ast.expr) -> bool:
    """ "perf", "perf stat ..." (a shell line), or a variable named for perf."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value == "perf" or node.value.startswith("perf ")
    return isinstance(node, ast.Name) and "perf" in node.id.lower()


def _read_against(node: ast.AST) -> list[str]:
    """The strings text is compared with or searched for at `node`: the operands of a
    comparison (``==``, ``in``), the arguments of a call (``startswith``, ``re.search``,
    ``split``). A message that only names perf's output (prose, an error) is no parse of it."""
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
    elif isinstance(node, ast.Call):
        operands = list(node.args)
    else:
        return []
    return [o.value for o in operands if isinstance(o, ast.Constant) and isinstance(o.value, str)]


def perf_uses(source: str, name: str = "<source>") -> list[str]:
    """Where `source` runs perf, looks it up, builds its command line or reads its output."""
    tree = ast.parse(source, name)
    aliases, found = _aliases(tree), []
    for node in ast.walk(tree):
        line = f"{name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call) and _qualified(node.func, aliases) in STARTERS and node.args:
            first = node.args[0]
            head = (
                first.elts[0] if isinstance(first, ast.List | ast.Tuple) and first.elts else first
            )
            if _is_perf(head) or _is_perf(first):
                found.append(f"{line} starts perf ({_qualified(node.func, aliases)})")
        elif isinstance(node, ast.List | ast.Tuple) and len(node.elts) > 1:
            head, second = node.elts[0], node.elts[1]
            if _is_perf(head) and isinstance(second, ast.Constant) and second.value in SUBCOMMANDS:
                found.append(f"{line} builds a perf command line")
        for text in _read_against(node):
            marks = [m for m in OUTPUT_MARKERS if m in text]
            if marks:
                found.append(f"{line} reads perf's output ({marks[0]!r})")
    return found


def _outside_the_room() -> list[Path]:
    return [
        p
        for p in sorted(PACKAGE.rglob("*.py"))
        if not p.is_relative_to(ROOM) and not p.is_relative_to(HARNESS)
    ]


def test_no_module_outside_perf_runs_perf_or_reads_its_output():
    found = [
        use
        for path in _outside_the_room()
        for use in perf_uses(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    ]
    assert not found, "perf outside perf/:\n" + "\n".join(found)


def test_the_walk_finds_what_the_catalog_did_before():
    """The walk itself, on what `catalog/probe.py`, `catalog/host.py` and `catalog/machine.py`
    held before #41: each way of running perf or reading it is seen."""
    before = '''
import shutil, subprocess
from subprocess import run as go

def group_counts(perf, group):
    """Prose naming <not counted> is fine."""
    argv = [perf, "stat", "-x,", "-e", group]
    return subprocess.run(argv, capture_output=True)

def tracepoints():
    perf = shutil.which("perf")
    return go([perf, "list", "--raw-dump", "tracepoint"])

def counted(line):
    return line.startswith("<not counted>") or line == "<not supported>"

WHY = "perf printed <not supported>"  # a message, no parse
'''
    found = perf_uses(before)
    assert found == [
        "<source>:7 builds a perf command line",
        "<source>:11 starts perf (shutil.which)",
        "<source>:12 starts perf (subprocess.run)",
        "<source>:12 builds a perf command line",
        "<source>:15 reads perf's output ('<not counted>')",
        "<source>:15 reads perf's output ('<not supported>')",
    ], found
    assert perf_uses("import subprocess\nsubprocess.run(['cc', '-O2', 'x.c'])\n") == []


# --- the processes a few commands start, and who started them ---------------------------------

_seen: list[tuple[str, str]] = []  # (program, the autoprof module that asked for it)
_watching = False


def _audit(event: str, args: tuple) -> None:
    if not _watching or event != "subprocess.Popen":
        return
    executable, argv = args[0], args[1]
    program = os.path.basename(str(argv[0] if argv else executable or ""))
    frame: FrameType | None = sys._getframe(1)
    while frame and not frame.f_code.co_filename.startswith(str(PACKAGE)):
        frame = frame.f_back
    _seen.append((program, frame.f_code.co_filename if frame else "?"))


sys.addaudithook(_audit)


@pytest.fixture
def watched():
    global _watching
    _seen.clear()
    _watching = True
    try:
        yield _seen
    finally:
        _watching = False


@pytest.mark.skipif(perf_command.installed() is None, reason="perf not installed")
def test_every_perf_the_commands_start_is_started_from_perf(watched, tmp_path):
    """profile (of a command, and attached to a process), bench and the catalog of this machine:
    each perf they start is started by a module of `autoprof/perf/`."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        steps = [
            ("schedule", "-e", "task-clock"),
            ("profile", "-o", str(tmp_path / "a"), "-e", "task-clock", "--", "true"),
            (
                "profile",
                "-o",
                str(tmp_path / "b"),
                "-e",
                "task-clock",
                "-p",
                str(sleeper.pid),
                "--duration",
                "0.2",
            ),
            ("bench", "-n", "2", "--warmup", "0", "-e", "task-clock", "--", "true"),
        ]
        for args in steps:
            result = invoke(*args)
            assert result.returncode == 0, (args, result.output)
    finally:
        sleeper.kill()
        sleeper.wait()
    perfs = [module for program, module in watched if program == "perf"]
    assert perfs, watched  # the hook saw perf started at all
    outside = [m for m in perfs if not Path(m).is_relative_to(ROOM)]
    assert not outside, outside
