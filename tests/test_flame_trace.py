"""`flamegraph --trace`: instruction traces parsed (QEMU, FireSim TracerV, perf's ip/sym lines)
and unwound into exact stacks, checked against valgrind's callgrind on the bundled calls.c."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

import autoprof.examples as examples
from autoprof.errors import AutoprofError
from autoprof.examples import build_calls
from autoprof.flame.fold import Folded, read_folded
from autoprof.flame.trace import ADDRESSES, QEMU, TRACERV, TraceReport, sniff, steps
from autoprof.flame.unwind import UNKNOWN, load_trace
from autoprof.run import outdir
from autoprof.testing.cli import invoke
from autoprof.testing.synthetic_out import make_out
from tests.callgrind import call_tree, exclusive_ir

DATA = Path(__file__).parent / "data" / "trace"
# QEMU 7.2 (Debian 12) `qemu-x86_64 -singlestep -d exec,nochain` of calls.c: main calls once()
QEMU_LOG = DATA / "qemu-x86_64-7.2-calls.log"
# perf 6.1 `perf script -F ip,sym` (of task-clock samples here: the fields print as for Intel PT)
IP_SYM = DATA / "perf61-task-clock-ip-sym.script"
OWN = ("main", "outer", "inner", "leaf", "once", "fib")  # calls.c's own functions

needs_qemu = pytest.mark.skipif(
    shutil.which("qemu-x86_64") is None, reason="no qemu-x86_64 (apt-get install qemu-user)"
)
needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="no valgrind")
needs_riscv = pytest.mark.skipif(
    shutil.which("qemu-riscv64") is None or shutil.which("riscv64-linux-gnu-gcc") is None,
    reason="no qemu-riscv64 or riscv64-linux-gnu-gcc (apt-get install gcc-riscv64-linux-gnu)",
)


def to_tracerv(qemu_log: Path, out: Path, ipc: int = 2, cycles_per_commit: int = 3) -> None:
    """TracerV format 0 of a QEMU trace, as tracerv.cc prints it (`Cycle: %016 PRId64 I%d:
    %016 PRIx64`): the instructions committed `ipc` at a time, one commit every
    `cycles_per_commit` cycles, after the clock-domain header line TracerV writes first."""
    addresses = [pc for pc, _ in steps(qemu_log.open(), QEMU)]
    with out.open("w") as f:
        f.write("# Clock Domain: baseClock, Relative Frequency: 1/1 of Base Clock\n")
        for i, pc in enumerate(addresses):
            f.write(f"Cycle: {1000 + (i // ipc) * cycles_per_commit:016d} I{i % ipc}: {pc:016x}\n")


def self_counts(folded: Folded) -> Counter[str]:
    """Each leaf function's weight: what it did itself."""
    counts: Counter[str] = Counter()
    for stack, weight in folded.stacks.items():
        counts[stack[-1]] += weight
    return counts


def qemu_trace(binary: Path, out: Path, qemu: str = "qemu-x86_64") -> Path:
    subprocess.run(
        [qemu, "-singlestep", "-d", "exec,nochain", "-D", str(out), str(binary)], check=True
    )
    return out


# -- parsers, on recorded output ----------------------------------------------------------------


def test_qemu_lines_give_the_guest_pc_in_order():
    report = TraceReport()
    found = list(steps(QEMU_LOG.open(), sniff(QEMU_LOG.open()), report))
    assert report.format == QEMU and report.skipped == 0
    assert len(found) == len(QEMU_LOG.read_text().splitlines())
    # once() starts at 0x401668 in this build: its first instructions are 3, 4 and 3 bytes long
    once = [pc for pc, _ in found if 0x401668 <= pc < 0x4016A0]
    assert once[:3] == [0x401668, 0x40166B, 0x40166F]
    assert all(cycles is None for _, cycles in found)


