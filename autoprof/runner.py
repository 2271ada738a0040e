"""Execute a Plan: one `perf stat` per (run, repeat), every raw output kept under out/.

The journal makes a profile resumable: a (run, repeat) whose run.json reached a final status
is never run again (unless forced), so Ctrl-C, SIGTERM or a crash cost at most the run in
progress (a power cut at most one more: entries are fsynced while the next run goes on).
Faults are handled where they happen: an event perf cannot open is split off into a run of
its own (no room: ENOSPC/EBUSY) or recorded as unsupported with perf's reason; a workload
that fails is recorded and the profile goes on (or stops, with fail_fast).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from autoprof import attach, outdir
from autoprof.catalog.model import Event
from autoprof.errors import AutoprofError
from autoprof.outdir import EventRef, RunRecord
from autoprof.perf import command as perf_command
from autoprof.perf.unsupported import Unsupported
from autoprof.procgroup import Interrupted, Stopper, stop_group, stop_leftovers
from autoprof.schedule.plan import Plan, perf_event_args  # networkx only when a plan is packed

__all__ = ["Interrupted", "ProfileOptions", "Runner", "Task", "stop_leftovers"]

# perf stat -I exits 0 whatever the workload did (perf 6.1), so the workload runs under a
# shell that writes its exit status to a file (the shell is PIE: it never maps the low
# addresses the breakpoint tests watch, and adds a constant few page faults).
_STATUS_WRAPPER = ["/bin/sh", "-c", '"$@"; s=$?; echo $s > "$0"; exit $s']
STATUS_FILE = "workload.status"
LOCK_FILE = ".lock"
FINAL = {outdir.RUN_OK, outdir.RUN_WORKLOAD_FAILED, outdir.RUN_PERF_FAILED, outdir.RUN_TIMEOUT}


@dataclass(frozen=True)
class ProfileOptions:
    interval_ms: int | None = 100
    repeat: int = 1
    system_wide: bool = False
    cpu_list: str | None = None
    timeout: float | None = None
    fail_fast: bool = False
    force: bool = False
    retries: int = 0  # run a failed (run, repeat) again, up to this many more times
    # an unconstrained event (task-clock) counted in every run, so analyses can normalise by it
    anchor: str | None = None
    # a profile split over `parts` machines: this one runs its share (outdir.planned)
    part: int = 1
    parts: int = 1
    # attached profile (no command): each run watches these processes (perf -p), this cgroup,
    # or the whole system (system_wide) for `duration` seconds
    pids: str | None = None
    cgroup: str | None = None
    duration: float | None = None

    @property
    def attached(self) -> bool:
        return self.duration is not None


@dataclass(frozen=True)
class Task:
    """One (run, repeat) of the plan."""

    run: int
    repeat: int
    events: tuple[Event, ...]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def tasks(plan: Plan, options: ProfileOptions) -> list[Task]:
    """The (run, repeat) tasks of this part (all of them for a plain profile), each with the
    anchor event added to the runs the plan did not put it in."""
    anchor = [e for run in plan.runs for e in run.events if options.anchor in (e.name, e.spec)]
    if options.anchor and not anchor:
        raise AutoprofError(f"anchor event {options.anchor} is not in the plan")
    runs = [
        tuple(run.events) + tuple(e for e in anchor if e not in run.events) for run in plan.runs
    ]
    return [
        Task(run, rep, runs[run - 1])
        for run, rep in outdir.planned(len(plan.runs), options.repeat, options.part, options.parts)
    ]


def perf_argv(
    folder: Path, events: list[Event], command: list[str], options: ProfileOptions, perf: str
) -> list[str]:
    """The exact argv a run executes (run with LC_ALL=C): `perf stat` over the workload wrapped
    in the shell that records its exit status in `folder`, or attached to the running target.
    `--dry-run` prints this very argv."""
    if options.attached:
        return attach.perf_argv(folder, perf_event_args(list(events)), options, perf)
    wrapped = [*_STATUS_WRAPPER, str(folder / STATUS_FILE), *command]
    return perf_command.stat_argv(
        perf_event_args(list(events)),
        wrapped,
        str(folder / outdir.PERF_OUTPUT),
        interval_ms=options.interval_ms,
        system_wide=options.system_wide,
        cpu_list=options.cpu_list,
        no_merge=any(e.pmu.startswith("uncore_") for e in events),
        perf=perf,
    )


def finished(out: Path) -> set[tuple[int, int]]:
    """(run, repeat) pairs whose last journal entry is final; unreadable lines are skipped."""
    done: dict[tuple[int, int], str] = {}
    path = out / outdir.JOURNAL
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
                done[(int(entry["run"]), int(entry["repeat"]))] = entry["status"]
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by a crash
    return {key for key, status in done.items() if status in FINAL}


def _journal(out: Path, records: list[RunRecord]) -> int:
    """Append the journal entry of one (run, repeat) in one write; returns the open file
    descriptor, for the caller to fsync and close."""
    last = records[-1]
    status = next((r.status for r in records if r.status != outdir.RUN_OK), outdir.RUN_OK)
    entry = {
        "run": last.run,
        "repeat": last.repeat,
        "status": status,
        "end": last.end,
        "folders": [r.folder_name for r in records],
    }
    fd = os.open(out / outdir.JOURNAL, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
    except BaseException:
        os.close(fd)
        raise
    return fd


def _sync_and_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Runner:
    """Runs tasks of one profile; `on_event(kind, task, record)` reports progress."""

    def __init__(
        self,
        out: Path,
        command: list[str],
        options: ProfileOptions,
        on_event: Callable[[str, Task, RunRecord | None], None] | None = None,
    ):
        self.out = out
        self.command = command
        self.options = options
        self.on_event = on_event or (lambda *_: None)
        self.perf = shutil.which("perf") or "perf"
        self.env = dict(os.environ, LC_ALL="C")
        self.stopper = Stopper()
        self._syncing: threading.Thread | None = None

    def run_all(self, todo: list[Task]) -> list[RunRecord]:
        """Run every task not finished yet; stop early on fail_fast, or on Ctrl-C, SIGTERM or
        SIGHUP (Interrupted, after stopping the run in progress: perf and its workload).

        Holds an exclusive lock on out/ meanwhile: two profiles never write one folder.
        """
        with (self.out / LOCK_FILE).open("w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise AutoprofError(f"another profile is running in {self.out}/") from None
            stop_leftovers(self.out)  # the lock was free: whoever held it is dead
            with self.stopper:
                try:
                    return self._run_all(todo)
                finally:
                    self._synced()

    def _journal(self, records: list[RunRecord]) -> None:
        """Append the entry now (a crashed or killed profiler keeps it) and fsync it while the
        next run goes on: a power cut loses at most the last finished run besides the one in
        progress. The next entry waits for that fsync, so entries reach the disk in order."""
        with self.stopper.deferred():
            self._synced()
            fd = _journal(self.out, records)
            self._syncing = threading.Thread(target=_sync_and_close, args=(fd,), daemon=True)
            self._syncing.start()

    def _synced(self) -> None:
        if self._syncing is not None:
            self._syncing.join()
            self._syncing = None

    def _run_all(self, todo: list[Task]) -> list[RunRecord]:
        records: list[RunRecord] = []
        done = set() if self.options.force else finished(self.out)
        for task in todo:
            if (task.run, task.repeat) in done:
                self.on_event("skip", task, None)
                continue
            self.on_event("start", task, None)
            parts = self.run_task(task)
            self._journal(parts)
            for attempt in range(2, self.options.retries + 2):
                if all(p.status == outdir.RUN_OK for p in parts) or attach.target_gone(parts):
                    break
                self.on_event("retry", task, parts[-1])
                parts = self.run_task(task, attempt)
                self._journal(parts)
            records += parts
            self.on_event("end", task, parts[-1])
            if attach.target_gone(parts):
                break  # nothing left to attach to: the other runs are missing (resume them)
            if self.options.fail_fast and any(
                p.status == outdir.RUN_WORKLOAD_FAILED for p in parts
            ):
                break
        return records

    def run_task(self, task: Task, attempt: int = 1) -> list[RunRecord]:
        """Run one (run, repeat), splitting off or dropping events perf cannot open. A retry
        (`attempt` > 1) first sets the failed attempt's folders aside; a resumed run's
        unfinished ones are replaced."""
        if outdir.run_dir(self.out, task.run, task.repeat).exists():  # parts start at 1
            for old in outdir.part_folders(self.out, task.run, task.repeat):
                if attempt > 1:
                    outdir.set_aside(self.out, old, attempt - 1)
                else:
                    shutil.rmtree(old)
        pending = [list(task.events)]
        unsupported: list[Unsupported] = []
        records: list[RunRecord] = []
        while pending:
            events = pending.pop(0)
            record, stderr = self._invoke(task, events, part=len(records) + 1)
            failure = perf_command.open_failure(stderr)
            culprit = _event_named(events, failure.event) if failure else None
            if record.status == outdir.RUN_PERF_FAILED and culprit is not None:
                rest = [e for e in events if e is not culprit]
                if failure.capacity and rest:
                    pending.append([culprit])  # no room here: count it in a run of its own
                else:
                    unsupported.append(Unsupported(culprit.name, culprit.pmu, failure.reason))
                if rest:
                    pending.insert(0, rest)
                    continue
            record.unsupported = unsupported
            record.attempt = attempt
            unsupported = []
            outdir.write_run_record(self._folder(record), record)
            records.append(record)
        return records

    def _folder(self, record: RunRecord) -> Path:
        return outdir.run_dir(self.out, record.run, record.repeat, record.part)

    def _invoke(self, task: Task, events: list[Event], part: int) -> tuple[RunRecord, str]:
        """Run perf once; the record (written once perf started, with its pid, so that
        `stop_leftovers` can find it; the caller writes the final one) and perf's stderr."""
        folder = outdir.run_dir(self.out, task.run, task.repeat, part)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        argv = perf_argv(folder, events, self.command, self.options, self.perf)
        record = RunRecord(
            run=task.run,
            repeat=task.repeat,
            part=part,
            perf_argv=argv,
            events=[
                EventRef(e.name, e.pmu, e.spec, attach.label(e.label, self.options)) for e in events
            ],
            start=now(),
        )
        started = time.monotonic()
        with (folder / outdir.STDOUT).open("wb") as out, (folder / outdir.STDERR).open("wb") as err:
            try:
                with self.stopper.deferred():  # a signal now is raised once perf's pid is known
                    proc = subprocess.Popen(
                        argv,
                        stdout=out,
                        stderr=err,
                        stdin=subprocess.DEVNULL,
                        env=self.env,
                        start_new_session=True,
                    )
                    record.perf_pid = proc.pid
                    outdir.write_run_record(folder, record)
            except OSError as error:
                raise AutoprofError(f"cannot start perf: {error}") from None
            try:
                code = proc.wait(timeout=self.options.timeout)
            except subprocess.TimeoutExpired:
                with self.stopper.deferred():  # a signal meanwhile must not cut the stop short
                    code = stop_group(proc)
                record.status = outdir.RUN_TIMEOUT
                record.error = f"stopped after --timeout {self.options.timeout:g} s"
            except Interrupted as stop:
                record.perf_exit = stop_group(proc)
                record.status = outdir.RUN_INTERRUPTED
                record.error = f"interrupted by {stop.name}"
                record.end, record.elapsed_s = now(), round(time.monotonic() - started, 6)
                outdir.write_run_record(folder, record)
                raise
            except BaseException:  # e.g. a queue job's timeout raised in this process
                with self.stopper.deferred():
                    stop_group(proc)
                raise
        record.end, record.elapsed_s = now(), round(time.monotonic() - started, 6)
        record.perf_exit = code
        stderr = (folder / outdir.STDERR).read_text(errors="replace")
        if record.status:
            pass
        elif self.options.attached:
            failure = perf_command.open_failure(stderr)
            attach.classify(record, code, _counted(folder), failure, stderr, self.options)
        else:
            _classify(record, code, stderr, folder)
        return record, stderr


