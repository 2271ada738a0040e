"""Exact counts without a PMU: a command run under an emulator or a binary instrumenter that
counts what it executes, under the names of the hardware events they stand for.

    engine = emulate.engine_for(command)          # cachegrind (this machine's code) or qemu
    argv = engine.argv(command, names, folder)    # the emulator's command line (pure)
    engine.begin(folder)                          # just before it runs (QEMU's log reader)
    counts = engine.read(folder, names)           # {event name: count} once it has ended

Two engines, chosen by the command's program (`engine_for`):

- valgrind's cachegrind (`cachegrind`) for a program of this machine's architecture, and for
  scripts: it follows the command through exec and into every process it starts
  (`--trace-children=yes`), as perf's inherited counting does, and gives user-mode instructions
  and what its models add: data reads and writes, a cache model's misses, conditional and
  indirect branches and a branch predictor's mispredictions (`cachegrind.EVENTS`).
- QEMU user mode (`qemu`) for a program built for another architecture (an aarch64 or riscv64
  ELF file on an x86-64 runner): the instructions it executes, counted from QEMU's own log of
  the blocks it translates and runs (`qemu.py`). Instructions only, and the command's own
  process only: QEMU does not follow exec.

Both count the same thing on every run of a deterministic program: an emulated count has no
noise, so a gate compares it exactly. An emulated event's PMU is the engine's name
(`cachegrind`, `qemu`), which keeps it apart from a hardware count of the same name in results,
in the store and on pages. `bench --emulate` counts with an engine in every repetition;
`profile --emulate` plans the engine's events (`catalog`: no counter limits them, one run holds
them all) and runs the command under it (`run.emulated`). This package stands beside `perf`
(layer 5): it is the other thing that counts a command.
"""

from __future__ import annotations

import platform
import shutil
from pathlib import Path
from typing import ClassVar, Protocol

from autoprof.catalog.model import Catalog, Event, Pmu
from autoprof.errors import AutoprofError


class Engine(Protocol):
    name: str
    events: ClassVar[dict[str, str]]  # event name -> what the engine counts for it
    default: ClassVar[tuple[str, ...]]

    def argv(self, command: list[str], names: list[str], folder: Path) -> list[str]:
        """The command line that counts `names` into `folder` (makes nothing)."""
        ...

    def begin(self, folder: Path) -> None:
        """What must exist before that command line runs (QEMU: its log's FIFO and reader)."""
        ...

    def plain(self, command: list[str]) -> list[str]:
        """How the command runs without counting (its times and max RSS): itself, or under
        QEMU without its log for another architecture's program."""
        ...

    def read(self, folder: Path, names: list[str]) -> dict[str, float]: ...


# ELF e_machine -> QEMU's name of the architecture (qemu-NAME)
ELF_MACHINES = {62: "x86_64", 183: "aarch64", 243: "riscv64", 40: "arm", 3: "i386", 8: "mips"}
HOST_MACHINES = {"x86_64": 62, "aarch64": 183, "riscv64": 243}


def elf_machine(path: Path) -> int | None:
    """The e_machine of an ELF file (None when the file is not ELF: a script)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    return int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")


def engine_for(command: list[str]) -> Engine:
    """cachegrind for this machine's programs and scripts, QEMU user mode for another
    architecture's; AutoprofError when the emulator it needs is not installed."""
    from autoprof.emulate import cachegrind, qemu

    found = shutil.which(command[0])
    if found is None:
        raise AutoprofError(f"command not found: {command[0]}")
    machine = elf_machine(Path(found))
    host = HOST_MACHINES.get(platform.machine())
    if machine is None or machine == host:
        if shutil.which("valgrind") is None:
            raise AutoprofError("--emulate needs valgrind (Debian: apt-get install valgrind)")
        return cachegrind.ENGINE
    arch = ELF_MACHINES.get(machine)
    if arch is None:
        raise AutoprofError(f"{command[0]} is an ELF program for machine {machine}: no emulator")
    return qemu.engine(arch)


def check_names(engine: Engine, names: list[str]) -> list[str]:
    """The events asked for (the engine's default when none), refused in one line when the
    engine cannot count one."""
    names = names or list(engine.default)
    unknown = [n for n in names if n not in engine.events]
    if unknown:
        raise AutoprofError(
            f"--emulate ({engine.name}) cannot count {', '.join(unknown)}; it counts "
            f"{', '.join(engine.events)}"
        )
    return names


EMULATED_PMUS = ("cachegrind", "qemu")  # the PMU names of emulated counts: one per engine


def catalog(command: list[str], names: list[str]) -> Catalog:
    """What `profile --emulate` plans: the events `names` (every event the engine counts when
    none is named) on a PMU named after the engine, which no counter limits (one run holds
    them all); refused in one line when the engine is missing or cannot count one."""
    engine = engine_for(command)
    chosen = check_names(engine, names or list(engine.events))
    pmu = Pmu(engine.name, unconstrained=True, description=f"emulated: {engine.name}")
    events = [Event(n, engine.name, n, description=engine.events[n]) for n in chosen]
    return Catalog(
        engine.name, {engine.name: pmu}, events, source=f"autoprof.emulate.{engine.name}"
    )