def test_tracerv_weights_each_instruction_by_the_cycles_until_the_next_commit(tmp_path: Path):
    trace = tmp_path / "tracerv-C0"
    to_tracerv(QEMU_LOG, trace, ipc=2, cycles_per_commit=3)
    assert sniff(trace.open()) == TRACERV
    report = TraceReport()
    found = list(steps(trace.open(), TRACERV, report))
    qemu = [pc for pc, _ in steps(QEMU_LOG.open(), QEMU)]
    assert [pc for pc, _ in found] == qemu
    # two per commit: the first of a pair took no cycle, the second the 3 until the next pair
    assert [c for _, c in found[:4]] == [0, 3, 0, 3]
    assert sum(c for _, c in found if c) == 3 * ((len(qemu) - 1) // 2)
    assert report.skipped == 0  # the header is a comment


def test_tracerv_addresses_are_sign_extended_from_bit_39():
    line = "Cycle: 0000000000000042 I0: 000000ffffe00010\n"
    assert list(steps([line, line], TRACERV)) == [(0xFFFFFFFFFFE00010, 0)] * 2


def test_perf_ip_sym_lines_and_plain_cycles():
    found = list(steps(IP_SYM.open(), sniff(IP_SYM.open())))
    assert len(found) == len(IP_SYM.read_text().splitlines())
    assert (0x401620, None) in found and (0xFFFFFFFF81D35179, None) in found
    assert sniff(["0x401136 7\n"]) == ADDRESSES
    assert list(steps(["0x401136 7\n", "401138\n"], ADDRESSES)) == [(0x401136, 7), (0x401138, None)]


def test_not_a_trace_is_one_clear_error(tmp_path: Path):
    with pytest.raises(AutoprofError, match="not an instruction trace"):
        sniff(["hello world\n", "Samples: 10\n"])


# -- unwinding, against callgrind -----------------------------------------------------------------


@pytest.fixture(scope="module")
def calls(tmp_path_factory) -> Path:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    return build_calls(tmp_path_factory.mktemp("calls"))


@pytest.mark.slow
@needs_qemu
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="no valgrind")
def test_instruction_counts_equal_callgrinds_exclusive_ir(calls: Path, tmp_path: Path):
    folded = load_trace(qemu_trace(calls, tmp_path / "qemu.log"), [calls])
    assert folded.event == "instructions" and not folded.notes
    mine = self_counts(folded)
    reference = exclusive_ir([str(calls)], tmp_path / "callgrind.out")
    for name in OWN:
        assert reference[name] > 0
        assert mine[name] == pytest.approx(reference[name], rel=0.01), name
    # once() ran its ~20 instructions once: there, under main, where a 99 Hz sampler sees nothing
    assert 15 <= mine["once"] <= 25
    assert any(s[-2:] == ("main", "once") for s in folded.stacks)
    assert UNKNOWN not in mine  # a static program: every address has a symbol


@pytest.mark.slow
@needs_qemu
def test_stacks_follow_calls_returns_and_recursion(calls: Path, tmp_path: Path):
    folded = load_trace(qemu_trace(calls, tmp_path / "qemu.log"), [calls])
    own = {s[s.index("main") :]: w for s, w in folded.stacks.items() if "main" in s}
    leaf = {s: w for s, w in own.items() if s[-1] == "leaf"}
    assert set(leaf) == {("main", "outer", "leaf"), ("main", "outer", "inner", "leaf")}
    assert leaf[("main", "outer", "leaf")] == 3 * leaf[("main", "outer", "inner", "leaf")]
    fib_depths = {len(s) - 1 for s in own if s[-1] == "fib"}
    assert fib_depths == set(range(1, 13))  # fib(12) is 1 level below main, fib(1) 12 levels
    assert all(f in OWN for s in own for f in s)


@pytest.mark.slow
@needs_qemu
def test_inline_splits_the_inlined_function_out_of_its_caller(calls: Path, tmp_path: Path):
    log = qemu_trace(calls, tmp_path / "qemu.log")
    plain, split = load_trace(log, [calls]), load_trace(log, [calls], inline=True)
    assert split.total == plain.total
    mine, before = self_counts(split), self_counts(plain)
    assert "step" not in before and mine["step"] > 0  # step() is inlined into leaf()
    assert mine["leaf"] + mine["step"] == before["leaf"]
    assert all(s[-2] == "leaf" for s in split.stacks if s[-1] == "step")


