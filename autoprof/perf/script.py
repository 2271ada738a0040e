"""Parse `perf script` text into samples: one pure, streaming function over lines.

The rules are those of FlameGraph's ``stackcollapse-perf.pl`` (the reference every flame-graph
user compares with), so that folding our samples gives its output byte for byte, for each of its
options (`ScriptOptions`):

- a sample starts with a header line at column 0: ``comm [pid/]tid [cpu] time: [period] event:``
  (perf 3.x prints no period and often ``pid/tid``; perf 4.x-6.x print the period by default);
  the period is the sample's weight, 1 when absent;
- only one event is kept: the one asked for, else the first one met; a header of another event
  is skipped as a whole, and so are frame lines while no kept sample is open (the Perl script's
  state machine: a filtered sample's frames never leak into the next one);
- then one line per frame, leaf first: ``ip symbol[+0xoff] (dso)``; ``+0x..`` offsets are
  dropped, ``[unknown]`` becomes ``[dso basename]`` when the dso is known (``[dso <ip>]`` with
  `addrs`), ``a->b`` (old perf's inline chains) are split with ``_[i]`` on the inlined part, names
  are tidied (``;`` to ``:``, quotes dropped, argument lists after ``(`` cut unless it looks like
  a Go method), Java frames lose their leading ``L``; perf 5.x+ inlined frames are
  ``ip sym (inlined)``; kernel frames get ``_[k]`` and JIT frames ``_[j]`` when asked;
- with `skip_switches`, perf's ``PERF_RECORD_SWITCH`` lines are no sample headers;
- with `srcline`, each frame line is followed by its source line (``perf script -F+srcline``);
- an empty line ends the sample; ``#`` lines are comments (``perf script --header``).

Lines that fit none of these are counted, not fatal; so is a last sample cut short by a
truncated file (it is dropped: its stack lacks its root frames).

Speed: perf repeats the same frame lines over and over, so each distinct line is parsed once and
cached; a sample costs a dictionary lookup per frame plus one regex on its header.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain

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
_NOT_INLINABLE = re.compile(r"(perf-\d+.map|kernel\.|\[[^\]]+\])")  # dsos --inline leaves be
_SRC_BRACKETS = re.compile(r"\[.*?\]")

# Frame kinds: what a frame ran as, for `--no-kernel` and colouring.
USER = "user"
KERNEL = "kernel"
JIT = "jit"
INLINED = "inlined"

_USER_BRACKETS = {"[unknown]", "[vdso]", "[vsyscall]", "[heap]", "[stack]", "[anon]", "[jit]"}

# (ip, symbol with offset, dso) -> the frames addr2line finds there, root first, joined by ";"
# ("" when it knows nothing): stackcollapse-perf.pl's --inline
InlineResolver = Callable[[str, str, str], str]


@dataclass(frozen=True, slots=True)
class Frame:
    name: str
    kind: str = USER
    dso: str = ""


@dataclass(slots=True)
class Sample:
    """One sample: who ran, the event and its weight, and the stack from root to leaf."""

    comm: str
    pid: str | None  # None when perf printed only the thread id (its default layout)
    tid: str
    period: int
    event: str | None  # None when the header names no event in the usual place
    frames: tuple[Frame, ...]


@dataclass(frozen=True)
class ScriptOptions:
    """stackcollapse-perf.pl's options that change how samples are read."""

    event: str | None = None  # keep this event (None: the first one met)
    every_event: bool = False  # keep the samples of all events (per-function reports)
    annotate_kernel: bool = False  # --kernel: `_[k]` on kernel frames
    annotate_jit: bool = False  # --jit: `_[j]` on frames of /tmp/perf-PID.map
    addrs: bool = False  # --addrs: `[dso <ip>]` for frames without a symbol
    srcline: bool = False  # --srcline: a source line follows each frame line
    inline: InlineResolver | None = None  # --inline: addr2line's inlined frames
    # perf's side-band lines (`PERF_RECORD_SWITCH IN`, from --show-switch-events) look like
    # sample headers to the Perl script; skipping them keeps context switches out of the samples
    skip_switches: bool = False


@dataclass
class ParseReport:
    """What the parser saw besides samples: enough to tell bad input from odd input."""

    lines: int = 0
    samples: int = 0
    unrecognized: int = 0
    first_unrecognized: str | None = None
    truncated: bool = False  # the input ended inside a sample, which was dropped
    events: dict[str, int] = field(default_factory=dict)  # sample headers per event name
    event: str | None = None  # the event kept (unless every_event)


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


def _tidy(name: str, java: bool) -> str:
    name = name.replace(";", ":")
    if not _GO_METHOD.search(name):
        name = _ARGS.sub("", name)
    name = name.replace('"', "").replace("'", "")
    if java and "/" in name and name.startswith("L"):
        name = name[1:]
    return name


# One parsed frame line: its frames root-most first, and per frame whether a source line
# follows it in -F+srcline input. () for a skipped line, None if the line is no frame.
_Parsed = tuple[tuple[Frame, ...], tuple[bool, ...]] | None


