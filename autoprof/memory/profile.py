"""`autoprof memory`: run a program under valgrind's massif and keep what it says.

Layout of the output folder::

    OUT/massif.out     massif's own file for the command's process (kept even when the
                       program crashed); valgrind follows it through exec, so a wrapper
                       script (`python3` as a pyenv shim, `env`, `nice`) is no obstacle
    OUT/children/massif.out.PID   the same for each process the command started
    OUT/valgrind.txt   valgrind's messages (and the program's standard error)
    OUT/memory.json    MemoryProfile: command, status, peak, per-snapshot bytes by top site,
                       the peak snapshot's allocation tree
    OUT/memory.png, OUT/memory.svg   heap over time, stacked by the top allocation sites
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autoprof.errors import AutoprofError
from autoprof.memory.massif import Massif, flatten, parse, site_bytes, top_sites
from autoprof.perf.process import workload_env
from autoprof.util.records import write_json
from autoprof.util.renderer import write
from autoprof.util.status import RunStatus

MASSIF_OUT = "massif.out"
CHILDREN = "children"
VALGRIND_LOG = "valgrind.txt"
MEMORY_JSON = "memory.json"
OTHER = "other sites"
_TERMINATING = r"^=={pid}== Process terminating with default action of signal (\d+) \((\w+)\)"
# valgrind's banner, printed by every process it runs: never the reason for anything
_BANNER = re.compile(
    r"(Massif, a heap profiler|Copyright \(C\)|Using Valgrind-|Command: |Parent PID: )"
)


@dataclass(frozen=True)
class MemoryOptions:
    threshold: float = 1.0  # percent of the peak below which massif lumps sites together
    pages_as_heap: bool = False  # count pages mapped (mmap, stacks, code), not malloc calls
    time_unit: str = "i"  # instructions, ms or B (bytes allocated so far), as massif takes
    top: int = 8  # allocation sites drawn separately; the rest are "other sites"
    # every snapshot detailed (massif's default: 1 in 10), so the stacked plot has no gaps
    detailed_freq: int = 1


def valgrind_argv(options: MemoryOptions, out: Path, command: list[str]) -> list[str]:
    """The valgrind command line: massif writing `out/massif.out.PID` for every process, into
    which it follows the command through exec (without it, a command that execs another
    program, as every wrapper script does, leaves valgrind behind and writes nothing)."""
    if not command:
        raise AutoprofError("nothing to profile: give a command after --")
    if not 0 <= options.threshold <= 100:
        raise AutoprofError(f"--threshold is a percentage, not {options.threshold}")
    argv = ["valgrind", "--tool=massif", "--trace-children=yes"]
    argv.append(f"--massif-out-file={out / MASSIF_OUT}.%p")
    argv += [f"--threshold={options.threshold}", f"--time-unit={options.time_unit}"]
    argv.append(f"--detailed-freq={options.detailed_freq}")
    if options.pages_as_heap:
        argv.append("--pages-as-heap=yes")
    return [*argv, "--", *command]


@dataclass
class MemoryProfile:
    command: list[str]
    valgrind_argv: list[str]
    status: str  # RunStatus OK, WORKLOAD_FAILED (non-zero exit) or CRASHED (killed by a signal)
    exit_code: int | None
    signal: str | None
    time_unit: str
    peak_bytes: int
    peak_time: int
    peak_extra_bytes: int
    sites: list[str]  # the top allocation sites, largest first, then OTHER
    snapshots: list[dict] = field(default_factory=list)  # time, heap, extra, per-site bytes
    peak_tree: list[dict] = field(default_factory=list)  # depth, bytes, percent, location
    notes: list[str] = field(default_factory=list)


def summarize(massif: Massif, options: MemoryOptions) -> dict:
    """The plot's data and the peak table from a parsed massif file (pure)."""
    sites = top_sites(massif, options.top)
    snapshots = []
    for snap in massif.snapshots:
        row: dict[str, Any] = {
            "time": snap.time,
            "heap": snap.heap,
            "extra": snap.extra,
            "detailed": False,
        }
        if snap.tree is not None:
            by_site = site_bytes(snap)
            row["sites"] = {s: by_site.get(s, 0) for s in sites}
            row["sites"][OTHER] = snap.heap - sum(row["sites"].values())
            row["detailed"] = True
        snapshots.append(row)
    peak = massif.peak
    tree = []
    if peak.tree is not None:
        for depth, node in flatten(peak.tree):
            share = 100.0 * node.bytes / peak.heap if peak.heap else 0.0
            row = {"depth": depth, "bytes": node.bytes, "percent": share}
            tree.append({**row, "location": node.location})
    return {
        "sites": [*sites, OTHER],
        "snapshots": snapshots,
        "peak_tree": tree,
        "peak_bytes": peak.heap,
        "peak_time": peak.time,
        "peak_extra_bytes": peak.extra,
    }


