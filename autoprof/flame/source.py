"""Read any flame-graph input into folded stacks: a `perf.data` (or a `record` folder holding
one), `perf script` text (plain or gzip), or folded stacks. The kind is told by content, not name.

Bad input ends in one AutoprofError line; odd input (unrecognized lines, a truncated file)
becomes notes on the result, shown to the user, and what was read is kept.
"""

from __future__ import annotations

import codecs
import contextlib
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import IO

from autoprof.errors import AutoprofError
from autoprof.flame import kept
from autoprof.flame.fold import Folded, event_notes, fold, read_folded, without_kernel
from autoprof.flame.inline import Addr2line
from autoprof.perf.record import PERF_DATA, PERF_DATA_MAGIC, script_output
from autoprof.perf.script import ParseReport, ScriptOptions, parse
from autoprof.run import outdir
from autoprof.util.declared import Declared, declare

GZIP_MAGIC = b"\x1f\x8b"
_FOLDED = re.compile(r"^\S.* \d+$")
_CHUNK = 1 << 20


@dataclass
class FoldOptions(Declared):
    """How to fold: stackcollapse-perf.pl's options (same names) plus `kernel=False`; each
    field declares its `flamegraph` flag."""

    pid: bool = declare(False, flags=("--pid",), help="Split by process (root frames comm-pid).")
    tid: bool = declare(False, flags=("--tid",), help="Split by thread (root frames comm-pid/tid).")
    kernel: bool = declare(True, flags=("--kernel/--no-kernel",), help="Kernel frames.")
    event: str | None = declare(
        None,
        flags=("--event",),
        help="Event to show when several were sampled (default: the first).",
    )
    annotate_kernel: bool = declare(
        False, flags=("--annotate-kernel",), help="Mark kernel frames with _[k]."
    )
    annotate_jit: bool = declare(
        False, flags=("--annotate-jit",), help="Mark JIT frames (/tmp/perf-PID.map) _[j]."
    )
    annotate_all: bool = declare(False, flags=("--all",), help="Both annotations.")
    addrs: bool = declare(
        False, flags=("--addrs",), help="Raw addresses for frames without a symbol."
    )
    inline: bool = declare(False, flags=("--inline",), help="Inlined frames from addr2line.")
    context: bool = declare(
        False, flags=("--context",), help="With --inline: file:line of each frame."
    )
    srcline: bool = declare(
        False, flags=("--srcline",), help="Input is `perf script -F+srcline`: add lines."
    )
    skip_switches: bool = declare(
        False,
        flags=("--skip-switches",),
        help="Keep perf's context-switch records (PERF_RECORD_SWITCH) out of the samples.",
    )

    def script_options(self) -> ScriptOptions:
        return ScriptOptions(
            event=self.event,
            annotate_kernel=self.annotate_kernel or self.annotate_all,
            annotate_jit=self.annotate_jit or self.annotate_all,
            addrs=self.addrs,
            srcline=self.srcline,
            inline=Addr2line(self.context) if self.inline else None,
            skip_switches=self.skip_switches,
        )


def _lines(chunks: Iterator[str]) -> Iterator[str]:
    """Lines (without newlines) of text given in large chunks: faster than iterating a file."""
    rest = ""
    for chunk in chunks:
        lines = (rest + chunk).split("\n")
        rest = lines.pop()
        yield from lines
    if rest:
        yield rest


def _read_chunks(stream: IO[str]) -> Iterator[str]:
    return iter(lambda: stream.read(_CHUNK), "")


def _gzip_chunks(path: Path, notes: list[str]) -> Iterator[str]:
    """Text of a gzip file, decompressed as it is read; a cut-off or damaged archive yields what
    it holds and leaves a note (Python's gzip module would lose the last buffer)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
    inflate = zlib.decompressobj(wbits=31)
    with path.open("rb") as raw:
        for block in iter(lambda: raw.read(_CHUNK // 8), b""):  # text is ~8x larger
            try:
                data = inflate.decompress(block)
                while inflate.eof and inflate.unused_data:  # concatenated gzip members
                    rest = inflate.unused_data
                    inflate = zlib.decompressobj(wbits=31)
                    data += inflate.decompress(rest)
            except zlib.error as err:
                notes.append(f"compressed data is damaged ({err}); kept what came before")
                break
            yield decoder.decode(data)
        else:
            if not inflate.eof:
                notes.append("compressed data ends early (truncated file); kept what was read")
    yield decoder.decode(b"", final=True)


def _kind(path: Path) -> str:
    with path.open("rb") as f:
        head = f.read(8)
    if head in PERF_DATA_MAGIC:
        return "perf.data"
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    return "text"


def _is_folded(first_lines: list[str]) -> bool:
    body = [line for line in first_lines if line and not line.startswith("#")]
    return bool(body) and all(_FOLDED.match(line) for line in body)


@dataclass
class Input:
    """An opened input: its resolved path, kind, lines and the notes reading it left."""

    path: Path
    kind: str  # "perf.data", "gzip" or "text"
    folded: bool  # the text holds folded stacks, not perf script output
    lines: Iterator[str]
    notes: list[str]


def resolve(path: Path) -> Path:
    """`path` itself, or the perf.data of a `record` folder; one clear error when unreadable."""
    if path.is_dir() and (path / PERF_DATA).is_file():
        path = path / PERF_DATA
    elif path.is_dir() and (path / outdir.MANIFEST).is_file():
        raise AutoprofError(
            f"{path} is a profile folder (autoprof profile: counts, no samples): read it with "
            f"autoprof aggregate {path}, then autoprof analyze stats {path / outdir.RESULTS}; "
            "for functions, sample the command with autoprof record"
        )
    elif path.is_dir():
        raise AutoprofError(
            f"{path} is a folder without {PERF_DATA}: give an autoprof record folder, a "
            "perf.data or perf script text"
        )
    if not path.is_file():
        raise AutoprofError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise AutoprofError(f"{path}: empty file")
    return path


@contextlib.contextmanager
def open_input(path: Path) -> Iterator[Input]:
    """Stream the lines of a perf.data (through `perf script`), of perf script text or of
    folded stacks; perf's own error, if it fails, is raised when the block ends."""
    path = resolve(path)
    notes: list[str] = []
    kind = _kind(path)
    with contextlib.ExitStack() as stack:
        if kind == "perf.data":
            chunks = _read_chunks(stack.enter_context(script_output(path)))
        elif kind == "gzip":
            chunks = _gzip_chunks(path, notes)
        else:
            chunks = _read_chunks(stack.enter_context(path.open(errors="surrogateescape")))
        lines = _lines(chunks)
        head = [line for _, line in zip(range(20), lines, strict=False)]
        folded = kind != "perf.data" and _is_folded(head)
        yield Input(path, kind, folded, chain(head, lines), notes)