def _classify(record: RunRecord, code: int, stderr: str, folder: Path) -> None:
    """ok / workload-failed / perf-failed from perf's exit code and output and the
    workload's own exit status."""
    status_path = folder / STATUS_FILE
    status_text = status_path.read_text().strip() if status_path.exists() else ""
    failure = perf_command.open_failure(stderr)
    if not status_text.isdigit() or (failure and not _counted(folder)):
        record.status = outdir.RUN_PERF_FAILED
        record.error = (
            f"perf could not open {failure.event}: {failure.reason}"
            if failure
            else f"perf exited {code} without running the workload"
        )
        return
    status = int(status_text)
    record.workload_exit = status
    if status == 0:
        record.status = outdir.RUN_OK
    elif status > 128 and status - 128 in {int(s) for s in signal.Signals}:
        record.status = outdir.RUN_WORKLOAD_FAILED
        record.workload_exit = -(status - 128)
        record.error = f"workload killed by {signal.Signals(status - 128).name}"
        if status - 128 == signal.SIGTRAP and any(e.pmu == "breakpoint" for e in record.events):
            record.error += (
                " (a breakpoint trap perf did not claim: is another debugger or profile "
                "using the debug registers? --retries N runs it again)"
            )
    else:
        record.status = outdir.RUN_WORKLOAD_FAILED
        record.error = f"workload exited with status {status}"


def _counted(folder: Path) -> bool:
    """perf wrote at least one count (not only its header) into the run's output."""
    output = folder / outdir.PERF_OUTPUT
    if not output.exists():
        return False
    with output.open() as fh:
        return any(line.strip() and not line.startswith("#") for line in fh)


def _event_named(events: list[Event], name: str) -> Event | None:
    return next((e for e in events if name in (e.spec, e.label, e.name)), None)