def _parse_frame_line(line: str, java: bool, opts: ScriptOptions) -> _Parsed:
    match = _FRAME.match(line)
    if match is None:
        return None
    pc, raw, mod = match.groups()
    if opts.inline is not None and not _NOT_INLINABLE.search(mod):
        found = opts.inline(pc, raw, mod)
        if found not in ("", "??", "??:??:0"):
            names = found.split(";")
            return tuple(Frame(n, USER, mod) for n in names), (False,) * len(names)
    raw = _OFFSET.sub("", raw)
    if raw.startswith("("):  # a process name, not a function
        return (), ()
    kind = _kind(pc, mod)
    frames: list[Frame] = []
    sourced: list[bool] = []
    unknown = False  # sticky, as in the Perl script: no source lines after an unknown frame
    for part in raw.split("->"):
        name = part
        if name == "[unknown]":
            unknown = unknown or mod == "[unknown]"
            name = "unknown" if unknown else mod.rsplit("/", 1)[-1]
            name = f"[{name} <{pc}>]" if opts.addrs else f"[{name}]"
        name = _tidy(name, java)
        if frames:
            if "_[i]" not in name:
                name += "_[i]"
            frames.append(Frame(name, INLINED, mod))
        else:
            if opts.annotate_kernel and _is_kernel_dso(mod):
                name += "_[k]"
            elif opts.annotate_jit and _JIT_MAP.search(mod) and "_[j]" not in name:
                name += "_[j]"
            frames.append(Frame(name, kind, mod))
        sourced.append(opts.srcline and not unknown)
    return tuple(frames), tuple(sourced)


def _is_kernel_dso(mod: str) -> bool:
    """stackcollapse-perf.pl's kernel test for `_[k]` (wider than `_kind`: `[vdso]` counts)."""
    return (mod.startswith("[") or mod.endswith("vmlinux")) and "unknown" not in mod


def _with_source(
    frames: tuple[Frame, ...], sourced: tuple[bool, ...], lines: Iterator[str]
) -> tuple[Frame, ...]:
    """Frames of a -F+srcline frame line, suffixed with the source lines that follow it."""
    out = []
    for frame, has_source in zip(frames, sourced, strict=True):
        if not has_source:
            out.append(frame)
            continue
        src = _SRC_BRACKETS.sub("", next(lines, "").rstrip("\n")).strip()
        out.append(Frame(f"{frame.name}:{src}", frame.kind, frame.dso) if src else frame)
    return tuple(out)


def parse(
    lines: Iterable[str],
    report: ParseReport | None = None,
    options: ScriptOptions | None = None,
) -> Iterator[Sample]:
    """Yield the kept samples of `perf script` text given as lines (with or without newlines).

    Streaming: memory is bounded by one sample plus the cache of distinct frame lines.
    `report`, when given, is filled as parsing goes.
    """
    report = report if report is not None else ParseReport()
    opts = options or ScriptOptions()
    # distinct frame line -> its frames; Java processes tidy names differently
    caches: dict[bool, dict[str, _Parsed]] = {False: {}, True: {}}
    cache = caches[False]
    header: tuple[str, str | None, str, int, str | None] | None = None
    groups: list[tuple[Frame, ...]] = []
    events = report.events
    wanted, every, skip_switches = opts.event, opts.every_event, opts.skip_switches
    srcline = opts.srcline
    it = iter(lines)
    nlines = 0
    for raw_line in it:
        nlines += 1
        line = raw_line.rstrip("\n")
        if not line:  # end of a sample; a sample whose frames were all skipped keeps its comm
            if header is not None:
                groups.reverse()
                comm, pid, tid, period, event = header
                report.samples += 1
                yield Sample(comm, pid, tid, period, event, tuple(chain.from_iterable(groups)))
            header = None
            groups = []
            continue
        if line[0] == "#":
            continue
        if line[0] not in " \t":
            match = _HEADER.match(line)
            if match is not None:
                if skip_switches and "PERF_RECORD_" in line:
                    continue
                parsed = _parse_header(match, line)
                event = parsed[4]
                if event is not None:
                    events[event] = events.get(event, 0) + 1
                    if wanted is None:
                        wanted = report.event = event
                    elif event != wanted and not every:
                        continue
                header = parsed
                cache = caches[header[0] == "java"]
                continue
        if header is None:
            if _FRAME.match(line) is None:  # frame lines outside a sample are skipped silently
                _unrecognized(report, line)
            continue
        if line not in cache:
            cache[line] = _parse_frame_line(line, header[0] == "java", opts)
        found = cache[line]
        if found is None:
            _unrecognized(report, line)
            continue
        group, sourced = found
        if srcline and any(sourced):
            nlines += sum(sourced)
            group = _with_source(group, sourced, it)
        if group:
            groups.append(group)
    report.lines += nlines
    if report.event is None:
        report.event = wanted
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
