"""The `out/` folder of a profile: its layout and records, shared by `profile` and `aggregate`.

Layout::

    out/
      manifest.json           Manifest: command, plan, machine facts, options, autoprof version
      journal.jsonl           one JSON line per finished run attempt (resume reads it)
      runs/run0003-rep1/      one folder per (run, repeat); 1-based numbers
        run.json              RunRecord: events, perf argv, times, exit codes, status
        perf.csv              perf stat -x output, exactly as perf wrote it
        emulated.json         --emulate: EmulatedCounts, what the emulator counted (no perf.csv)
        cachegrind.out.PID    --emulate: the emulator's own output (valgrind.log.PID its log)
        perf-TID.csv          --per-thread: the output of each other thread's perf
        stdout.txt            the workload's standard output (none: it wrote nothing)
        stderr.txt            the workload's standard error and perf's messages (same)
      attempts/run0002-rep1-attempt1/   a failed attempt that `--retries` ran again
      .lock                   held by the profile writing the folder; names its run's processes
      stdout.spool, stderr.spool   the run under way's output (`run.spool`)
      results.csv             written by `aggregate` (see autoprof.results)
      report.json             the sanity report written by `aggregate`

Nothing here runs perf or parses its output: this module only names files and (de)serializes
the records, so the runner, the aggregator and the results store agree on one layout.

Every file autoprof reads back carries a `"format"` number (none: format 1, the files written
before formats were recorded). `from_json` reads every format up to the current one, ignoring
keys it does not know and defaulting the ones a file lacks; a newer format is refused.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from autoprof.catalog.facts import MachineFacts
from autoprof.errors import AutoprofError
from autoprof.perf.unsupported import Unsupported
from autoprof.run.options import ProfileOptions, measuring_fields
from autoprof.util.owned import FOLDER_MODE, trusted
from autoprof.util.records import file_format, known_fields, read_json, write_json

if TYPE_CHECKING:
    from autoprof.perf.threads import ThreadRecord

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
LOCK = ".lock"  # held (flock) by the profile writing the folder: `Running` is written in it
EMULATED = "emulated.json"  # profile --emulate: a run's counts, in place of perf.csv
BENCH = "bench.json"  # a benchmark's document (`autoprof bench -o`): the folder is no profile


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
    options: ProfileOptions = field(default_factory=ProfileOptions)
    # the queue job that ran this profile, when one did: job id, worker, load average seen
    job: dict[str, Any] = field(default_factory=dict)
    # an attached profile (`profile -p/--cgroup/-a --duration`): targets and run times
    attach: dict[str, Any] = field(default_factory=dict)

    FORMAT: ClassVar[int] = 1

    def to_json(self) -> dict[str, Any]:
        """The manifest as JSON. Its plan is JSON already and goes as it is: `asdict` copied
        its ~20,000 objects, a third of a profile's fixed cost on a PMU-less VM's plan."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data |= {"machine": asdict(self.machine), "options": self.options.to_json()}
        return {"format": self.FORMAT, **data}

    @classmethod
    def from_json(cls, data: dict[str, Any], path: object = MANIFEST) -> Manifest:
        """Raises NewerFormat for a newer file, KeyError/TypeError for one that is not a
        manifest."""
        file_format(data, cls.FORMAT, path)
        machine = MachineFacts(**known_fields(MachineFacts, data["machine"]))
        options = ProfileOptions.from_json(data.get("options", {}))
        return cls(**{**known_fields(cls, data), "machine": machine, "options": options})

    def event_names(self) -> frozenset[str] | None:
        """The names of the events the plan schedules: the only ones its results may hold
        (anything else came from an edited file, not from perf). None for a plan without runs
        (a benchmark folder's): nothing to check against."""
        runs = self.plan.get("runs") if isinstance(self.plan, dict) else None
        if not isinstance(runs, list):
            return None
        return frozenset(
            str(event.get("name"))
            for run in runs
            if isinstance(run, dict)
            for event in run.get("events") or []
            if isinstance(event, dict)
        )

    def check_resume(
        self,
        out: Path,
        command: list[str],
        plan: dict[str, Any],
        options: ProfileOptions,
        machine: MachineFacts,
        profile_id: str | None = None,
    ) -> None:
        """Raise unless `out`, holding this manifest, holds the very profile asked for (same
        command, plan, CPU, part and measurement `options`, as `Manifest.options` records
        them): resuming anything else would mix two profiles' numbers in one folder."""
        if self.command != command:
            raise AutoprofError(
                f"{out} holds a profile of another command ({' '.join(self.command)}); "
                "use another -o"
            )
        if self.plan != plan:
            raise AutoprofError(f"{out} holds a profile with another event plan; use another -o")
        if self.machine.cpu_id != machine.cpu_id:
            raise AutoprofError(
                f"{out} was profiled on another CPU ({self.machine.cpu_id}, this one is "
                f"{machine.cpu_id}); use another -o"
            )
        if profile_id is not None and self.id != profile_id:
            raise AutoprofError(f"{out} holds another profile ({self.id}); use another -o")
        here = (self.options.part, self.options.parts)
        wanted = (options.part, options.parts)
        if here != wanted:
            raise AutoprofError(
                f"{out} holds part {here[0]} of {here[1]} of this profile, not part "
                f"{wanted[0]} of {wanted[1]}; use another -o"
            )
        changed = [k for k in measuring_fields() if getattr(self.options, k) != getattr(options, k)]
        if changed:
            raise AutoprofError(
                f"{out} was profiled with other {', '.join(changed)}; "
                "use the same options or another -o"
            )


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
    perf_argv: list[str]  # what counted: perf, or the emulator (profile --emulate)
    start: str = ""  # ISO 8601, UTC
    end: str = ""
    elapsed_s: float = 0.0
    perf_exit: int | None = None
    workload_exit: int | None = None
    status: str = ""  # a RunStatus once the run ended
    error: str | None = None
    # events perf refused to open in this run, with perf's own reason
    unsupported: list[Unsupported] = field(default_factory=list)
    # > 1 when perf had no room for an event and the run was split: the event ran apart
    part: int = 1
    # > 1 when earlier attempts failed and `--retries` ran the run again (the journal keeps them)
    attempt: int = 1
    # perf's pid, in the process group it shares with the workload (which leads it; perf leads
    # an attached run's): whoever finds this run unfinished after its profiler died can stop
    # what it left running
    perf_pid: int | None = None
    workload_pid: int | None = None  # the command autoprof started for perf to count
    workload_start: int | None = None  # its start time (perf.process.start_time): its identity
    cpus: list[int] | None = None  # the CPUs the workload was bound to (--pin, --core-type)
    # --per-thread: every thread counted, each by its own perf (perf.csv, perf-TID.csv)
    threads: list[ThreadRecord] = field(default_factory=list)
    # a secret in perf's environment (perf.process.NONCE_VAR): a perf is stopped as left behind
    # only when it has this very value, so a run.json naming another process kills nothing
    perf_nonce: str | None = None

    FORMAT: ClassVar[int] = 1

    @property
    def folder_name(self) -> str:
        return run_folder_name(self.run, self.repeat, self.part)

    def to_json(self) -> dict[str, Any]:
        """`asdict`'s dict, made by hand: asdict deep-copies every value (0.3 ms a record)."""
        data = {"format": self.FORMAT, **vars(self)}
        data["events"] = [vars(e).copy() for e in self.events]
        data["perf_argv"] = list(self.perf_argv)
        data["unsupported"] = [u.to_json() for u in self.unsupported]
        data["threads"] = [vars(t).copy() for t in self.threads]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], path: object = RUN_RECORD) -> RunRecord:
        """Raises NewerFormat for a newer file, KeyError/TypeError for one that is not a run
        record (run and repeat are required; the rest default)."""
        file_format(data, cls.FORMAT, path)
        events = [EventRef(**known_fields(EventRef, e)) for e in data.get("events", [])]
        unsupported = [Unsupported.from_json(u) for u in data.get("unsupported", [])]
        threads = _thread_records(data.get("threads", []))
        required = {
            "threads": threads,
            "run": int(data["run"]),
            "repeat": int(data["repeat"]),
            "events": events,
            "unsupported": unsupported,
        }
        return cls(**{"perf_argv": [], **known_fields(cls, data), **required})


