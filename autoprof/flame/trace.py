"""Instruction traces: the committed instruction addresses of one program, in order, each with
the cycles it took when the trace knows them. Three sources, one stream of `Step`s:

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
Pure functions over lines: the caller streams a file through them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from autoprof.errors import AutoprofError

__all__ = ["ADDRESSES", "QEMU", "TRACERV", "Step", "TraceReport", "sniff", "steps"]

QEMU, TRACERV, ADDRESSES = "qemu", "tracerv", "addresses"
Step = tuple[int, int | None]  # (address, cycles it took, None when the trace has none)

_QEMU = re.compile(r"Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")
_TRACERV = re.compile(r"Cycle: (\d+) I\d+: ([0-9a-f]+)")
_ADDRESS = re.compile(r"\s*(?:0x)?([0-9a-fA-F]+)(?:\s+(\S.*))?$")
_BIT39, _MASK40, _MASK64 = 1 << 39, (1 << 40) - 1, (1 << 64) - 1


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


def _sign_extend40(address: int) -> int:
    address &= _MASK40
    return (address - (1 << 40)) & _MASK64 if address & _BIT39 else address


def steps(lines: Iterable[str], kind: str, report: TraceReport | None = None) -> Iterator[Step]:
    """The instructions of a trace of format `kind` (see `sniff`), in order."""
    report = report if report is not None else TraceReport()
    report.format = kind
    if kind == TRACERV:
        yield from _tracerv(lines, report)
        return
    pattern = _QEMU if kind == QEMU else _ADDRESS
    for line in lines:
        report.lines += 1
        found = pattern.match(line)
        if found is None:
            _skip(report, line)
            continue
        if kind == QEMU:
            yield int(found.group(1), 16), None
            continue
        rest = found.group(2)
        yield int(found.group(1), 16), int(rest) if rest and rest.isdigit() else None


def _tracerv(lines: Iterable[str], report: TraceReport) -> Iterator[Step]:
    """TracerV's lines, each instruction weighted by the cycles until the next commits."""
    pending: int | None = None  # the previous instruction's address
    since = 0  # its cycle
    for line in lines:
        report.lines += 1
        found = _TRACERV.match(line)
        if found is None:
            _skip(report, line)
            continue
        cycle, address = int(found.group(1)), _sign_extend40(int(found.group(2), 16))
        if pending is not None:
            yield pending, cycle - since
        pending, since = address, cycle
    if pending is not None:
        yield pending, 0


def _skip(report: TraceReport, line: str) -> None:
    if line.strip() and not line.startswith("#"):
        report.skipped += 1
        if report.first_skipped is None:
            report.first_skipped = line.rstrip("\n")[:120]
