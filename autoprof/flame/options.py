"""How `autoprof flamegraph` draws (`FlameOptions`): which input, which outputs, the graph's
look. Each field declares its flag once (autoprof.util.declared), as FoldOptions (how to fold)
does."""

from __future__ import annotations

from dataclasses import dataclass

from autoprof.util.declared import Declared, declare


@dataclass(frozen=True)
class FlameOptions(Declared):
    """The flamegraph command's outputs and drawing; the folding is `source.FoldOptions`."""

    output: str | None = declare(
        None, flags=("-o", "--output"), help="Output file ('-' for stdout)."
    )
    folded: bool = declare(
        False, flags=("--folded",), help="Write folded stacks (FlameGraph's format), not SVG."
    )
    speedscope: str | None = declare(
        None, flags=("--speedscope",), help="Also write speedscope's JSON format to this file."
    )
    diff: bool = declare(
        False, flags=("--diff",), help="INPUTS are BEFORE AFTER: a differential graph."
    )
    trace: str | None = declare(
        None,
        flags=("--trace",),
        metavar="FILE",
        help="Exact graph of an instruction trace (QEMU -d exec, FireSim TracerV, Intel PT "
        "`perf script --itrace=i1t -F ip,sym`), not of samples: needs --binary.",
    )
    save: str | None = declare(
        None,
        flags=("--save",),
        metavar="DIR",
        help="With --trace: keep the folded stacks in DIR; inside a profile's folder, `upload` "
        "stores its functions with the profile.",
    )
    title: str | None = declare(None, flags=("--title",), help="Title of the graph.")
    width: int = declare(1200, flags=("--width",), low=100, help="Width in pixels.")
    minwidth: str = declare(
        "0.1",
        flags=("--minwidth",),
        help="Omit frames narrower than this: pixels, or a percentage such as 0.5%.",
    )
    inverted: bool = declare(False, flags=("--inverted",), help="Icicle graph: roots at the top.")
