"""stackcollapse-perf.pl's options (annotations, raw addresses, inlined frames, source lines,
event filter) give its output byte for byte, on perf 6.1 output recorded here.

The expected outputs in tests/data/flame-options/expected were made by the Perl script itself
(regen.sh); the `live` tests run it when FlameGraph's source is at $FLAMEGRAPH_DIR (or
stackcollapse-perf.pl is on PATH) and skip otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from autoprof.flame.fold import folded_lines
from autoprof.flame.source import FoldOptions, load
from autoprof.perf.script import ParseReport, ScriptOptions, parse

DATA = Path(__file__).parent / "data" / "flame-options"
EXAMPLES = Path(__file__).parents[1] / "autoprof" / "examples"
CASES = [(w[0], w[1], w[2:]) for w in map(str.split, (DATA / "cases.txt").read_text().splitlines())]
PERL_TO_OURS = {
    "--all": ("annotate_kernel", "annotate_jit"),
    "--kernel": ("annotate_kernel",),
    "--jit": ("annotate_jit",),
    "--addrs": ("addrs",),
    "--tid": ("tid",),
    "--pid": ("pid",),
    "--srcline": ("srcline",),
    "--inline": ("inline",),
    "--context": ("context",),
}


def fold_options(perl_opts: list[str]) -> FoldOptions:
    options = FoldOptions()
    for opt in perl_opts:
        if opt.startswith("--event-filter="):
            options.event = opt.split("=", 1)[1]
            continue
        for name in PERL_TO_OURS[opt]:
            setattr(options, name, True)
    return options


def folded_text(path: Path, options: FoldOptions) -> str:
    return "".join(folded_lines(load(path, options)))


def stackcollapse() -> list[str]:
    home = os.environ.get("FLAMEGRAPH_DIR")
    script = Path(home) / "stackcollapse-perf.pl" if home else None
    if script is None or not script.is_file():
        found = shutil.which("stackcollapse-perf.pl")
        script = Path(found) if found else None
    if script is None or shutil.which("perl") is None:
        pytest.skip("FlameGraph's stackcollapse-perf.pl not found (set FLAMEGRAPH_DIR)")
    return ["perl", str(script)]


def perl_fold(path: Path, perl_opts: list[str]) -> str:
    done = subprocess.run(
        [*stackcollapse(), *perl_opts, str(path)], capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.mark.parametrize("name,script,perl_opts", CASES, ids=[c[0] for c in CASES])
def test_equals_stored_stackcollapse_output(name: str, script: str, perl_opts: list[str]):
    expected = (DATA / "expected" / f"{name}.folded").read_text()
    assert folded_text(DATA / script, fold_options(perl_opts)) == expected


@pytest.mark.parametrize("name,script,perl_opts", CASES, ids=[c[0] for c in CASES])
def test_equals_live_stackcollapse(name: str, script: str, perl_opts: list[str]):
    assert folded_text(DATA / script, fold_options(perl_opts)) == perl_fold(
        DATA / script, perl_opts
    )


@pytest.mark.parametrize("opts", [["--jit"], ["--all"], ["--addrs"], ["--all", "--pid"]])
def test_java_example_live(samples_dir: Path, tmp_path: Path, opts: list[str]):
    plain = tmp_path / "example.script"
    plain.write_bytes(
        subprocess.run(
            ["gzip", "-dc", str(samples_dir / "example-perf-stacks.txt.gz")],
            capture_output=True,
            check=True,
        ).stdout
    )
    ours = folded_text(plain, fold_options(opts))
    if "--jit" in opts:
        assert "_[j]" in ours
    assert ours == perl_fold(plain, opts)


def test_options_change_the_output():
    """The stored cases exercise each option (a case equal to the plain one would prove little)."""
    fp = DATA / "perf61-hotspots-fp.script"
    plain = folded_text(fp, fold_options(["--event-filter=cpu-clock"]))
    assert "_[k]" in folded_text(fp, fold_options(["--event-filter=cpu-clock", "--kernel"]))
    assert "[unknown <" in folded_text(fp, fold_options(["--addrs"]))
    assert "[unknown <" not in plain + folded_text(fp, fold_options([]))
    src = folded_text(
        DATA / "perf61-hotspots-srcline.script",
        fold_options(["--srcline", "--event-filter=cpu-clock"]),
    )
    assert "heavy:hotspots.c:" in src


def test_filtered_event_does_not_leak_into_the_next_sample():
    # the example: bb's frame g belongs to a filtered-out event
    text = ["aa 1 1.0: 1 instructions:", "\t1 f (x)", ""]
    text += ["bb 2 2.0: 1 cycles:", "\t2 g (x)", "cc 3 3.0: 1 instructions:", "\t3 h (x)", ""]
    stacks = [(s.comm, *(f.name for f in s.frames)) for s in parse(text)]
    assert stacks == [("aa", "f"), ("cc", "h")]


def test_skip_switches_keeps_context_switch_records_out():
    """perf's PERF_RECORD_SWITCH lines look like sample headers: under the Perl rules a filtered
    sample's frames that follow one are counted as a sample of weight 1."""
    path = DATA / "perf61-hotspots-switches.script"
    headers = [line for line in path.read_text().splitlines() if line and line[0] != "\t"]
    faults = sum(int(h.split()[-2]) for h in headers if h.rstrip().endswith("page-faults:"))
    perl_rules = load(path, FoldOptions(event="page-faults"))
    skipped = load(path, FoldOptions(event="page-faults", skip_switches=True))
    assert perl_rules.total > faults  # leaked cpu-clock stacks
    assert skipped.total == faults
    report = ParseReport()
    list(parse(path.read_text().splitlines(), report, ScriptOptions(skip_switches=True)))
    assert not report.truncated and report.unrecognized == 0


@pytest.mark.slow
def test_inline_and_context_live(tmp_path: Path):
    """--inline asks addr2line about each frame of the binary: record one built here."""
    perl = stackcollapse()
    for tool in ("perf", "cc", "addr2line", "nm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found")
    binary = tmp_path / "hotspots"
    cc = ["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", str(binary)]
    subprocess.run([*cc, str(EXAMPLES / "hotspots.c")], check=True)
    data = tmp_path / "perf.data"
    subprocess.run(
        ["perf", "record", "-q", "-g", "-F", "499", "-e", "cpu-clock", "-o", str(data),
         str(binary), "6"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    script = tmp_path / "out.script"
    script.write_bytes(
        subprocess.run(
            ["perf", "script", "-F", "+pid", "-i", str(data)], capture_output=True, check=True
        ).stdout
    )
    for opts in (["--inline"], ["--inline", "--context"]):
        ours = folded_text(script, fold_options(opts))
        done = subprocess.run([*perl, *opts, str(script)], capture_output=True, text=True)
        assert ours == done.stdout
    assert "hotspots.c:" in ours  # --context found source lines through addr2line
