"""Folded stacks: the one model every flame-graph renderer reads.

A profile is a mapping ``stack -> weight``, where a stack is a tuple of frame names from the root
(the process name) to the leaf, and the weight is the sum of the sample periods (1 per sample
when perf printed no period), exactly as FlameGraph's ``stackcollapse-perf.pl`` folds them.
``samples`` counts the samples behind each stack when they are known (not for folded input).

`fold` makes one from parsed `perf script` samples, `read_folded` from FlameGraph's text format,
`folded_lines` writes that format back (sorted as stackcollapse-perf.pl sorts).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter

from autoprof.errors import AutoprofError
from autoprof.perf.script import KERNEL, ParseReport, Sample

Stack = tuple[str, ...]
_name = attrgetter("name")


@dataclass
class Folded:
    stacks: dict[Stack, int] = field(default_factory=dict)
    samples: dict[Stack, int] = field(default_factory=dict)  # empty when unknown
    event: str | None = None  # the event the weights count (None when unknown)
    kinds: dict[str, str] = field(default_factory=dict)  # frame name -> kind, when known
    notes: list[str] = field(default_factory=list)  # what the user should know about the input

    @property
    def total(self) -> int:
        return sum(self.stacks.values())

    @property
    def sample_count(self) -> int | None:
        return sum(self.samples.values()) if self.samples else None


def process_name(sample: Sample, pid: bool = False, tid: bool = False) -> str:
    """The root frame of a sample: ``comm``, ``comm-pid`` or ``comm-pid/tid`` (spaces to ``_``),
    with ``?`` for a pid perf did not print, as stackcollapse-perf.pl names them."""
    if tid:
        name = f"{sample.comm}-{sample.pid or '?'}/{sample.tid}"
    elif pid:
        name = f"{sample.comm}-{sample.pid or '?'}"
    else:
        name = sample.comm
    return name.replace(" ", "_")


def fold(
    samples: Iterable[Sample], *, pid: bool = False, tid: bool = False, kernel: bool = True
) -> Folded:
    """Fold samples (of one event: the parser keeps one, as stackcollapse-perf.pl does).

    `kernel=False` drops kernel frames (a sample that ran only in the kernel is kept on its
    process frame, so totals do not change); `pid`/`tid` split the root by process/thread.
    """
    out = Folded()
    stacks, counts, kinds = out.stacks, out.samples, out.kinds
    names: dict[tuple[str, str | None, str], str] = {}  # (comm, pid, tid) -> root frame
    for sample in samples:
        if out.event is None:
            out.event = sample.event
        frames = sample.frames
        if not kernel:
            frames = tuple(f for f in frames if f.kind != KERNEL)
        who = (sample.comm, sample.pid, sample.tid)
        root = names.get(who)
        if root is None:
            root = names[who] = process_name(sample, pid, tid)
        key = (root, *map(_name, frames))
        weight = stacks.get(key)
        if weight is None:  # a new stack: note its frames' kinds
            weight = 0
            for f in frames:
                kinds.setdefault(f.name, f.kind)
        stacks[key] = weight + sample.period
        counts[key] = counts.get(key, 0) + 1
    return out


def event_notes(folded: Folded, report: ParseReport, asked: str | None) -> None:
    """Say which event the graph shows when others were sampled; fail on an absent one."""
    seen = report.events
    if asked is not None and asked not in seen:
        names = ", ".join(sorted(seen)) or "none"
        raise AutoprofError(f"no samples of event {asked!r} in the input (events: {names})")
    shown = folded.event or report.event
    others = {k: n for k, n in seen.items() if k != shown}
    if others:
        listed = ", ".join(f"{k} ({n} samples)" for k, n in sorted(others.items()))
        folded.notes.append(f"showing event {shown}; also sampled: {listed} (use --event)")


_FOLDED_LINE = re.compile(r"^(.*\S)\s+(\d+)$")


def read_folded(lines: Iterable[str]) -> Folded:
    """Read FlameGraph's folded format (``a;b;c 12`` per line), summing repeated stacks."""
    out = Folded()
    bad = 0
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            continue
        match = _FOLDED_LINE.match(line)
        if match is None:
            bad += 1
            continue
        key = tuple(match.group(1).split(";"))
        out.stacks[key] = out.stacks.get(key, 0) + int(match.group(2))
    if bad:
        out.notes.append(f"{bad} lines were not folded stacks and were skipped")
    return out


def without_kernel(folded: Folded) -> Folded:
    """Folded input carries no frame kinds; drop frames stackcollapse annotated as kernel
    (``_[k]``). Says so when there is nothing to drop."""
    out = Folded(event=folded.event, notes=list(folded.notes))
    found = False
    for stack, weight in folded.stacks.items():
        kept = tuple(f for f in stack if not f.endswith("_[k]"))
        found = found or len(kept) != len(stack)
        out.stacks[kept] = out.stacks.get(kept, 0) + weight
    if not found:
        out.notes.append("--no-kernel: the folded input marks no kernel frames (_[k]); kept all")
    return out


def perl_order(text: str) -> bytes:
    """Sort key of Perl's ``cmp`` (stackcollapse-perf.pl's order): the bytes of the line."""
    return text.encode("utf-8", "surrogateescape")


def folded_lines(folded: Folded) -> Iterator[str]:
    """FlameGraph's folded text, one ``stack weight`` line each, in stackcollapse-perf.pl's
    order (Perl's ``cmp``: byte order of the joined line)."""
    joined = [(";".join(stack), weight) for stack, weight in folded.stacks.items()]
    joined.sort(key=lambda item: perl_order(item[0]))
    for text, weight in joined:
        yield f"{text} {weight}\n"
