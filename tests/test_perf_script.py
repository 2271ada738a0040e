"""`perf script` parsing and folding, against stackcollapse-perf.pl's own output and real perf
output recorded on this machine (tests/data, perf 6.1) and the perf 3.13 example."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from autoprof.errors import AutoprofError
from autoprof.flame.fold import event_notes, fold, folded_lines, read_folded
from autoprof.perf.script import INLINED, KERNEL, ParseReport, ScriptOptions, parse

DATA = Path(__file__).parent / "data"
INLINE = DATA / "perf61-dwarf-inline.script"  # perf record -F 499 --call-graph dwarf -e cpu-clock
TWO_EVENTS = DATA / "perf61-dd-two-events.script"  # -g -e cpu-clock -e page-faults of dd


def lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", errors="surrogateescape") as f:
        return f.read().splitlines()


@pytest.mark.parametrize(
    ("name", "folded"),
    [
        ("example-perf-stacks.txt.gz", "example-perf-stacks.folded.gz"),
        ("perf61-fib.script", "perf61-fib.folded"),
    ],
    ids=["perf3.13", "perf6.1"],
)
def test_folding_matches_stackcollapse_perf(samples_dir: Path, name: str, folded: str):
    expected = lines(samples_dir / folded)
    got = "".join(folded_lines(fold(parse(lines(samples_dir / name)))))
    assert got.splitlines() == expected


def test_period_weights_and_sample_counts():
    text = lines(INLINE)
    periods = [int(m.group(1)) for line in text if (m := re.search(r":\s+(\d+) cpu-clock:", line))]
    folded = fold(parse(text))
    assert folded.event == "cpu-clock"
    assert folded.total == sum(periods)
    assert folded.sample_count == len(periods)


def test_inlined_frames_are_frames_of_their_own():
    samples = list(parse(lines(INLINE)))
    stacks = {tuple(f.name for f in s.frames) for s in samples}
    # perf 6.1 prints `1168 inl+0x2f (inlined)` above `1168 work_a+0x2f (/tmp/fl/w)`
    assert any(stack[-2:] == ("work_a", "inl") for stack in stacks)
    kinds = {f.name: f.kind for s in samples for f in s.frames}
    assert kinds["inl"] == INLINED


def test_perf3_header_with_pid_and_cpu():
    text = [
        "java 24636/25607 [000] 4794564.109216: cycles: ",
        "\t    7f183b22aec7 Lorg/mozilla/Foo;.call(Lorg/Bar;)V (/tmp/perf-24636.map)",
        "\t    7f183b15aec5 __libc_start_main+0x15 (/lib/x86_64-linux-gnu/libc-2.19.so)",
        "",
    ]
    (sample,) = parse(text)
    assert (sample.comm, sample.pid, sample.tid, sample.period) == ("java", "24636", "25607", 1)
    assert [f.name for f in sample.frames] == ["__libc_start_main", "org/mozilla/Foo:.call"]
    assert sample.frames[1].kind == "jit"
    assert fold([sample], tid=True).stacks == {
        ("java-24636/25607", "__libc_start_main", "org/mozilla/Foo:.call"): 1
    }


def test_unknown_symbols_old_inline_chains_and_go_methods():
    text = [
        "prog 7 1.0: 5 cpu-clock: ",
        "\t  1 [unknown] (/usr/lib/libfoo.so.1)",
        "\t  2 a->b (/bin/prog)",
        "\t  3 net/http.(*Client).Do+0x10 (/bin/prog)",
        "\t  4 [unknown] ([unknown])",
        "",
    ]
    (sample,) = parse(text)
    names = [f.name for f in sample.frames]
    assert names == ["[unknown]", "net/http.(*Client).Do", "a", "b_[i]", "[libfoo.so.1]"]


def test_kernel_frames_dropped_on_request_totals_kept():
    text = lines(TWO_EVENTS)
    with_kernel = fold(parse(text))
    user_only = fold(parse(text), kernel=False)
    kinds = {f.name: f.kind for s in parse(text) for f in s.frames}
    assert any(kinds[name] == KERNEL for stack in with_kernel.stacks for name in stack[1:])
    assert not any(kinds[name] == KERNEL for stack in user_only.stacks for name in stack[1:])
    assert user_only.total == with_kernel.total


def test_first_event_by_default_others_on_request():
    text = lines(TWO_EVENTS)
    headers = [line for line in text if line and not line[0].isspace()]
    first, other = ("cpu-clock", "page-faults")[:: 1 if "cpu-clock" in headers[0] else -1]
    report = ParseReport()
    default = fold(parse(text, report))  # stackcollapse-perf.pl keeps the first event it meets
    event_notes(default, report, None)
    assert default.event == report.event == first
    assert default.sample_count == sum(f"{first}:" in h for h in headers)
    assert any(other in note for note in default.notes)
    chosen = fold(parse(text, options=ScriptOptions(event=other)))
    assert chosen.sample_count == sum(f"{other}:" in h for h in headers)
    with pytest.raises(AutoprofError, match="no samples of event 'cycles'"):
        event_notes(chosen, report, "cycles")


def test_truncated_input_drops_the_cut_sample_and_says_so():
    text = lines(INLINE)
    cut = len(text) - 3  # inside the last sample
    report = ParseReport()
    samples = list(parse(text[:cut], report))
    assert report.truncated
    assert len(samples) == len(list(parse(text))) - 1


def test_unrecognized_lines_are_counted():
    report = ParseReport()
    assert list(parse(["hello world", "this is not perf"], report)) == []
    assert report.unrecognized == 2
    assert report.first_unrecognized == "hello world"


def test_folded_text_reads_back(samples_dir: Path):
    text = (samples_dir / "perf61-fib.folded").read_text()
    assert "".join(folded_lines(read_folded(text.splitlines()))) == text


def test_one_letter_comm():
    # stackcollapse-perf.pl names this process "w_17378__1297.526728:"; the comm is "w"
    (sample,) = parse(["w 17378  1297.526728:    2004008 cpu-clock: ", "\t 1 main (/w)", ""])
    assert (sample.comm, sample.tid, sample.period) == ("w", "17378", 2004008)