@dataclass
class EmulatedCounts:
    """What an emulator counted in one run of `profile --emulate` (`run.emulated`), in place
    of perf's output: each event's count, and the wall time of the emulated run and of a
    native run of the same command just before it (their ratio is the emulation's slowdown;
    None when the native run failed)."""

    engine: str
    counts: dict[str, float]
    wall_s: float
    native_wall_s: float | None = None

    FORMAT: ClassVar[int] = 1

    @property
    def slowdown(self) -> float | None:
        native = self.native_wall_s
        return self.wall_s / native if native else None

    def to_json(self) -> dict[str, Any]:
        return {"format": self.FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any], path: object = EMULATED) -> EmulatedCounts:
        """Raises NewerFormat for a newer file, KeyError/TypeError/ValueError for another."""
        file_format(data, cls.FORMAT, path)
        counts = {str(k): float(v) for k, v in data["counts"].items()}
        return cls(**{**known_fields(cls, data), "counts": counts})


def write_emulated(folder: Path, counts: EmulatedCounts) -> None:
    write_json(folder / EMULATED, counts.to_json())


def read_emulated(folder: Path) -> EmulatedCounts:
    """An emulated run's counts; OSError, ValueError, KeyError or TypeError for a missing or
    broken file (aggregate lists those), NewerFormat for a newer one."""
    path = folder / EMULATED
    try:
        return EmulatedCounts.from_json(read_json(path), path)
    except AttributeError as err:  # not a JSON object
        raise TypeError(f"not an emulated run's counts: {err}") from None


