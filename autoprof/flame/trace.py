"""Instruction traces: the committed instruction addresses of one program, in order, each with
the cycles it took when the trace knows them. Three sources, one stream of `Block`s:

- QEMU user mode, ``qemu-x86_64 -singlestep -d exec,nochain -D LOG`` (``-one-insn-per-tb`` in
  QEMU >= 8.1): one line per executed translation block, so one per instruction with
  single-stepping: ``Trace 0: 0x7f... [00000000/0000000000401136/1040c0b3/00000201] main``;
  the second field in brackets is the guest pc.
- FireSim TracerV, output format 0 (human-readable), as ``tracerv.cc`` prints each committed
  instruction: ``Cycle: %016 PRId64 I%d: %016 PRIx64`` (cycle in decimal, the lane, the address
  in hex without its valid bit 40); lines before the first (the clock-domain header) are skipped.
  Addresses are sign-extended from bit 39 as FirePerf does.
- address lines: ``ADDR [SYMBOL]`` as ``perf script --itrace=i1t -F ip,sym`` prints Intel PT
  (hex, no 0x), or ``ADDR CYCLES`` (a decimal count of the cycles that instruction took).

TracerV's cycle is a time stamp: an instruction is weighted by the cycles until the next one
commits (instructions committed in the same cycle share it; the last one gets none).

A trace has millions of lines, so it is read in blocks of whole lines (`util.streams.read_blocks`,
a few MB each) and each block becomes two numpy arrays at C speed: one regular expression over
the block (QEMU's lines: a split on ``/``, its second field of three), the hex addresses converted
in one pass. Nothing is done per line in Python but the conversion. `steps` gives the same
instructions one by one (tests, small inputs). Pure functions over bytes: the caller streams a
file through them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from autoprof.errors import AutoprofError
from autoprof.util.streams import read_blocks

__all__ = [
    "ADDRESSES",
    "QEMU",
    "TRACERV",
    "Block",
    "Step",
    "TraceReport",
    "blocks",
    "read_blocks",
    "sniff",
    "steps",
]

QEMU, TRACERV, ADDRESSES = "qemu", "tracerv", "addresses"
Step = tuple[int, int | None]  # (address, cycles it took, None when the trace has none)
# (addresses, uint64; cycles each took, int64, -1 where a line has none; None: no cycles at all)
Block = tuple[np.ndarray, np.ndarray | None]

_QEMU = re.compile(r"Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")
_TRACERV = re.compile(r"Cycle: (\d+) I\d+: ([0-9a-f]+)")
_ADDRESS = re.compile(r"\s*(?:0x)?([0-9a-fA-F]+)(?:\s+(\S.*))?$")
# the same, one match per line of a block of lines
_LINES = {
    QEMU: re.compile(rb"^Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/", re.M),
    TRACERV: re.compile(rb"^Cycle: (\d+) I\d+: ([0-9a-f]+)", re.M),
    ADDRESSES: re.compile(rb"^[ \t]*(?:0x)?([0-9a-fA-F]+)(?:[ \t]+(\S[^\n]*))?$", re.M),
}
_CYCLES = re.compile(rb"^[ \t]*(?:0x)?[0-9a-fA-F]+[ \t]+\d+[ \t\r]*$", re.M)  # ADDR CYCLES
_BIT39, _MASK40 = np.uint64(1 << 39), np.uint64((1 << 40) - 1)


@dataclass
class TraceReport:
    """What a trace held: its format and the lines read and left unread."""

    format: str = ""
    lines: int = 0
    skipped: int = 0
    first_skipped: str | None = None


def sniff(head: Iterable[str]) -> str:
    """The format of a trace, from its first lines."""
    for line in head:
        if _QEMU.match(line):
            return QEMU
        if _TRACERV.match(line):
            return TRACERV
        if line.strip() and not line.startswith("#") and _ADDRESS.match(line):
            return ADDRESSES
    raise AutoprofError(
        "not an instruction trace (QEMU -d exec, FireSim TracerV format 0, or address lines)"
    )


def blocks(
    chunks: Iterable[bytes], kind: str, report: TraceReport | None = None
) -> Iterator[Block]:
    """The instructions of a trace of format `kind` (see `sniff`), block by block, from blocks
    of whole lines."""
    report = report if report is not None else TraceReport()
    report.format = kind
    pending: tuple[int, int] | None = None  # TracerV: the last instruction, until the next
    for chunk in chunks:
        if kind == TRACERV:
            block, pending = _tracerv(chunk, report, pending)
            yield block
        else:
            yield _parse(chunk, kind, report)
    if pending is not None:
        yield np.array([pending[0]], dtype=np.uint64), np.zeros(1, dtype=np.int64)


def steps(lines: Iterable[str], kind: str, report: TraceReport | None = None) -> Iterator[Step]:
    """The instructions of a trace of format `kind`, one by one (the same parser as `blocks`)."""
    data = "".join(lines).encode("utf-8", "surrogateescape")
    for addresses, cycles in blocks([data] if data else [], kind, report):
        took = [None] * len(addresses) if cycles is None else cycles.tolist()
        for address, cycle in zip(addresses.tolist(), took, strict=True):
            yield address, None if cycle is None or cycle < 0 else cycle


def _hex(tokens: list[bytes]) -> np.ndarray:
    return np.fromiter(map(int, tokens, repeat(16)), dtype=np.uint64, count=len(tokens))


def _end(chunk: bytes) -> int:
    """Where the block's last line ends (before its newline): findall stops there, so no empty
    line is matched after the last newline."""
    return len(chunk) - 1 if chunk.endswith(b"\n") else len(chunk)


def _qemu_pcs(buf: np.ndarray, lines: int) -> np.ndarray | None:
    """The pc of every line of a QEMU block, at C speed: every line is ``Trace ...
    [CS_BASE/PC/flags/cflags] symbol``, so the pc is the hex field after the first slash after
    the line's one ``[`` (fields of 8 or 16 digits, as the target's width). None when a line
    has another shape (the pattern reads the block then)."""
    opens = np.flatnonzero(buf == ord("["))
    if len(opens) != lines:
        return None
    first = _slash_after(buf, opens + 1)
    second = _slash_after(buf, first + 1) if first is not None else None
    if first is None or second is None:
        return None
    width = int(second[0] - first[0] - 1)
    fields = np.lib.stride_tricks.sliding_window_view(buf, 16)[first + 1]  # (lines, 16)
    lower = fields[:, :width] | 0x20  # "A".."F" as "a".."f"; digits stay
    if not (((lower - 48) < 10) | ((lower - 97) < 6)).all():
        return None
    padded = np.zeros((lines, 16), dtype=np.uint8)
    padded[:, 16 - width :] = (lower & 0x0F) + 9 * (lower >> 6)  # "0".."9", "a".."f" -> 0..15
    return ((padded[:, 0::2] << 4) | padded[:, 1::2]).view(">u8").ravel().astype(np.uint64)


def _slash_after(buf: np.ndarray, starts: np.ndarray) -> np.ndarray | None:
    """Where a hex field of one width (16 digits, 8, or fewer) that starts at every `starts`
    ends in a slash; None when no width fits them all."""
    for width in (16, 8, *range(1, 16)):
        ends = starts + width
        if ends[-1] < len(buf) and (buf[ends] == ord("/")).all():
            return ends
    return None


def _parse(chunk: bytes, kind: str, report: TraceReport) -> Block:
    """A block of QEMU or address lines."""
    end = _end(chunk)
    lines = chunk.count(b"\n", 0, end) + 1
    if kind == QEMU:
        pcs = _qemu_pcs(np.frombuffer(chunk, dtype=np.uint8), lines)
        if pcs is not None:
            report.lines += lines
            return pcs, None
    found = _LINES[kind].findall(chunk, 0, end)
    _count(chunk, kind, report, lines, len(found))
    if kind == QEMU:
        return _hex(found), None
    addresses = _hex([address for address, _ in found])
    if not _CYCLES.search(chunk):
        return addresses, None
    took = [int(rest) if rest.isdigit() else -1 for _, rest in found]
    return addresses, np.array(took, dtype=np.int64)


def _count(chunk: bytes, kind: str, report: TraceReport, lines: int, matched: int) -> None:
    """Count a block's lines and, when some did not match, the ones skipped: neither an
    instruction, nor a comment, nor blank (the first kept for the report)."""
    report.lines += lines
    if matched == lines:
        return
    for line in chunk.splitlines():
        if _LINES[kind].match(line) or not line.strip() or line.startswith(b"#"):
            continue
        report.skipped += 1
        if report.first_skipped is None:
            report.first_skipped = line.decode("utf-8", "replace")[:120]


def _tracerv(
    chunk: bytes, report: TraceReport, pending: tuple[int, int] | None
) -> tuple[Block, tuple[int, int] | None]:
    """A block of TracerV lines, each instruction weighted by the cycles until the next
    commits; the last one waits for the next block (`pending`: its address and cycle)."""
    end = _end(chunk)
    found = _LINES[TRACERV].findall(chunk, 0, end)
    _count(chunk, TRACERV, report, chunk.count(b"\n", 0, end) + 1, len(found))
    if not found:
        return (np.zeros(0, dtype=np.uint64), None), pending
    cycles = np.fromiter(map(int, (c for c, _ in found)), dtype=np.int64, count=len(found))
    addresses = _hex([a for _, a in found]) & _MASK40
    addresses = np.where(addresses & _BIT39, addresses | ~_MASK40, addresses)
    if pending is not None:
        addresses = np.concatenate(([np.uint64(pending[0])], addresses))
        cycles = np.concatenate(([pending[1]], cycles))
    last = (int(addresses[-1]), int(cycles[-1]))
    return (addresses[:-1], np.diff(cycles)), last