def load(path: Path, options: FoldOptions | None = None) -> Folded:
    """The folded stacks of `path` (see the module docstring for what it may be)."""
    options = options or FoldOptions()
    if path.is_dir() and kept.is_kept(path):  # a trace flame graph kept with --save
        folded = load(path / kept.STACKS, options)
        folded.event = kept.read_info(path).event
        return folded
    if options.srcline and _kind(resolve(path)) == "perf.data":
        raise AutoprofError("--srcline reads `perf script -F+srcline` text, not perf.data")
    with open_input(path) as source:
        if source.folded:
            folded, report = _load_folded(source.path, source.lines, options), None
        else:
            report = ParseReport()
            samples = parse(source.lines, report, options.script_options())
            folded = fold(samples, pid=options.pid, tid=options.tid, kernel=options.kernel)
    # checked once perf (if it ran) has exited: its own error comes first
    if report is not None:
        event_notes(folded, report, options.event)
        check_script(source.path, report, source.kind == "perf.data")
        check_stacks(source.path, folded, report)
    folded.notes[:0] = source.notes
    folded.notes.extend(unwinding_notes(folded))
    return folded


def _load_folded(path: Path, lines: Iterator[str], options: FoldOptions) -> Folded:
    asked = {
        "--pid": options.pid,
        "--tid": options.tid,
        "--event": options.event,
        "--annotate-kernel": options.annotate_kernel,
        "--annotate-jit": options.annotate_jit,
        "--all": options.annotate_all,
        "--addrs": options.addrs,
        "--inline": options.inline,
        "--srcline": options.srcline,
    }
    for flag, wanted in asked.items():
        if wanted:
            raise AutoprofError(f"{flag} needs perf input; {path} holds folded stacks")
    folded = read_folded(lines)
    if not folded.stacks:
        raise AutoprofError(f"{path}: no folded stacks in it")
    return folded if options.kernel else without_kernel(folded)


def check_script(path: Path, report: ParseReport, data: bool) -> None:
    """Fail with one line when `path` gave no samples at all."""
    if report.samples == 0:
        if data:
            raise AutoprofError(f"{path}: perf.data holds no samples")
        first = f" (first line: {report.first_unrecognized!r})" if report.first_unrecognized else ""
        raise AutoprofError(f"{path}: not perf script output nor folded stacks{first}")


def check_stacks(path: Path, folded: Folded, report: ParseReport) -> None:
    """Fail when the samples have no stacks; note skipped lines and a truncated input."""
    if all(len(stack) == 1 for stack in folded.stacks):
        raise AutoprofError(
            f"{path}: the samples have no call stacks (record with -g or --call-graph)"
        )
    folded.notes.extend(parse_notes(report))


UNKNOWN = "[unknown]"  # perf's frame for an address it could not name
UNKNOWN_SHARE = 0.25  # the share of the weight in stacks holding one that earns a note


def unwinding_notes(folded: Folded) -> list[str]:
    """What to do when the stacks do not show the program: `[unknown]` frames (frame-pointer
    unwinding lost in code built without frame pointers, such as Python's interpreter, often
    down to perf's 127-frame limit), or a Python program whose own functions are in no
    frame (perf names them only with Python 3.12's perf support)."""
    total = folded.total
    if not total:
        return []
    notes = []
    lost = {s: w for s, w in folded.stacks.items() if UNKNOWN in s[1:]}
    share = sum(lost.values()) / total
    if share >= UNKNOWN_SHARE:
        deepest = max(s.count(UNKNOWN) for s in lost)
        notes.append(
            f"{100 * share:.0f}% of the samples have {UNKNOWN} frames (up to {deepest} in one "
            "stack): perf could not walk code built without frame pointers; record again "
            "with --call-graph dwarf"
        )
    python = [s for s in folded.stacks if s and s[0].lower().startswith("python")]
    if python and not any(f.startswith("py::") for s in python for f in s):
        notes.append(
            "a Python program's own functions are in no stack: on Python 3.12 or later run "
            "it with `python3 -X perf` (or PYTHONPERFSUPPORT=1 in its environment) and record "
            "again, and perf names them (py::function:file.py)"
        )
    return notes


def parse_notes(report: ParseReport) -> list[str]:
    notes = []
    if report.unrecognized:
        notes.append(
            f"{report.unrecognized} lines not understood and skipped"
            f" (first: {report.first_unrecognized!r})"
        )
    if report.truncated:
        notes.append("the input ends inside a sample (truncated?); that sample was dropped")
    return notes
