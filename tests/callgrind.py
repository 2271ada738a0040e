"""valgrind's callgrind as the reference count of instructions: each function's exclusive Ir."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

_RECURSION = re.compile(r"'\d+$")  # fib'2: callgrind's name for a deeper recursion level


def exclusive_ir(command: list[str], out: Path) -> Counter[str]:
    """Run `command` under callgrind; the instructions each function executed itself."""
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--compress-strings=no",
            f"--callgrind-out-file={out}",
            *command,
        ],
        check=True,
        capture_output=True,
    )
    return parse(out.read_text().splitlines())


def parse(lines: list[str]) -> Counter[str]:
    """The self cost (the one event, Ir) of each function of a callgrind.out file written with
    --compress-strings=no; the cost line after a calls= line is the callee's, not counted."""
    costs: Counter[str] = Counter()
    function = ""
    callee_cost = False
    for line in lines:
        if line.startswith("fn="):
            function = _RECURSION.sub("", line[3:])
        elif line.startswith("calls="):
            callee_cost = True
        elif line[:1].isdigit() or line[:1] in ("+", "-", "*"):
            if not callee_cost:
                costs[function] += int(line.split()[-1])
            callee_cost = False
    return costs


def call_tree(command: list[str], out: Path) -> tuple[Counter[str], set[tuple[str, str]]]:
    """Run `command` under callgrind; its call tree: each function's inclusive Ir and the
    (caller, callee) pairs of its calls."""
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--compress-strings=no",
            f"--callgrind-out-file={out}",
            *command,
        ],
        check=True,
        capture_output=True,
    )
    return parse_calls(out.read_text().splitlines())


def parse_calls(lines: list[str]) -> tuple[Counter[str], set[tuple[str, str]]]:
    """Inclusive cost and call pairs of a callgrind.out file written with --compress-strings=no.

    The cost line after `calls=` is what the call to `cfn=` cost, callees included. A function's
    inclusive cost is the sum over the calls into its outermost level: callgrind names a deeper
    recursion level `fib'2` (whose cost its outer level already holds), so those calls are left
    out of the sum; the pairs name every level by its function."""
    inclusive: Counter[str] = Counter()
    pairs: set[tuple[str, str]] = set()
    function = callee = ""
    call = False
    for line in lines:
        if line.startswith("fn="):
            function = line[3:]
        elif line.startswith("cfn="):
            callee = line[4:]
        elif line.startswith("calls="):
            call = True
        elif call and (line[:1].isdigit() or line[:1] in ("+", "-", "*")):
            if not _RECURSION.search(callee):
                inclusive[callee] += int(line.split()[-1])
            pairs.add((_RECURSION.sub("", function), _RECURSION.sub("", callee)))
            call = False
    return inclusive, pairs