@pytest.mark.slow
@needs_qemu
def test_tracerv_and_qemu_traces_of_one_run_agree(calls: Path, tmp_path: Path):
    log = qemu_trace(calls, tmp_path / "qemu.log")
    to_tracerv(log, tmp_path / "tracerv-C0", ipc=1, cycles_per_commit=2)
    by_qemu = load_trace(log, [calls])
    by_tracerv = load_trace(tmp_path / "tracerv-C0", [calls])
    assert by_tracerv.event == "cycles"
    doubled = {s: 2 * w for s, w in by_qemu.stacks.items()}
    differ = {s for s in doubled if doubled[s] != by_tracerv.stacks.get(s)}
    assert len(differ) == 1  # the last instruction's stack: no commit after it, no cycles
    (last,) = differ
    assert by_tracerv.stacks[last] == doubled[last] - 2
    assert set(by_tracerv.stacks) == set(by_qemu.stacks)


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("qemu-riscv64") is None or shutil.which("riscv64-linux-gnu-gcc") is None,
    reason="no qemu-riscv64 or riscv64-linux-gnu-gcc (apt-get install gcc-riscv64-linux-gnu)",
)
def test_riscv_trace_has_the_call_tree_of_the_x86_one(calls: Path, tmp_path: Path):
    riscv = tmp_path / "calls-rv"
    source = Path(examples.__file__).with_name("calls.c")
    subprocess.run(
        ["riscv64-linux-gnu-gcc", "-O1", "-static", "-o", str(riscv), str(source)], check=True
    )
    folded = load_trace(qemu_trace(riscv, tmp_path / "rv.log", "qemu-riscv64"), [riscv])
    x86 = load_trace(qemu_trace(calls, tmp_path / "x86.log"), [calls])

    def shape(f: Folded) -> set[tuple[str, ...]]:
        return {s[s.index("main") :] for s in f.stacks if "main" in s}

    assert shape(folded) == shape(x86)
    assert self_counts(folded)["once"] > 0


@pytest.mark.slow
@pytest.mark.skipif(
    not Path("/sys/bus/event_source/devices/intel_pt").is_dir(),
    reason="no Intel PT on this machine (/sys/bus/event_source/devices/intel_pt)",
)
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="no valgrind")
def test_intel_pt_trace_counts_equal_callgrinds(calls: Path, tmp_path: Path):
    data = tmp_path / "pt.data"
    subprocess.run(
        ["perf", "record", "-q", "-e", "intel_pt//u", "-o", str(data), str(calls)], check=True
    )
    script = tmp_path / "pt.script"
    with script.open("w") as out:
        subprocess.run(
            ["perf", "script", "-i", str(data), "--itrace=i1t", "-F", "ip,sym"],
            stdout=out,
            check=True,
        )
    mine = self_counts(load_trace(script, [calls]))
    reference = exclusive_ir([str(calls)], tmp_path / "callgrind.out")
    for name in OWN:
        assert mine[name] == pytest.approx(reference[name], rel=0.01), name


# -- the call tree, against callgrind's: longjmp, and a jump to a pending return address -------

# longjmp.c: j_deep recurses 5 deep and longjmps to main's setjmp, 20 times; mutual.c: is_even
# and is_odd call each other, and at -O0 each one's n == 0 path jumps to its epilogue, the
# instruction after its own recursive call (a pending return address, no return)
TREES = {"longjmp": ("main", "j_deep", "work"), "mutual": ("main", "is_even", "is_odd")}


def build(program: str, flags: list[str], dest: Path, cc: str = "cc") -> Path:
    if shutil.which(cc) is None:
        pytest.skip(f"no {cc}")
    binary = dest / f"{program}{''.join(flags)}{'' if cc == 'cc' else '-' + cc.split('-')[0]}"
    subprocess.run(
        [cc, *flags, "-g", "-static", "-no-pie", "-o", str(binary), str(DATA / f"{program}.c")],
        check=True,
    )
    return binary


