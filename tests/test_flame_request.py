"""`FlameRequest`: which inputs and options go together (one line for each refusal, the
command's own), where the graph goes and what the last line says; `flame.diff.change_lines`,
the lines `flamegraph --diff` prints beside its graph. No perf, no CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoprof.errors import AutoprofError
from autoprof.flame.diff import change_lines
from autoprof.flame.fold import Folded
from autoprof.flame.options import FlameOptions
from autoprof.flame.renderer import FoldedRenderer
from autoprof.flame.request import FlameRequest
from autoprof.flame.source import FoldOptions
from autoprof.flame.svg import SvgRenderer

A, B = Path("a.data"), Path("b.data")
TRACE = FlameOptions(trace="qemu.log")


@pytest.mark.parametrize(
    ("request_", "says"),
    [
        (FlameRequest(), "flamegraph takes one input (or --diff A B), got 0"),
        (FlameRequest((A, B)), "flamegraph takes one input (or --diff A B), got 2"),
        (
            FlameRequest((A,), flame=FlameOptions(diff=True)),
            "flamegraph takes two inputs (BEFORE AFTER) with --diff, got 1",
        ),
        (FlameRequest(flame=TRACE), "--trace FILE takes --binary ELF, and no INPUT nor --diff"),
        (
            FlameRequest((A,), (Path("prog"),)),
            "--trace FILE takes --binary ELF, and no INPUT nor --diff",
        ),
        (
            FlameRequest((A,), (Path("prog"),), TRACE),
            "--trace FILE takes --binary ELF, and no INPUT nor --diff",
        ),
        (
            FlameRequest((), (Path("prog"),), FlameOptions(trace="t", diff=True)),
            "--trace FILE takes --binary ELF, and no INPUT nor --diff",
        ),
        (
            FlameRequest((), (Path("prog"),), TRACE, FoldOptions(pid=True)),
            "--trace takes none of the options of perf input (--pid, ...)",
        ),
        (
            FlameRequest((A,), flame=FlameOptions(save="kept")),
            "--save keeps a trace's flame graph: it needs --trace",
        ),
        # a value out of its range is said first, as the declarations say it
        (FlameRequest(flame=FlameOptions(width=10)), "--width 10 is not in the range x>=100"),
    ],
)
def test_what_does_not_go_together_is_one_line(request_, says):
    assert request_.problem() == says
    with pytest.raises(AutoprofError) as caught:
        request_.check()
    assert str(caught.value) == says


def test_each_mode_that_goes_together_passes():
    for good in (
        FlameRequest((A,)),
        FlameRequest((A, B), flame=FlameOptions(diff=True)),
        FlameRequest((), (Path("prog"), Path("libc.so")), TRACE, FoldOptions(inline=True)),
        FlameRequest((), (Path("prog"),), FlameOptions(trace="t", save="kept")),
    ):
        assert good.problem() is None
        assert good.check() is good


def test_where_the_graph_goes_and_what_is_read():
    assert FlameRequest((A,)).output == Path("flame.svg")
    assert FlameRequest((A, B), flame=FlameOptions(diff=True)).output == Path("diff.svg")
    assert FlameRequest((A,), flame=FlameOptions(folded=True)).output == Path("-")
    assert FlameRequest((A,), flame=FlameOptions(output="x.svg")).output == Path("x.svg")
    assert FlameRequest((A, B), flame=FlameOptions(diff=True)).sources == (A, B)
    traced = FlameRequest((), (Path("prog"),), TRACE)
    assert traced.trace == Path("qemu.log") and traced.sources == (Path("qemu.log"),)


def test_the_renderer_and_its_title():
    before = Folded({("p", "f"): 1})
    folded = FlameRequest((A,), flame=FlameOptions(folded=True)).renderer(None)
    assert isinstance(folded, FoldedRenderer) and folded.baseline is None
    svg = FlameRequest((A, B), flame=FlameOptions(diff=True)).renderer(before)
    assert isinstance(svg, SvgRenderer) and svg.title == "Differential Flame Graph"
    assert svg.baseline is before
    titled = FlameRequest((A,), flame=FlameOptions(title="mine", width=800)).renderer(None)
    assert (titled.title, titled.width) == ("mine", 800)
    assert FlameRequest((A,)).speedscope().name == "a.data"


def test_the_last_line_counts_samples_or_a_traces_instructions():
    sampled = Folded({("p", "f"): 3000, ("p", "g"): 1000}, {("p", "f"): 3, ("p", "g"): 1}, "cycles")
    assert FlameRequest((A,)).wrote(sampled) == "wrote flame.svg: 4 samples, 2 stacks, event cycles"
    unknown = Folded({("p", "f"): 1234})  # folded stacks: no sample count, their weights
    assert FlameRequest((A,)).wrote(unknown) == "wrote flame.svg: 1,234 samples, 1 stacks"
    traced = Folded({("p", "f"): 1500}, event="instructions")
    request = FlameRequest((), (Path("prog"),), FlameOptions(trace="t", output="t.svg"))
    assert request.wrote(traced) == "wrote t.svg: 1,500 instructions, 1 stacks"


def test_change_lines_name_what_grew_then_what_shrank():
    before = Folded({("p", "a"): 3, ("p", "b"): 1})
    after = Folded({("p", "a"): 1, ("p", "b"): 3})
    lines = change_lines(before, after)
    assert lines == [
        "  grew  +50.00 pts  b  (25.00% -> 75.00%)",
        "shrank  -50.00 pts  a  (75.00% -> 25.00%)",
    ]
    assert change_lines(before, before) == []
