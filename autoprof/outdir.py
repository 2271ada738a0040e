"""The `out/` folder of a profile: its layout and records, shared by `profile` and `aggregate`.

Layout::

    out/
      manifest.json           Manifest: command, plan, machine facts, options, autoprof version
      journal.jsonl           one JSON line per finished run attempt (resume reads it)
      runs/run0003-rep1/      one folder per (run, repeat); 1-based numbers
        run.json              RunRecord: events, perf argv, times, exit codes, status
        perf.csv              perf stat -x output, exactly as perf wrote it
        stdout.txt            the workload's standard output
        stderr.txt            the workload's standard error (and perf's own messages)
      attempts/run0002-rep1-attempt1/   a failed attempt that `--retries` ran again
      results.csv             written by `aggregate` (see autoprof.results)
      report.json             the sanity report written by `aggregate`

Nothing here runs perf or parses its output: this module only names files and (de)serializes
the records, so the runner, the aggregator and the results store agree on one layout.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autoprof.perf.unsupported import Unsupported

MANIFEST = "manifest.json"
JOURNAL = "journal.jsonl"
RUNS = "runs"
ATTEMPTS = "attempts"  # failed attempts of runs that `--retries` ran again, kept for the record
RUN_RECORD = "run.json"
PERF_OUTPUT = "perf.csv"
STDOUT = "stdout.txt"
STDERR = "stderr.txt"
RESULTS = "results.csv"
REPORT = "report.json"

# RunRecord.status values
RUN_OK = "ok"  # perf and the workload both exited 0
RUN_WORKLOAD_FAILED = "workload-failed"  # the workload exited non-zero (its counts are kept)
RUN_PERF_FAILED = "perf-failed"  # perf could not count (its stderr says why)
RUN_TIMEOUT = "timeout"  # killed after --timeout
RUN_INTERRUPTED = "interrupted"  # Ctrl-C or a signal; partial output kept, run not finished
RUN_TARGET_EXITED = "target-exited"  # attached: the process exited mid-run; not finished


@dataclass
class MachineFacts:
    """The machine a profile ran on; one row per distinct machine in the results store."""

    cpu_id: str  # perf's CPU id string, e.g. GenuineIntel-6-55-4 or AuthenticAMD-25-11-1
    model_name: str  # /proc/cpuinfo "model name"
    hostname: str
    kernel: str  # uname -r
    perf_version: str  # "perf version 6.1.187" -> "6.1.187"
    smt: bool
    nmi_watchdog: bool
    perf_event_paranoid: int | None
    # per catalog PMU: {"generic": n, "fixed": m}; what the schedule assumed
    counters: dict[str, dict[str, int]] = field(default_factory=dict)
    # one entry per online CPU, from sysfs at profile time (as autoperf records lscpu):
    # {"cpu": 5, "socket": 0, "core": 3, "node": 0}; "core" is the kernel's core_id (perf's
    # S0-D0-C3 numbering, unique within a socket). Empty in manifests written before it existed.
    topology: list[dict[str, int]] = field(default_factory=list)


@dataclass
class Manifest:
    """What was profiled, where and how: written once when a profile starts.

    `plan` is the schedule in the JSON contract of `autoprof schedule --json`; `id` is a uuid4
    that identifies this profile everywhere (the results store keys runs by it).
    """

    id: str
    autoprof_version: str
    created: str  # ISO 8601, UTC
    command: list[str]
    machine: MachineFacts
    plan: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    # the queue job that ran this profile, when one did: job id, worker, load average seen
    job: dict[str, Any] = field(default_factory=dict)
    # an attached profile (`profile -p/--cgroup/-a --duration`): targets and run times
    attach: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        data = dict(data)
        data["machine"] = MachineFacts(**data["machine"])
        return cls(**data)


@dataclass
class EventRef:
    """One event of a run: its catalog identity, the perf spec passed to -e, and the label perf
    prints for it (how `aggregate` maps perf's output lines back to catalog events)."""

    name: str
    pmu: str
    spec: str
    label: str


@dataclass
class RunRecord:
    """What happened in one (run, repeat): everything needed to trust or distrust its numbers."""

    run: int
    repeat: int
    events: list[EventRef]
    perf_argv: list[str]
    start: str = ""  # ISO 8601, UTC
    end: str = ""
    elapsed_s: float = 0.0
    perf_exit: int | None = None
    workload_exit: int | None = None
    status: str = ""
    error: str | None = None
    # events perf refused to open in this run, with perf's own reason
    unsupported: list[Unsupported] = field(default_factory=list)
    # > 1 when perf had no room for an event and the run was split: the event ran apart
    part: int = 1
    # > 1 when earlier attempts failed and `--retries` ran the run again (the journal keeps them)
    attempt: int = 1
    # perf's pid, which leads its own process group (perf + workload): whoever finds this run
    # unfinished after its profiler died can stop what it left running
    perf_pid: int | None = None

    @property
    def folder_name(self) -> str:
        return run_folder_name(self.run, self.repeat, self.part)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        data = dict(data)
        data["events"] = [EventRef(**e) for e in data.get("events", [])]
        data["unsupported"] = [Unsupported.from_json(u) for u in data.get("unsupported", [])]
        return cls(**data)


def run_folder_name(run: int, repeat: int, part: int = 1) -> str:
    return f"run{run:04d}-rep{repeat}" + (f"-part{part}" if part > 1 else "")


def planned(runs: int, repeat: int, part: int = 1, parts: int = 1) -> list[tuple[int, int]]:
    """The (run, repeat) pairs that part `part` of `parts` (1-based) of a profile runs.

    Round robin over the plan's (run, repeat) pairs, so with repeats the parts get equal work
    even when the runs differ in length; the pairs keep the plan's global numbers, so the parts'
    results put together are those of one machine. A plain profile is part 1 of 1: every pair.
    """
    pairs = [(r, k) for r in range(1, runs + 1) for k in range(1, repeat + 1)]
    return pairs[part - 1 :: parts]


def run_dir(out: Path, run: int, repeat: int, part: int = 1) -> Path:
    return out / RUNS / run_folder_name(run, repeat, part)


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (temp file + rename): an interrupted write leaves no half file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    tmp.replace(path)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def write_manifest(out: Path, manifest: Manifest) -> None:
    write_json(out / MANIFEST, manifest.to_dict())


def read_manifest(out: Path) -> Manifest:
    return Manifest.from_dict(read_json(out / MANIFEST))


def write_run_record(folder: Path, record: RunRecord) -> None:
    write_json(folder / RUN_RECORD, record.to_dict())


def read_run_record(folder: Path) -> RunRecord:
    return RunRecord.from_dict(read_json(folder / RUN_RECORD))


_FOLDER = re.compile(r"run(\d+)-rep(\d+)(?:-part(\d+))?")


def _folder_order(folder: Path) -> tuple:
    """(run, repeat, part) as numbers, so rep10 sorts after rep9; foreign names go last."""
    match = _FOLDER.fullmatch(folder.name)
    if match is None:
        return (1, folder.name)
    run, repeat, part = match.groups()
    return (0, int(run), int(repeat), int(part or 1))


def run_folders(out: Path) -> list[Path]:
    """The run folders of `out`, in run, repeat, part order: the order of rows in results.csv,
    which the results store relies on to export a split profile exactly as `aggregate` wrote it."""
    root = out / RUNS
    if not root.is_dir():
        return []
    folders = [p for p in root.iterdir() if p.is_dir() and p.name.startswith("run")]
    return sorted(folders, key=_folder_order)


def set_aside(out: Path, folder: Path, attempt: int) -> Path:
    """Move a failed attempt's run folder to out/attempts/, out of aggregate's way."""
    dest = out / ATTEMPTS / f"{folder.name}-attempt{attempt}"
    dest.parent.mkdir(exist_ok=True)
    if dest.exists():
        shutil.rmtree(dest)
    return folder.rename(dest)


def part_folders(out: Path, run: int, repeat: int) -> list[Path]:
    """Every part's folder of one (run, repeat): rep1's, never rep10's."""
    return [p for p in run_folders(out) if _folder_order(p)[1:3] == (run, repeat)]