def inclusive(folded: Folded) -> Counter[str]:
    """Each function's weight with its callees': every stack it is on, once."""
    counts: Counter[str] = Counter()
    for stack, weight in folded.stacks.items():
        for name in set(stack[1:]):
            counts[name] += weight
    return counts


def callers(pairs: set[tuple[str, str]], own: tuple[str, ...]) -> set[tuple[str, str]]:
    """The calls into the program's own functions; a caller outside them is `outside` (callgrind
    names main's caller `(below main)`, the symbol table __libc_start_call_main)."""
    return {(a if a in own else "outside", b) for a, b in pairs if b in own}


def stack_pairs(folded: Folded) -> set[tuple[str, str]]:
    return {pair for stack in folded.stacks for pair in itertools.pairwise(stack[1:])}


@pytest.mark.slow
@needs_qemu
@needs_valgrind
@pytest.mark.parametrize(
    "program, flags",
    [
        ("longjmp", ["-O0"]),
        ("longjmp", ["-O2"]),
        ("mutual", ["-O0"]),
        # at -O2 the calls are tail calls (jmp is_odd), which callgrind nests as calls and a
        # stack replaces; without them -O2 keeps its calls: the tree must be callgrind's
        ("mutual", ["-O2", "-fno-optimize-sibling-calls"]),
    ],
)
def test_the_call_tree_is_callgrinds(program: str, flags: list[str], tmp_path: Path):
    """Callers and inclusive instruction counts of each own function equal callgrind's: a
    longjmp unwinds to main's frame (no main nested under __libc_siglongjmp), a jump to the
    instruction after a pending call is no return (no main;is_odd)."""
    binary = build(program, flags, tmp_path)
    own = TREES[program]
    folded = load_trace(qemu_trace(binary, tmp_path / "qemu.log"), [binary])
    assert not folded.notes
    reference, pairs = call_tree([str(binary)], tmp_path / "callgrind.out")
    mine = inclusive(folded)
    assert {f: mine[f] for f in own} == {f: reference[f] for f in own}
    assert callers(stack_pairs(folded), own) == callers(pairs, own)
    assert max(stack.count("main") for stack in folded.stacks) == 1


@pytest.mark.slow
@needs_qemu
@needs_valgrind
def test_a_tail_call_replaces_the_frame_callgrind_nests(tmp_path: Path):
    """Plain -O2: is_even jmps to is_odd. Each function's own count and main's inclusive count
    stay callgrind's; the callee takes the caller's frame, so main calls both."""
    binary = build("mutual", ["-O2"], tmp_path)
    folded = load_trace(qemu_trace(binary, tmp_path / "qemu.log"), [binary])
    reference, _ = call_tree([str(binary)], tmp_path / "callgrind.out")
    own = exclusive_ir([str(binary)], tmp_path / "callgrind-self.out")
    assert {f: self_counts(folded)[f] for f in TREES["mutual"]} == {
        f: own[f] for f in TREES["mutual"]
    }
    assert inclusive(folded)["main"] == reference["main"]
    assert callers(stack_pairs(folded), TREES["mutual"]) == {
        ("outside", "main"),
        ("main", "is_even"),
        ("main", "is_odd"),
    }


@pytest.mark.slow
@needs_qemu
@needs_riscv
@pytest.mark.parametrize("program", ["longjmp", "mutual"])
@pytest.mark.parametrize("level", ["-O0", "-O2"])
def test_riscv_call_trees_are_the_x86_ones(program: str, level: str, tmp_path: Path):
    """The same programs built for RISC-V (jal/jalr ra, ret): the callers of x86-64's tree."""
    flags = [level, "-fno-optimize-sibling-calls"]
    riscv = build(program, flags, tmp_path, "riscv64-linux-gnu-gcc")
    x86 = build(program, flags, tmp_path)
    own = TREES[program]
    trees = [
        load_trace(qemu_trace(b, tmp_path / f"{b.name}.log", qemu), [b])
        for b, qemu in ((riscv, "qemu-riscv64"), (x86, "qemu-x86_64"))
    ]
    assert callers(stack_pairs(trees[0]), own) == callers(stack_pairs(trees[1]), own)
    assert all(max(stack.count("main") for stack in t.stacks) == 1 for t in trees)