def run_folder_name(run: int, repeat: int, part: int = 1) -> str:
    return f"run{run:04d}-rep{repeat}" + (f"-part{part}" if part > 1 else "")


def planned(runs: int, repeat: int, part: int = 1, parts: int = 1) -> Iterator[tuple[int, int]]:
    """The (run, repeat) pairs that part `part` of `parts` (1-based) of a profile runs, made
    one at a time (runs x repeats may be large: nothing is built before the first run).

    Round robin over the plan's (run, repeat) pairs, so with repeats the parts get equal work
    even when the runs differ in length; the pairs keep the plan's global numbers, so the parts'
    results put together are those of one machine. A plain profile is part 1 of 1: every pair.
    """
    pairs = itertools.product(range(1, runs + 1), range(1, repeat + 1))
    return itertools.islice(pairs, part - 1, None, parts)


def planned_count(runs: int, repeat: int, part: int = 1, parts: int = 1) -> int:
    """How many pairs `planned` gives, without making them."""
    return max(0, -(-(runs * repeat - (part - 1)) // parts))


def run_dir(out: Path, run: int, repeat: int, part: int = 1) -> Path:
    return out / RUNS / run_folder_name(run, repeat, part)


def write_manifest(out: Path, manifest: Manifest) -> None:
    """manifest.json, a key a line (json's C encoder: `indent` takes its Python one, slower by
    as much again on a plan of thousands of events)."""
    write_json(out / MANIFEST, manifest.to_json(), lines=True)


def read_manifest(out: Path) -> Manifest:
    """The manifest of `out`; a missing, broken or newer one raises a one-line AutoprofError
    (NewerFormat for a newer one)."""
    path = out / MANIFEST
    try:
        data = read_json(path)
    except FileNotFoundError:
        raise AutoprofError(f"{out}: no {MANIFEST}; is this a profile's output folder?") from None
    except (OSError, ValueError) as err:
        raise AutoprofError(f"{path}: unreadable manifest ({one_line(err)})") from None
    try:
        return Manifest.from_json(data, path)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise AutoprofError(f"{path}: unreadable manifest ({one_line(err)})") from None


def one_line(err: Exception) -> str:
    return f"{type(err).__name__}: {err}".splitlines()[0]


def _thread_records(found: list[dict[str, Any]]) -> list[ThreadRecord]:
    """--per-thread's records of a run (`perf.threads` loads only for a run that has them)."""
    if not found:
        return []
    from autoprof.perf.threads import ThreadRecord

    return [ThreadRecord(**known_fields(ThreadRecord, t)) for t in found]


def write_run_record(folder: Path, record: RunRecord) -> None:
    write_json(folder / RUN_RECORD, record.to_json(), lines=True)  # written once a run


def read_run_record(folder: Path) -> RunRecord:
    """The record of one run; raises OSError, ValueError, KeyError or TypeError for a missing
    or broken one (aggregate lists those), NewerFormat for a newer one."""
    path = folder / RUN_RECORD
    data = read_json(path)
    try:
        return RunRecord.from_json(data, path)
    except AttributeError as err:  # not a JSON object
        raise TypeError(f"not a run record: {err}") from None


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
    dest.parent.mkdir(FOLDER_MODE, exist_ok=True)
    if dest.exists():
        shutil.rmtree(dest)
    return folder.rename(dest)


def part_folders(out: Path, run: int, repeat: int) -> list[Path]:
    """Every part's folder of one (run, repeat): rep1's, never rep10's."""
    return [p for p in run_folders(out) if _folder_order(p)[1:3] == (run, repeat)]


@dataclass
class Running:
    """The processes of the run a profile has under way, written over its folder's lock file
    (`note_running`) as each starts: a profiler that dies leaves them running, and whoever
    takes the lock next stops them (`left_running`, `perf.process.stop_leftovers`). It only
    has to outlive the profiler, not the machine (a power cut ends the processes too): one
    write into the file the profile holds open costs nothing beside a run record written
    whole (a file made and renamed, 0.4 ms, twice a run)."""

    folder: str  # the run's folder under runs/ (`RunRecord.folder_name`)
    perf_pid: int | None = None  # in the workload's process group (perf leads an attached run's)
    workload_pid: int | None = None  # the command autoprof started for perf to count
    workload_start: int | None = None  # its start time (perf.process.start_time): its identity
    # a secret in perf's environment (perf.process.NONCE_VAR): a perf is stopped as left behind
    # only when it has this very value, so a lock file naming another process kills nothing
    perf_nonce: str | None = None


_LOCK_WIDTH = 512  # every note is this long: each is written over the last, in one write


def note_running(lock: int, running: Running | None) -> None:
    """Write `running` (None: nothing runs) over the lock file open as `lock`."""
    text = "" if running is None else json.dumps(vars(running))  # flat: asdict's copies spared
    os.pwrite(lock, text.ljust(_LOCK_WIDTH).encode(), 0)


def left_running(root: Path) -> list[Running]:
    """The run under way in each profile folder under `root` (any depth, `root` too) whose
    run has no final record: a profiler that died left its perf and workload running. Read
    only once the folder's lock is free (its profiler is gone). Only lock files this user
    wrote count: each, and every folder from `root` down to it, this user's alone."""
    found = []
    for lock in sorted(root.glob(f"**/{LOCK}")):
        if not trusted(lock, root):
            continue
        try:
            text = lock.read_text().strip()
            running = Running(**known_fields(Running, json.loads(text))) if text else None
        except (OSError, ValueError, TypeError):
            continue
        if running is None or not _FOLDER.fullmatch(str(running.folder)):
            continue
        try:
            if read_run_record(lock.parent / RUNS / running.folder).status:
                continue  # it ended, and was recorded
        except (OSError, ValueError, TypeError, KeyError, AutoprofError):
            pass  # no record yet: it was still running
        found.append(running)
    return found
