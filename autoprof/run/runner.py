"""Execute a Plan: one `perf stat` per (run, repeat), every raw output kept under out/.

The journal makes a profile resumable: a (run, repeat) whose run.json reached a final status
is never run again (unless forced), so Ctrl-C, SIGTERM or a crash cost at most the run in
progress (a power cut also those that ended in the journal's last fsync pause, 0.2 s:
`run.journal`).
Faults are handled where they happen: an event perf cannot open is split off into a run of
its own (no room: ENOSPC/EBUSY) or recorded as unsupported with perf's reason; a workload
that fails is recorded and the profile goes on (or stops, with fail_fast).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from autoprof.catalog.model import Event
from autoprof.errors import AutoprofError
from autoprof.perf import command as perf_command
from autoprof.perf import process
from autoprof.perf.launch import Launch, resolve
from autoprof.perf.process import (
    Interrupted,
    Stopper,
    command_env,
    start_time,
    stop_group,
    workload_env,
)
from autoprof.perf.unsupported import Unsupported
from autoprof.run import attach, outcome, outdir, pinning, spool
from autoprof.run.journal import Entry, Journal, finished
from autoprof.run.options import ProfileOptions
from autoprof.run.outdir import EventRef, RunRecord
from autoprof.schedule.plan import perf_event_args  # networkx only when a plan is packed
from autoprof.util import owned
from autoprof.util.clock import now_iso
from autoprof.util.status import RunStatus

if TYPE_CHECKING:
    from autoprof.perf.threads import ThreadLaunch
    from autoprof.run.regions import Relay


@dataclass(frozen=True)
class Task:
    """One (run, repeat) of the plan."""

    run: int
    repeat: int
    events: tuple[Event, ...]


@dataclass(frozen=True)
class TaskEvent:
    """What the runner tells its listener (`Runner.on_event`) about a task, as it happens:
    one of the four kinds below, each with what that kind knows."""

    task: Task


@dataclass(frozen=True)
class TaskSkipped(TaskEvent):
    """Finished in an earlier run of the profile (the journal says so): not run again."""


@dataclass(frozen=True)
class TaskStarted(TaskEvent):
    """Its first attempt begins."""


@dataclass(frozen=True)
class TaskRetried(TaskEvent):
    """An attempt failed (`record`: its last part) and the task runs again (--retries)."""

    record: RunRecord


@dataclass(frozen=True)
class TaskEnded(TaskEvent):
    """Its last attempt ended (`record`: its last part), well or not."""

    record: RunRecord


Listener = Callable[[TaskEvent], None]


def perf_argv(
    folder: Path, events: list[Event], command: list[str], options: ProfileOptions, perf: str
) -> list[str]:
    """The argv of a run's perf (run with LC_ALL=C): attached to the running target, or, for a
    profile of a command, `perf stat` and its options, which `perf.launch` completes with the
    workload's pid and perf's control pipe (`dry_run` shows them as $WORKLOAD, $CTL, $ACK)."""
    if options.attached:
        return attach.perf_argv(folder, perf_event_args(list(events)), options, perf)
    return perf_command.stat_argv(
        perf_event_args(list(events)),
        [],
        str(folder / outdir.PERF_OUTPUT),
        interval_ms=options.interval_ms,
        system_wide=options.system_wide,
        cpu_list=options.cpu_list,
        no_merge=any(e.pmu.startswith("uncore_") for e in events),
        perf=perf,
    )


def perf_env(env: dict[str, str], record: RunRecord) -> dict[str, str]:
    """perf's environment, with the run's nonce: what `stop_leftovers` knows it by."""
    return env | {process.NONCE_VAR: record.perf_nonce or ""}


def counts_workload(options: ProfileOptions) -> bool:
    """perf attaches to the workload (`-p`); a system-wide profile of a command counts CPUs."""
    return not (options.system_wide or options.cpu_list)


class Runner:
    """Runs tasks of one profile; `on_event(TaskEvent)` reports progress; `env`: the
    variables a job sets for its workload (`perf.process.workload_env`)."""

    def __init__(
        self,
        out: Path,
        command: list[str],
        options: ProfileOptions,
        on_event: Listener | None = None,
        env: dict[str, str] | None = None,
    ):
        self.out = out
        self.command = command
        self.options = options
        self.on_event = on_event or (lambda _: None)
        self.perf = perf_command.perf_path()
        self.env = workload_env()  # perf's
        # the command's own, as under bare perf, with a job's variables (never perf's)
        self.command_env = command_env() | dict(env or {})
        self.stopper = Stopper()
        self.journal = Journal(out)
        self.markers_seen = False  # --region: a marker reached the relay in some run
        # --per-thread: a perf per thread of the command (`perf.threads`); --pin, --core-type
        self._launcher = Launch
        if options.per_thread:
            from autoprof.perf.threads import ThreadLaunch  # only then (~2 ms of a start)

            self._launcher = ThreadLaunch
        self.cpus = None if options.attached else pinning.workload_cpus(options)
        # the command's program, found on its PATH once (not at every run)
        self.program = None if options.attached else resolve(command[0], self.command_env)
        self._lock: int | None = None  # the lock file, while `run_all` holds it

    def run_all(self, todo: Iterable[Task]) -> list[RunRecord]:
        """Run every task not finished yet; stop early on fail_fast, or on Ctrl-C, SIGTERM or
        SIGHUP (Interrupted, after stopping the run in progress: perf and its workload).

        Holds an exclusive lock on out/ meanwhile: two profiles never write one folder.
        """
        lock = owned.open_file(self.out / outdir.LOCK, os.O_RDWR | os.O_CREAT)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise AutoprofError(f"another profile is running in {self.out}/") from None
            stop_leftovers(self.out)  # the lock was free: whoever held it is dead
            spool.clear(self.out)
            self._lock = lock
            self._note(None)  # the note's room, taken now: a full disk stops no run midway
            with self.stopper:
                try:
                    return self._run_all(todo)
                finally:
                    self.journal.synced()
                    spool.clear(self.out)  # empty, and no process holds them (`settle`)
        finally:
            self._lock = None
            os.close(lock)

    def _note_running(self, record: RunRecord) -> None:
        """Name the run's processes in the lock file, for `stop_leftovers` (a runner used
        without `run_all`, holding no lock, names them nowhere)."""
        self._note(
            outdir.Running(
                record.folder_name,
                record.perf_pid,
                record.workload_pid,
                record.workload_start,
                record.perf_nonce,
            )
        )

    def _note(self, running: outdir.Running | None) -> None:
        if self._lock is not None:
            try:
                outdir.note_running(self._lock, running)
            except OSError as err:  # a full disk: the lock file's name, not none
                raise OSError(err.errno, err.strerror, str(self.out / outdir.LOCK)) from None

    def _journal(self, records: list[RunRecord]) -> None:
        """Append the entry now: a crashed or killed profiler keeps it (a signal waits for it)."""
        with self.stopper.deferred():
            self.journal.append(Entry.of(records))

    def _run_all(self, todo: Iterable[Task]) -> list[RunRecord]:
        records: list[RunRecord] = []
        done = set() if self.options.force else finished(self.out)
        for task in todo:
            if (task.run, task.repeat) in done:
                self.on_event(TaskSkipped(task))
                continue
            self.on_event(TaskStarted(task))
            parts = self.run_task(task)
            self._journal(parts)
            for attempt in range(2, self.options.retries + 2):
                if all(p.status == RunStatus.OK for p in parts) or attach.target_gone(parts):
                    break
                self.on_event(TaskRetried(task, parts[-1]))
                parts = self.run_task(task, attempt)
                self._journal(parts)
            records += parts
            self.on_event(TaskEnded(task, parts[-1]))
            self._check_markers(parts)
            if attach.target_gone(parts):
                break  # nothing left to attach to: the other runs are missing (resume them)
            if self.options.fail_fast and any(p.status == RunStatus.WORKLOAD_FAILED for p in parts):
                break
        return records

    def _check_markers(self, parts: list[RunRecord]) -> None:
        """--region with a program that passed no marker in a run that ended well: stop now
        (the run is kept), not after the whole plan."""
        ended_well = all(p.status == RunStatus.OK for p in parts)
        if self.options.regions and not self.markers_seen and ended_well:
            raise AutoprofError(
                f"--region: {self.command[0]} passed no region marker in run "
                f"{parts[-1].run} (build it with autoprof.h, or use autoprof.markers, and "
                "run it directly, not through a launcher that drops AUTOPROF_MARKERS)"
            )

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
            if record.status == RunStatus.PERF_FAILED and failure and culprit is not None:
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

    def _fresh_folder(self, task: Task, part: int) -> Path:
        """The run's folder, made empty."""
        folder = outdir.run_dir(self.out, task.run, task.repeat, part)
        try:  # one system call a run where two or three would look first
            folder.mkdir(owned.FOLDER_MODE)
        except FileExistsError:  # left by a run that never ended: made anew
            shutil.rmtree(folder)
            folder.mkdir(owned.FOLDER_MODE)
        except FileNotFoundError:  # the first run: runs/ is made now
            folder.parent.mkdir(owned.FOLDER_MODE, exist_ok=True)
            folder.mkdir(owned.FOLDER_MODE)
        return folder

    def _invoke(self, task: Task, events: list[Event], part: int) -> tuple[RunRecord, str]:
        """Run perf once; the record (its processes noted in the lock file as they start, so
        that `stop_leftovers` can find them; the caller writes the record) and perf's stderr."""
        folder = self._fresh_folder(task, part)
        argv = perf_argv(folder, events, self.command, self.options, self.perf)
        record = RunRecord(
            run=task.run,
            repeat=task.repeat,
            part=part,
            perf_argv=argv,
            events=[
                EventRef(e.name, e.pmu, e.spec, attach.label(e.label, self.options)) for e in events
            ],
            start=now_iso(),
            perf_nonce=os.urandom(16).hex(),  # secrets.token_hex's, without its import
        )
        started = time.monotonic()
        code: int | None
        with spool.outputs(self.out, folder) as (out, err):  # stdout.txt, stderr.txt if written
            if self.options.attached:
                code = self._attached(record, folder, argv, out, err, started)
                workload = None
            else:
                code, workload = self._launched(record, folder, argv, out, err, started)
        record.end, record.elapsed_s = now_iso(), round(time.monotonic() - started, 6)
        record.perf_exit = code
        try:
            stderr = (folder / outdir.STDERR).read_text(errors="replace")
        except FileNotFoundError:  # mostly: nothing was written to it
            stderr = ""
        if record.status:
            pass
        elif self.options.attached:
            assert code is not None  # an attached run's perf always started
            failure = perf_command.open_failure(stderr)
            attach.classify(record, code, outcome.counted(folder), failure, stderr, self.options)
        else:
            outcome.classify(record, code, workload, stderr, folder)
        return record, stderr

    def _launched(
        self, record: RunRecord, folder: Path, argv: list[str], out, err, started: float
    ) -> tuple[int | None, int | None]:
        """A run of the command (`perf.launch`): (perf's exit code, the workload's end)."""
        launch: Launch | None = None
        relay: Relay | None = None
        if self.options.regions:
            from autoprof.run.regions import Relay  # --region only (~2 ms of every start)

            relay = Relay(list(self.options.regions))
        env = self.command_env | (relay.env if relay else {})
        timeout = self.options.timeout
        deadline = None if timeout is None else started + timeout
        try:
            # a signal meanwhile is raised when both pids are known (at the section's end,
            # inside this try: the run is then stopped and recorded as interrupted)
            with self.stopper.deferred():
                launch = self._launcher.spawn(
                    self.command,
                    env=env,
                    stdout=out,
                    stderr=err,
                    cpus=self.cpus,
                    pass_fds=relay.pass_fds if relay else (),
                    program=self.program,
                )
                if relay:
                    relay.spawned()
                record.cpus = None if self.cpus is None else sorted(self.cpus)
                # noted at once: a profiler killed now leaves a workload to stop
                record.workload_pid, record.workload_start = launch.pid, start_time(launch.pid)
                self._note_running(record)
                record.perf_argv = launch.start_perf(
                    argv,
                    attach=counts_workload(self.options),
                    env=perf_env(self.env, record),
                    stdout=out,
                    stderr=err,
                )
                record.perf_pid = launch.perf_pid
                self._note_running(record)
            perf_pid = launch.perf_pid
            counting = (lambda: relay.start(perf_pid)) if relay and perf_pid else None
            if launch.release(deadline, counting):
                launch.wait_exit(None if deadline is None else max(deadline - time.monotonic(), 0))
                if relay:
                    self.markers_seen |= relay.finish(folder).markers > 0
            code = launch.finish()
        except subprocess.TimeoutExpired:
            assert launch is not None
            with self.stopper.deferred():  # a signal meanwhile must not cut the stop short
                code = launch.stop()
            record.status = RunStatus.TIMEOUT
            record.error = (
                f"timed out after --timeout {timeout:g} s: perf and the command were stopped"
            )
        except Interrupted as stop:
            if launch is not None:
                record.perf_exit = launch.stop()
                record.workload_exit = launch.workload_status if launch.ran else None
            self._interrupted(record, folder, stop, started)
            raise
        except BaseException:  # e.g. a queue job's timeout, perf not started: stop what runs
            if launch is not None:
                with self.stopper.deferred():
                    launch.stop()
            raise
        finally:
            if relay:
                relay.close()
        workload = launch.workload_status if launch.ran else None
        if self.options.per_thread:
            record.threads = cast("ThreadLaunch", launch).threads
        if record.status == RunStatus.TIMEOUT:
            record.workload_exit = workload
        return code, workload

    def _attached(
        self, record: RunRecord, folder: Path, argv: list[str], out, err, started: float
    ) -> int:
        """A run attached to processes, a cgroup or the system: perf's exit code."""
        proc: subprocess.Popen | None = None
        try:
            with self.stopper.deferred():  # a signal now is raised once perf's pid is known
                proc = process.start_perf(argv, out, err, perf_env(self.env, record))
                record.perf_pid = proc.pid
                self._note_running(record)
            return proc.wait(timeout=self.options.timeout)
        except subprocess.TimeoutExpired:
            assert proc is not None
            with self.stopper.deferred():  # a signal meanwhile must not cut the stop short
                code = stop_group(proc)
            record.status = RunStatus.TIMEOUT
            record.error = (
                f"timed out after --timeout {self.options.timeout:g} s: perf and its target "
                "were stopped"
            )
            return code
        except Interrupted as stop:
            if proc is not None:
                record.perf_exit = stop_group(proc)
            self._interrupted(record, folder, stop, started)
            raise
        except BaseException:  # e.g. a queue job's timeout raised in this process
            if proc is not None:
                with self.stopper.deferred():
                    stop_group(proc)
            raise

    @staticmethod
    def _interrupted(record: RunRecord, folder: Path, stop: Interrupted, started: float) -> None:
        record.status = RunStatus.INTERRUPTED
        record.error = f"interrupted by {stop.name}"
        record.end, record.elapsed_s = now_iso(), round(time.monotonic() - started, 6)
        outdir.write_run_record(folder, record)


def _event_named(events: list[Event], name: str) -> Event | None:
    """The event perf named in its error: by its exact text first, then by perf's shortened
    form of a long one (a miss would lose the whole run, the events perf could count too)."""
    exact = next((e for e in events if name in (e.spec, e.label, e.name)), None)
    if exact is not None:
        return exact
    texts = ((e, (e.spec, e.label, e.name)) for e in events)
    return next((e for e, t in texts if any(perf_command.shown_as(name, x) for x in t if x)), None)


def stop_leftovers(root: Path) -> list[int]:
    """Kill what a dead profiler left running under `root`: perf (and its workload) of the run
    each profile folder's lock file names, unless that run has its final record. Returns the
    pids of the perfs stopped."""
    left = outdir.left_running(root)
    perfs = [(r.perf_pid, r.perf_nonce) for r in left if r.perf_pid and r.perf_nonce]
    workloads = [(r.workload_pid, r.workload_start) for r in left if r.workload_pid]
    return process.stop_leftovers(perfs, [(p, s) for p, s in workloads if s is not None])