@pytest.mark.slow
@needs_qemu
def test_python_looks_at_the_stack_only_where_it_may_change(calls: Path, tmp_path: Path):
    from autoprof.flame.trace import blocks, read_blocks
    from autoprof.flame.unwind import Binary, Unwinder

    log = qemu_trace(calls, tmp_path / "qemu.log")
    unwinder = Unwinder([Binary.load(calls)], calls.name)
    with log.open("rb") as stream:
        folded = unwinder.fold(blocks(read_blocks(stream), QEMU, TraceReport()))
    assert folded.stacks == load_trace(log, [calls]).stacks
    assert unwinder.instructions == folded.total
    assert unwinder.transitions < folded.total / 5


# -- binaries that do not match the trace: one line says what did not, and almost nothing is
# refused ----------------------------------------------------------------------------------------


def test_a_stripped_binary_is_refused(calls: Path, tmp_path: Path):
    if shutil.which("strip") is None:
        pytest.skip("no strip")
    stripped = tmp_path / "calls-stripped"
    subprocess.run(["strip", "-o", str(stripped), str(calls)], check=True)
    with pytest.raises(AutoprofError, match="no function symbols"):
        load_trace(QEMU_LOG, [stripped])
    proc = invoke("flamegraph", "--trace", QEMU_LOG, "--binary", stripped, "--folded")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        f"autoprof: error: --binary {stripped} has no function symbols (stripped?)"
    ]


@pytest.mark.skipif(shutil.which("riscv64-linux-gnu-gcc") is None, reason="no RISC-V gcc")
def test_another_architectures_binary_is_refused(tmp_path: Path):
    riscv = build("mutual", ["-O0"], tmp_path, "riscv64-linux-gnu-gcc")
    refusal = (
        r"only 0\.0% of the trace's 33 instructions fall inside the text of mutual-O0-riscv64 "
        r"\(0x[0-9a-f]+-0x[0-9a-f]+\); the trace ran at 0x401646-0x401723: another program, or "
        r"another architecture's build\?"
    )
    with pytest.raises(AutoprofError, match=refusal):
        load_trace(QEMU_LOG, [riscv])


@pytest.mark.slow
@needs_qemu
def test_a_position_independent_binary_is_refused(tmp_path: Path):
    pie = tmp_path / "calls-pie"
    source = Path(examples.__file__).with_name("calls.c")
    subprocess.run(["cc", "-O1", "-g", "-static-pie", "-o", str(pie), str(source)], check=True)
    log = qemu_trace(pie, tmp_path / "qemu.log")
    with pytest.raises(AutoprofError, match=r"only 0\.0% .* calls-pie is position-independent"):
        load_trace(log, [pie])


@pytest.mark.slow
@needs_qemu
def test_the_wrong_binary_of_the_same_architecture_is_refused(calls: Path, tmp_path: Path):
    other = build("mutual", ["-O0"], tmp_path)
    log = qemu_trace(calls, tmp_path / "qemu.log")
    refusal = (
        r"the code of mutual-O0 does not lead where the trace goes: \d+% of the steps inside "
        r"its text follow no instruction there"
    )
    with pytest.raises(AutoprofError, match=refusal):
        load_trace(log, [other])
    proc = invoke("flamegraph", "--trace", log, "--binary", other, "--folded")
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.slow
@needs_qemu
def test_code_outside_the_given_binaries_is_one_line_with_the_share_inside(tmp_path: Path):
    """A dynamically linked program given alone: its libraries' instructions are [unknown],
    and one note says what share fell inside its text."""
    dynamic = tmp_path / "calls-dynamic"
    source = Path(examples.__file__).with_name("calls.c")
    subprocess.run(["cc", "-O1", "-g", "-no-pie", "-o", str(dynamic), str(source)], check=True)
    folded = load_trace(qemu_trace(dynamic, tmp_path / "qemu.log"), [dynamic])
    (note,) = folded.notes
    assert re.fullmatch(
        r"\d+\.\d% of the [\d,]+ instructions fall inside the text of calls-dynamic; the other "
        r"[\d,]+ ran at 0x[0-9a-f]+-0x[0-9a-f]+ \(code not given with --binary\) and count "
        r"under \[unknown\]",
        note,
    ), note
    assert self_counts(folded)["once"] > 0


