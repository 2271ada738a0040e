"""`autoprof flamegraph` on files: outputs, options, and one clear line for bad input."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from autoprof.testing.cli import invoke, one_error_line
from tests.conftest import SAMPLES

DATA = Path(__file__).parent / "data"
INLINE = DATA / "perf61-dwarf-inline.script"
TWO_EVENTS = DATA / "perf61-dd-two-events.script"


def test_folded_output_of_gzip_input_matches_stackcollapse(samples_dir: Path):
    proc = invoke("flamegraph", str(samples_dir / "example-perf-stacks.txt.gz"), "--folded")
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stdout
        == gzip.decompress((samples_dir / "example-perf-stacks.folded.gz").read_bytes()).decode()
    )


def test_svg_and_speedscope(tmp_path: Path):
    svg, ss = tmp_path / "f.svg", tmp_path / "f.json"
    proc = invoke(
        "flamegraph", str(INLINE), "-o", str(svg), "--speedscope", str(ss),
        "--title", "a <title> & more", "--width", "800", "--inverted",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = svg.read_text()
    assert 'width="800"' in text and "a &lt;title&gt; &amp; more" in text
    root = re.search(r'data-n="all"[^>]*><title>[^<]*</title><rect x="[\d.]+" y="(\d+)"', text)
    work = re.search(r'data-n="work_a"[^>]*><title>[^<]*</title><rect x="[\d.]+" y="(\d+)"', text)
    assert int(root.group(1)) < int(work.group(1))  # icicle: the root is on top
    document = json.loads(ss.read_text())
    assert document["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    profiles = {p["name"]: p for p in document["profiles"]}  # one per process name
    assert all(p["unit"] == "nanoseconds" for p in profiles.values())
    periods = re.findall(r"^(\S+) \S+\s+[\d.]+:\s+(\d+) cpu-clock:", INLINE.read_text(), re.M)
    for comm in {c for c, _ in periods}:
        weight = sum(int(p) for c, p in periods if c == comm)
        assert sum(profiles[comm]["weights"]) == profiles[comm]["endValue"] == weight
    names = {f["name"] for f in document["shared"]["frames"]}
    assert {"main", "work_a", "inl"} <= names


def test_minwidth_drops_narrow_frames(tmp_path: Path):
    counts = {}
    for minwidth in ("0.1", "30%"):
        out = tmp_path / f"{minwidth}.svg"
        assert (
            invoke("flamegraph", str(TWO_EVENTS), "--minwidth", minwidth, "-o", str(out)).returncode
            == 0
        )
        counts[minwidth] = out.read_text().count('<g class="f"')
    assert 0 < counts["30%"] < counts["0.1"]


def test_pid_tid_and_event_options():
    proc = invoke("flamegraph", str(TWO_EVENTS), "--folded", "--tid", "--event", "page-faults")
    assert proc.returncode == 0, proc.stderr
    header = next(line for line in TWO_EVENTS.read_text().splitlines() if "page-faults" in line)
    pid, tid = re.match(r"dd (\d+)/(\d+) ", header).groups()
    assert all(line.startswith(f"dd-{pid}/{tid};") for line in proc.stdout.splitlines())
    total = sum(int(line.rsplit(" ", 1)[1]) for line in proc.stdout.splitlines())
    periods = re.findall(r":\s+(\d+) page-faults:", TWO_EVENTS.read_text())
    assert total == sum(int(p) for p in periods)


def test_no_kernel_on_perf_input():
    with_kernel = invoke("flamegraph", str(TWO_EVENTS), "--folded").stdout
    without = invoke("flamegraph", str(TWO_EVENTS), "--folded", "--no-kernel").stdout
    assert "do_syscall_64" in with_kernel and "do_syscall_64" not in without


def test_truncated_gzip_keeps_what_was_read(tmp_path: Path):
    cut = tmp_path / "cut.script.gz"
    whole = gzip.compress(INLINE.read_bytes())
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    proc = invoke("flamegraph", str(cut), "--folded")
    assert proc.returncode == 0, proc.stderr
    assert "note:" in proc.stderr and proc.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"hello world\nthis is not perf\n", "not perf script output"),
        (b"PERFILE2" + bytes(range(256)) * 4, "perf script cannot read"),
    ],
    ids=["empty", "not-perf", "bad-perf.data"],
)
def test_bad_input_is_one_clear_line(tmp_path: Path, content: bytes, message: str):
    path = tmp_path / "input"
    path.write_bytes(content)
    if content.startswith(b"PERFILE2") and not Path("/usr/bin/perf").exists():
        pytest.skip("perf is needed to read a perf.data")
    assert message in one_error_line(invoke("flamegraph", str(path), "-o", str(tmp_path / "o")))
    assert not (tmp_path / "o").exists()


def test_wrong_number_of_inputs_and_options_for_folded(samples_dir: Path):
    assert "two inputs" in one_error_line(invoke("flamegraph", "--diff", str(INLINE)))
    folded = str(samples_dir / "perf61-fib.folded")
    assert "--pid needs perf input" in one_error_line(invoke("flamegraph", folded, "--pid"))


def test_every_declared_option_is_a_flag_and_checked_as_declared(tmp_path: Path):
    from autoprof.flame.options import FlameOptions
    from autoprof.flame.source import FoldOptions
    from autoprof.util.declared import option_fields

    help_text = invoke("flamegraph", "--help").stdout
    for cls in (FlameOptions, FoldOptions):
        for _, option in option_fields(cls):
            assert option.flags[-1].split("/")[0] in help_text
    proc = invoke("flamegraph", str(INLINE), "--width", "50", "-o", str(tmp_path / "f.svg"))
    assert one_error_line(proc) == "autoprof: error: --width 50 is not in the range x>=100"
    assert not (tmp_path / "f.svg").exists()


def test_report_of_a_profile_folder_says_what_reads_it(tmp_path: Path):
    """`report out` of a profile folder said "out: no such file" (#41): it holds counts, no
    samples; the line names the commands that read it."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text("{}")
    one_error_line(invoke("report", out), "is a profile folder", f"autoprof aggregate {out}")
    one_error_line(invoke("flamegraph", out), "is a profile folder")
    one_error_line(invoke("report", tmp_path), "is a folder without perf.data")


def test_a_sampling_rate_above_the_kernels_limit_is_refused(tmp_path: Path):
    """`record -F 99999999999` was accepted, and perf sampled at the kernel's limit (#41)."""
    limit = int(Path("/proc/sys/kernel/perf_event_max_sample_rate").read_text())
    line = one_error_line(
        invoke("record", "-F", str(limit + 1), "-o", tmp_path / "r", "--", "true")
    )
    assert f"above this kernel's limit of {limit} samples a second" in line
    assert not (tmp_path / "r").exists()
    one_error_line(invoke("record", "-F", "0", "--", "true"), "-F")


def test_stacks_that_lose_the_program_say_what_to_record_instead():
    """Issue #41: a Python program's flame graph showed `[unknown]` stacks (128 deep on some
    machines) and no hint. A real recording of CPython 3.11 here, then the deep case."""
    from autoprof.flame.fold import read_folded
    from autoprof.flame.source import unwinding_notes

    real = read_folded((SAMPLES / "python311-fp.folded").read_text().splitlines())
    lost, python = unwinding_notes(real)
    assert lost.startswith("27% of the samples have [unknown] frames (up to 2 in one stack)")
    assert "--call-graph dwarf" in lost
    assert "python3 -X perf" in python and "3.12" in python
    deep = read_folded([f"myprog;main;{';'.join(['[unknown]'] * 127)} 90", "myprog;main;f 10"])
    [note] = unwinding_notes(deep)
    assert note.startswith("90% of the samples have [unknown] frames (up to 127 in one stack)")
    named = read_folded(["python3;_PyEval_EvalFrameDefault;py::work:/w.py 5", "python3;main 5"])
    assert unwinding_notes(named) == []
    fine = read_folded((SAMPLES / "perf61-fib.folded").read_text().splitlines())
    assert unwinding_notes(fine) == []


def test_flamegraph_gives_the_hint_for_a_python_recording(tmp_path):
    run = invoke("flamegraph", SAMPLES / "python311-fp.folded", "-o", tmp_path / "f.svg")
    assert run.returncode == 0, run.output
    assert "python3 -X perf" in run.stderr and "--call-graph dwarf" in run.stderr


@pytest.mark.needs_perf
def test_record_of_a_missing_command_says_it_once(cli_run, tmp_path):
    line = one_error_line(cli_run("record", "-o", tmp_path / "rec", "--", "nosuchprog"))
    assert line == "autoprof: error: command not found: nosuchprog"
