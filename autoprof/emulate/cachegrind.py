"""valgrind's cachegrind as an instruction and memory-access counter (`autoprof.emulate`).

cachegrind runs the program on valgrind's JIT and counts, in user mode only, every guest
instruction executed (`Ir`) and, with its cache model (`--cache-sim=yes`), every data read and
write and the misses of a two-level cache; with `--branch-sim=yes`, conditional and indirect
branches and a simple predictor's mispredictions. It writes one `cachegrind.out` per process;
the `summary:` line of each holds its totals in the order of its `events:` line. The totals of
every process the command ran are added, as perf counts children.

The cache model's sizes are fixed here (`CACHES`), not taken from the machine's CPUID as
cachegrind does by default: a CI runner's CPU changes from one job to the next, and the misses
of one model must not change with it. They are a model's misses: an inclusive, LRU, no
prefetcher two-level cache, not the machine's.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from autoprof.errors import AutoprofError

NAME = "cachegrind"
OUT = "cachegrind.out"
LOG = "valgrind.log"
# I1 and D1: 32 KiB, 8-way, 64 B lines; LL: 8 MiB, 16-way (a common x86 desktop part)
CACHES = ("--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64")

# event -> (cachegrind's counters added, what it means); the names are perf's, with :u
COUNTERS: dict[str, tuple[tuple[str, ...], str]] = {
    "instructions:u": (("Ir",), "instructions executed in user mode"),
    "L1-dcache-loads:u": (("Dr",), "data reads (one per instruction that reads memory)"),
    "L1-dcache-stores:u": (("Dw",), "data writes (one per instruction that writes memory)"),
    "L1-dcache-load-misses:u": (("D1mr",), "model: L1 data read misses"),
    "L1-dcache-store-misses:u": (("D1mw",), "model: L1 data write misses"),
    "L1-icache-load-misses:u": (("I1mr",), "model: L1 instruction misses"),
    "LLC-load-misses:u": (("ILmr", "DLmr"), "model: last-level read misses (code and data)"),
    "LLC-store-misses:u": (("DLmw",), "model: last-level write misses"),
    "branches:u": (("Bc", "Bi"), "conditional and indirect branches (not direct jumps, calls)"),
    "branch-misses:u": (("Bcm", "Bim"), "model: mispredicted conditional and indirect branches"),
}
CACHE = {"Dr", "Dw", "D1mr", "D1mw", "I1mr", "ILmr", "DLmr", "DLmw"}
BRANCH = {"Bc", "Bi", "Bcm", "Bim"}


def argv(command: list[str], names: list[str], folder: Path) -> list[str]:
    """cachegrind's command line: every process's counts in `folder`, its messages in a log
    there (the command's own standard error stays the command's)."""
    wanted = {c for n in names for c in COUNTERS[n][0]}
    cache = bool(wanted & CACHE)
    words = ["valgrind", "--tool=cachegrind", "--trace-children=yes"]
    words += [f"--cachegrind-out-file={folder / OUT}.%p", f"--log-file={folder / LOG}.%p"]
    words += [f"--cache-sim={'yes' if cache else 'no'}"]
    words += [f"--branch-sim={'yes' if wanted & BRANCH else 'no'}"]
    words += list(CACHES) if cache else []
    return [*words, "--", *command]


def totals(text: str) -> dict[str, int]:
    """The `summary:` totals of one cachegrind.out file, by counter name."""
    names: list[str] = []
    for line in text.splitlines():
        if line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith("summary:"):
            values = [int(v) for v in line.split()[1:]]
            if len(values) != len(names):
                break
            return dict(zip(names, values, strict=True))
    raise AutoprofError("cachegrind's output has no summary of its events")


def read(folder: Path, names: list[str]) -> dict[str, float]:
    """The events `names` of every process the command ran, added."""
    files = sorted(folder.glob(f"{OUT}.*"))
    if not files:
        logs = sorted(folder.glob(f"{LOG}.*"))
        said = logs[0].read_text(errors="replace").strip().splitlines()[-1:] if logs else []
        raise AutoprofError(f"cachegrind wrote no counts: {said[0] if said else 'no message'}")
    added: dict[str, int] = {}
    for path in files:
        for counter, value in totals(path.read_text(errors="replace")).items():
            added[counter] = added.get(counter, 0) + value
    return {n: float(sum(added.get(c, 0) for c in COUNTERS[n][0])) for n in names}


class _Engine:
    name = NAME
    events: ClassVar[dict[str, str]] = {name: meaning for name, (_, meaning) in COUNTERS.items()}
    default: ClassVar[tuple[str, ...]] = ("instructions:u",)

    def argv(self, command: list[str], names: list[str], folder: Path) -> list[str]:
        return argv(command, names, folder)

    def begin(self, folder: Path) -> None:
        return None  # cachegrind writes its files itself

    def read(self, folder: Path, names: list[str]) -> dict[str, float]:
        return read(folder, names)

    def plain(self, command: list[str]) -> list[str]:
        return command


ENGINE = _Engine()