# -- the command ---------------------------------------------------------------------------------


@pytest.mark.slow
@needs_qemu
def test_flamegraph_trace_writes_folded_and_svg(calls: Path, tmp_path: Path):
    log = qemu_trace(calls, tmp_path / "qemu.log")
    proc = invoke("flamegraph", "--trace", str(log), "--binary", str(calls), "--folded")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("calls;") and ";main;once " in line for line in lines)
    assert "instructions" in proc.stderr
    svg = tmp_path / "flame.svg"
    proc = invoke("flamegraph", "--trace", str(log), "--binary", str(calls), "-o", str(svg))
    assert proc.returncode == 0, proc.stderr
    assert "once" in svg.read_text()


@pytest.mark.slow
@needs_qemu
def test_a_kept_trace_flame_graph_is_uploaded_with_its_profile(
    calls: Path,
    tmp_path: Path,
    sqlite_url: str,
):
    """--save keeps the stacks in a profile's folder: `upload` stores the functions' exact
    instruction counts, `runs show` gives them back, `flamegraph DIR` draws them again."""
    log = qemu_trace(calls, tmp_path / "qemu.log")
    out = make_out(tmp_path / "out", runs=1, repeats=1, intervals=3)
    proc = invoke("flamegraph", "--trace", log, "--binary", calls, "--save", out / "trace",
                  "-o", tmp_path / "flame.svg")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    direct = self_counts(load_trace(log, [calls]))
    redrawn = invoke("flamegraph", out / "trace", "--folded")
    assert redrawn.returncode == 0, redrawn.stderr
    assert self_counts(read_folded(redrawn.stdout.splitlines())) == direct

    up = invoke("upload", out, "--store", sqlite_url)
    assert up.returncode == 0, up.output
    run_id = outdir.read_manifest(out).id
    shown = json.loads(invoke("runs", "show", run_id, "--json", "--store", sqlite_url).stdout)
    stored = shown["functions"]["trace"]
    assert stored["events"] == ["instructions"]
    assert stored["totals"]["instructions"] == sum(direct.values())
    top = {f["symbol"]: f["instructions"]["period"] for f in stored["functions"]}
    assert top["leaf"] == direct["leaf"] and top["leaf"] == max(direct.values())
    exported = invoke("runs", "export", run_id, "--report", "-o", "-", "--store", sqlite_url)
    rows = {line.split(",")[0]: line for line in exported.stdout.splitlines()}
    assert rows["once"].split(",")[2] == str(direct["once"])  # symbol,dso,instructions,...
    assert invoke("report", out / "trace", "--csv", "-").stdout == exported.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--trace", str(QEMU_LOG)],  # no --binary
        [str(QEMU_LOG), "--save", "kept"],  # --save keeps a trace's graph only
        ["--binary", str(QEMU_LOG)],  # no --trace
        ["--trace", str(QEMU_LOG), "--binary", str(QEMU_LOG)],  # not an ELF
        ["--trace", str(DATA / "missing.log"), "--binary", "/bin/true"],
        ["--trace", str(QEMU_LOG), "--binary", "/bin/true", "--no-kernel"],  # perf input only
    ],
)
def test_bad_trace_arguments_are_one_error_line(args: list[str]):
    proc = invoke("flamegraph", *args)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autoprof: error: "), proc.stderr


@pytest.mark.slow
@needs_qemu
def test_a_trace_of_blocks_not_instructions_gets_a_note(calls: Path, tmp_path: Path):
    log = tmp_path / "blocks.log"
    subprocess.run(["qemu-x86_64", "-d", "exec,nochain", "-D", str(log), str(calls)], check=True)
    folded = load_trace(log, [calls])
    assert any("-singlestep" in note for note in folded.notes)