def run(options: MemoryOptions, out: Path, command: list[str]) -> MemoryProfile:
    """Profile `command`'s heap into `out`. A crash keeps massif's partial output and the files
    made from it, then raises one AutoprofError line."""
    if shutil.which("valgrind") is None:
        raise AutoprofError("valgrind not found (Debian: sudo apt-get install valgrind)")
    argv = valgrind_argv(options, out, command)
    if shutil.which(command[0]) is None:
        raise AutoprofError(f"command not found: {command[0]}")
    out.mkdir(parents=True, exist_ok=True)
    (out / MASSIF_OUT).unlink(missing_ok=True)
    shutil.rmtree(out / CHILDREN, ignore_errors=True)
    with (
        (out / VALGRIND_LOG).open("w") as log,
        subprocess.Popen(argv, stderr=log, env=workload_env()) as proc,
    ):
        code = proc.wait()
    messages = (out / VALGRIND_LOG).read_text(errors="replace")
    status, sig = _status(code, messages, proc.pid)
    children = _file_outputs(out, proc.pid)  # valgrind runs the command in its own process
    massif_file = out / MASSIF_OUT
    if not massif_file.is_file() or massif_file.stat().st_size == 0:
        raise AutoprofError(
            f"valgrind wrote no massif output for {command[0]}: {_last_words(messages)} "
            f"(see {out / VALGRIND_LOG})"
        )
    massif = parse(massif_file.read_text(errors="replace"))
    summary = summarize(massif, options)
    profile = MemoryProfile(command, argv, status, code, sig, massif.time_unit, **summary)
    if massif.truncated:
        profile.notes.append("massif's file ends inside a snapshot; that snapshot was dropped")
    if children:
        profile.notes.append(
            f"{children} {'process' if children == 1 else 'processes'} that {command[0]} "
            f"started ran under massif too: heap profiles in {out / CHILDREN}/ (massif.out.PID)"
        )
    from autoprof.memory.plot import plot_files

    write_json(out / MEMORY_JSON, asdict(profile))
    for name, data in plot_files(profile):
        write(data, out / name)
    if status == RunStatus.CRASHED:
        raise AutoprofError(
            f"{command[0]} crashed under valgrind ({sig}); partial heap profile kept in {out}"
        )
    return profile


def _file_outputs(out: Path, pid: int) -> int:
    """massif.out.PID of the command's process -> massif.out; those of the processes it
    started -> children/. Returns how many children there were."""
    children = 0
    for path in sorted(out.glob(f"{MASSIF_OUT}.*")):
        if path.name == f"{MASSIF_OUT}.{pid}":
            path.replace(out / MASSIF_OUT)
        else:
            (out / CHILDREN).mkdir(exist_ok=True)
            path.replace(out / CHILDREN / path.name)
            children += 1
    return children


def _status(code: int, messages: str, pid: int) -> tuple[RunStatus, str | None]:
    """How the command's own process ended (a child's crash is the child's)."""
    found = re.search(_TERMINATING.format(pid=pid), messages, re.MULTILINE)
    if found is not None:
        return RunStatus.CRASHED, f"signal {found.group(1)}, {found.group(2)}"
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        return RunStatus.CRASHED, f"signal {-code}, {name}"
    return (RunStatus.OK if code == 0 else RunStatus.WORKLOAD_FAILED), None


def _last_words(messages: str) -> str:
    """valgrind's last message that is not its banner."""
    lines = [re.sub(r"^==\d+== ?", "", line).strip() for line in messages.splitlines()]
    lines = [line for line in lines if line and not _BANNER.match(line)]
    return lines[-1] if lines else "valgrind said nothing more"
