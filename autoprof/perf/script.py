"""Parse `perf script` text into samples: one pure, streaming function over lines.

The rules are those of FlameGraph's ``stackcollapse-perf.pl`` (the reference every flame-graph
user compares with), so that folding our samples gives its output byte for byte:

- a sample starts with a header line at column 0: ``comm [pid/]tid [cpu] time: [period] event:``
  (perf 3.x prints no period and often ``pid/tid``; perf 4.x-6.x print the period by default);
  the period is the sample's weight, 1 when absent;
- then one line per frame, leaf first: ``ip symbol[+0xoff] (dso)``; ``+0x..`` offsets are
  dropped, ``[unknown]`` becomes ``[dso basename]`` when the dso is known, ``a->b`` (old perf's
  inline chains) are split with ``_[i]`` on the inlined part, and names are tidied (``;`` to
  ``:``, quotes dropped, argument lists after ``(`` cut unless it looks like a Go method);
  Java frames lose their leading ``L``; perf 5.x+ inlined frames are ``ip sym (inlined)``;
- an empty line ends the sample; ``#`` lines are comments (``perf script --header``).

Lines that fit none of these are counted, not fatal; so is a last sample cut short by a
truncated file (it is dropped: its stack lacks its root frames).

Speed: perf repeats the same frame lines over and over, so each distinct line is parsed once and
cached; a sample costs a dictionary lookup per frame plus one regex on its header.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

# stackcollapse-perf.pl's three line shapes, verbatim but for one fix: its header pattern
# `^(\S.+?)` needs a two-character comm, so a one-letter program's samples got a garbage name
# ("w 17378  1297.526728:"); `^(\S.*?)` accepts it and changes nothing for longer names.
_HEADER = re.compile(r"^(\S.*?)\s+(\d+)/*(\d+)*\s+")
_PERIOD_EVENT = re.compile(r":\s*(\d+)*\s+(\S+):\s*$")
_FRAME = re.compile(r"^\s*(\w+)\s*(.+) \((.*)\)")
_OFFSET = re.compile(r"\+0x[\da-f]+$")
_ARGS = re.compile(r"\((?!anonymous namespace\)).*")
_GO_METHOD = re.compile(r"\.\(.*\)\.")
_JIT_MAP = re.compile(r"/tmp/perf-\d+\.map")

# Frame kinds: what a frame ran as, for `--no-kernel` and colouring.
USER = "user"
KERNEL = "kernel"
JIT = "jit"
INLINED = "inlined"

_USER_BRACKETS = {"[unknown]", "[vdso]", "[vsyscall]", "[heap]", "[stack]", "[anon]", "[jit]"}


@dataclass(frozen=True, slots=True)
class Frame:
    name: str
    kind: str = USER


@dataclass(slots=True)
class Sample:
    """One sample: who ran, the event and its weight, and the stack from root to leaf."""

    comm: str
    pid: str | None  # None when perf printed only the thread id (its default layout)
    tid: str
    period: int
    event: str | None  # None when the header names no event in the usual place
    frames: tuple[Frame, ...]


@dataclass
class ParseReport:
    """What the parser saw besides samples: enough to tell bad input from odd input."""

    lines: int = 0
    samples: int = 0
    unrecognized: int = 0
    first_unrecognized: str | None = None
    truncated: bool = False  # the input ended inside a sample, which was dropped
    events: dict[str, int] = field(default_factory=dict)  # samples per event name


def _kind(pc: str, mod: str) -> str:
    if mod == "inlined":
        return INLINED
    if mod.endswith("vmlinux") or (mod.startswith("[") and mod not in _USER_BRACKETS):
        return KERNEL
    if mod == "[unknown]" and len(pc) == 16 and pc.startswith("ffff"):
        return KERNEL
    if _JIT_MAP.search(mod):
        return JIT
    return USER


def _parse_frame_line(line: str, java: bool) -> tuple[Frame, ...] | None:
    """The frames of one stack line, root-most first; () for a skipped line, None if no frame."""
    match = _FRAME.match(line)
    if match is None:
        return None
    pc, raw, mod = match.groups()
    raw = _OFFSET.sub("", raw)
    if raw.startswith("("):  # a process name, not a function
        return ()
    kind = _kind(pc, mod)
    frames: list[Frame] = []
    for part in raw.split("->"):
        name = part
        if name == "[unknown]":
            name = "[" + mod.rsplit("/", 1)[-1] + "]" if mod != "[unknown]" else "[unknown]"
        name = name.replace(";", ":")
        if not _GO_METHOD.search(name):
            name = _ARGS.sub("", name)
        name = name.replace('"', "").replace("'", "")
        if java and "/" in name and name.startswith("L"):
            name = name[1:]
        if frames:
            if "_[i]" not in name:
                name += "_[i]"
            frames.append(Frame(name, INLINED))
        else:
            frames.append(Frame(name, kind))
    return tuple(frames)


def parse(lines: Iterable[str], report: ParseReport | None = None) -> Iterator[Sample]:
    """Yield the samples of `perf script` text given as lines (with or without newlines).

    Streaming: memory is bounded by one sample plus the cache of distinct frame lines.
    `report`, when given, is filled as parsing goes.
    """
    report = report if report is not None else ParseReport()
    # distinct frame line -> its frames; Java processes tidy names differently
    caches: dict[bool, dict[str, tuple[Frame, ...] | None]] = {False: {}, True: {}}
    cache = caches[False]
    header: tuple[str, str | None, str, int, str | None] | None = None
    groups: list[tuple[Frame, ...]] = []
    events = report.events
    nlines = 0
    for raw_line in lines:
        nlines += 1
        line = raw_line.rstrip("\n")
        if not line:  # end of a sample; a sample whose frames were all skipped keeps its comm
            if header is not None:
                groups.reverse()
                comm, pid, tid, period, event = header
                report.samples += 1
                if event is not None:
                    events[event] = events.get(event, 0) + 1
                yield Sample(comm, pid, tid, period, event, tuple(f for g in groups for f in g))
            header = None
            groups = []
            continue
        if line[0] == "#":
            continue
        if line[0] not in " \t":
            match = _HEADER.match(line)
            if match is not None:
                header = _parse_header(match, line)
                cache = caches[header[0] == "java"]
                continue
        if header is None:
            if _FRAME.match(line) is None:  # frame lines outside a sample are skipped silently
                _unrecognized(report, line)
            continue
        group = cache.get(line, False)
        if group is False:
            group = cache[line] = _parse_frame_line(line, header[0] == "java")
        if group:
            groups.append(group)
        elif group is None:
            _unrecognized(report, line)
    report.lines += nlines
    if header is not None:
        report.truncated = True


def _parse_header(match: re.Match, line: str) -> tuple[str, str | None, str, int, str | None]:
    comm, pid, tid = match.groups()
    if not tid or tid == "0":  # perf's default layout prints the thread id alone
        pid, tid = None, pid
    period, event = 1, None
    tail = _PERIOD_EVENT.search(line)
    if tail is not None:
        event = tail.group(2)
        if tail.group(1) and int(tail.group(1)):
            period = int(tail.group(1))
    return comm, pid, tid, period, event


def _unrecognized(report: ParseReport, line: str) -> None:
    report.unrecognized += 1
    if report.first_unrecognized is None:
        report.first_unrecognized = line[:200]
