"""QEMU user mode as an instruction counter for a program of another architecture
(`autoprof.emulate`): `qemu-ARCH -d in_asm,exec,nochain` logs each block of guest code once
when it translates it (`IN:`, then one line per instruction, the first at the block's address)
and a line each time it runs one (`Trace 0: HOST [CS_BASE/PC/FLAGS/CFLAGS]`; `nochain` makes
every run of a block pass through the logger). The instructions executed are the sum, over the
runs, of the instructions of the block run.

The log goes through a FIFO, read while the program runs (a log of every block run takes about
60 bytes a block, gigabytes for a second of native work); blocks are counted a chunk of whole
lines at a time, by regular expressions at C speed. A block translated again at an address
with other instructions (code written at run time) is counted by its latest translation at that
address; one cut short by a fault inside it is counted whole. Debian's QEMU (7.2) has no
counting plugin (`-plugin` needs one built against its headers, which Debian does not ship),
hence the log. The `flamegraph --trace` instruction traces come from the same QEMU.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import threading
from collections import Counter
from pathlib import Path
from typing import ClassVar

from autoprof.errors import AutoprofError
from autoprof.util.streams import read_blocks

NAME = "qemu"
FIFO = "qemu.log"
_BLOCK = re.compile(rb"^IN:[^\n]*\n0x([0-9a-fA-F]+):[^\n]*\n((?:0x[0-9a-fA-F]+:[^\n]*\n)*)", re.M)
_RUN = re.compile(rb"^Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/", re.M)


class Tally:
    """Instructions executed, from the log's chunks of whole lines in order."""

    def __init__(self) -> None:
        self.sizes: dict[int, int] = {}  # block address -> its instructions (latest translation)
        self.instructions = 0
        self.unknown = 0  # runs of a block whose translation the log did not show

    def add(self, chunk: bytes) -> None:
        for found in _BLOCK.finditer(chunk):
            self.sizes[int(found.group(1), 16)] = 1 + found.group(2).count(b"\n")
        for pc, runs in Counter(_RUN.findall(chunk)).items():
            size = self.sizes.get(int(pc, 16))
            if size is None:
                self.unknown += runs
            else:
                self.instructions += size * runs


class _Reader(threading.Thread):
    """Reads the FIFO QEMU logs into while the program runs."""

    def __init__(self, fifo: Path) -> None:
        super().__init__(daemon=True)
        self.fifo, self.tally = fifo, Tally()
        self.error: OSError | None = None

    def run(self) -> None:
        try:
            with self.fifo.open("rb") as stream:
                for chunk in read_blocks(stream):
                    self.tally.add(chunk)
        except OSError as err:
            self.error = err


class _Engine:
    events: ClassVar[dict[str, str]] = {
        "instructions:u": "instructions executed (QEMU's log of the blocks it ran)"
    }
    default: ClassVar[tuple[str, ...]] = ("instructions:u",)

    def __init__(self, arch: str) -> None:
        self.arch = arch
        self.name = NAME
        self._readers: dict[Path, _Reader] = {}

    def plain(self, command: list[str]) -> list[str]:
        qemu = f"qemu-{self.arch}"
        if shutil.which(qemu) is None:
            raise AutoprofError(
                f"--emulate needs {qemu} for {command[0]} (apt-get install qemu-user)"
            )
        return [qemu, *command]

    def argv(self, command: list[str], names: list[str], folder: Path) -> list[str]:
        qemu = self.plain(command)[0]
        return [qemu, "-d", "in_asm,exec,nochain", "-D", str(folder / FIFO), *command]

    def begin(self, folder: Path) -> None:
        """The FIFO QEMU logs into, and its reader, made before QEMU starts."""
        fifo = folder / FIFO
        os.mkfifo(fifo, 0o600)
        reader = self._readers[folder] = _Reader(fifo)
        reader.start()

    def read(self, folder: Path, names: list[str]) -> dict[str, float]:
        reader = self._readers.pop(folder)
        _release(reader, folder / FIFO)
        if reader.error is not None:
            raise AutoprofError(f"reading QEMU's log: {reader.error}")
        tally = reader.tally
        if tally.unknown:
            raise AutoprofError(f"QEMU's log ran {tally.unknown} blocks it never showed translated")
        if tally.instructions == 0:
            raise AutoprofError("QEMU logged no instruction: did the program start?")
        return {"instructions:u": float(tally.instructions)}


def _release(reader: _Reader, fifo: Path) -> None:
    """Wait for the reader to end. A reader still blocked opening the FIFO (QEMU failed before
    opening it) is let go by a writer that opens and closes at once; a reader that has already
    closed its end (it read QEMU's last line) refuses that open (ENXIO) and ends on its own."""
    while reader.is_alive():
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as err:
            if err.errno != errno.ENXIO:
                raise
        reader.join(0.05)


def engine(arch: str) -> _Engine:
    return _Engine(arch)
