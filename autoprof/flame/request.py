"""One flame graph as `autoprof flamegraph` asks for it (`FlameRequest`): of one input, of two
(--diff BEFORE AFTER) or of an instruction trace (--trace with its --binary programs); how to
fold it and how to draw it. Its `problem` says, in one line, what does not go together, as
`run.request.Request` does for a measurement; the command only builds one and calls it.

Imports only the declarations at its top (the command module reads it for --help); the
unwinder, the renderers and the writers of --save are imported by the methods that use them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from autoprof.flame.options import FlameOptions
from autoprof.flame.source import FoldOptions
from autoprof.util.declared import Checked

if TYPE_CHECKING:
    from autoprof.flame.fold import Folded
    from autoprof.flame.renderer import FlameRenderer


@dataclass(frozen=True)
class FlameRequest(Checked):
    """What to draw, from what, and how."""

    inputs: tuple[Path, ...] = ()  # a perf.data, a `record` folder, script text, folded stacks
    binaries: tuple[Path, ...] = ()  # --trace: the traced program, then its libraries
    flame: FlameOptions = field(default_factory=FlameOptions)
    fold: FoldOptions = field(default_factory=FoldOptions)

    @property
    def trace(self) -> Path | None:
        return Path(self.flame.trace) if self.flame.trace is not None else None

    def problem(self) -> str | None:
        """What is wrong with this request, in one line (None when nothing is): a value out of
        its range, then inputs and options that do not go together."""
        found = self.flame.problem() or self.fold.problem()
        if found:
            return found
        if self.trace is not None or self.binaries:
            if self.trace is None or not self.binaries or self.inputs or self.flame.diff:
                return "--trace FILE takes --binary ELF, and no INPUT nor --diff"
            if self.fold != FoldOptions(inline=self.fold.inline):
                return "--trace takes none of the options of perf input (--pid, ...)"
            return None
        if self.flame.save is not None:
            return "--save keeps a trace's flame graph: it needs --trace"
        if len(self.inputs) != (2 if self.flame.diff else 1):
            diff = self.flame.diff
            want = "two inputs (BEFORE AFTER) with --diff" if diff else "one input (or --diff A B)"
            return f"flamegraph takes {want}, got {len(self.inputs)}"
        return None

    @property
    def sources(self) -> tuple[Path, ...]:
        """The files read, in order: the trace, or the inputs (BEFORE first)."""
        return (self.trace,) if self.trace is not None else self.inputs

    def load(self, path: Path) -> Folded:
        """The folded stacks of `path`, one of `sources`; its notes say what was odd in it."""
        if self.trace is not None:
            from autoprof.flame.unwind import load_trace

            return load_trace(path, list(self.binaries), self.fold.inline)
        from autoprof.flame.source import load

        return load(path, self.fold)

    def save(self, folded: Folded) -> None:
        """--save: the trace's folded stacks kept in the folder it names."""
        from autoprof.flame import kept

        assert self.flame.save is not None and self.trace is not None
        kept.save(Path(self.flame.save), folded, self.trace, list(self.binaries), self.fold.inline)

    @property
    def output(self) -> Path:
        """Where the graph goes: -o, else standard output for --folded, else an SVG file."""
        default = "-" if self.flame.folded else "diff.svg" if self.flame.diff else "flame.svg"
        return Path(self.flame.output or default)

    def renderer(self, before: Folded | None) -> FlameRenderer:
        """The graph's renderer: folded stacks or SVG, differential against `before`."""
        from autoprof.flame.renderer import FoldedRenderer
        from autoprof.flame.svg import SvgRenderer

        flame = self.flame
        if flame.folded:
            return FoldedRenderer(before)
        title = flame.title or ("Differential Flame Graph" if flame.diff else "Flame Graph")
        return SvgRenderer(title, flame.width, flame.minwidth, flame.inverted, before)

    def speedscope(self) -> FlameRenderer:
        """--speedscope's renderer, its profile named by --title or the last source."""
        from autoprof.flame.speedscope import SpeedscopeRenderer

        return SpeedscopeRenderer(self.flame.title or self.sources[-1].name)

    def wrote(self, after: Folded) -> str:
        """The line that says what was drawn: a trace's every instruction (weighted by its
        cycles when the trace has them), or the samples."""
        if self.trace is not None:
            counted = f"{after.total:,} {after.event}"
        else:
            samples = after.sample_count
            counted = f"{samples if samples is not None else after.total:,} samples"
        event = f", event {after.event}" if after.event and self.trace is None else ""
        return f"wrote {self.output}: {counted}, {len(after.stacks):,} stacks{event}"
