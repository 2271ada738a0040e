"""Execute a Plan: one `perf stat` per (run, repeat), every raw output kept under out/.

The journal makes a profile resumable: a (run, repeat) whose run.json reached a final status
is never run again (unless forced), so Ctrl-C, a crash or a reboot costs at most the run in
progress. Faults are handled where they happen: an event perf cannot open is split off into a
run of its own (no room: ENOSPC/EBUSY) or recorded as unsupported with perf's reason; a
workload that fails is recorded and the profile goes on (or stops, with fail_fast).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from autoprof import __version__, attach, outdir
from autoprof.catalog.model import Event
from autoprof.errors import AutoprofError
from autoprof.outdir import EventRef, MachineFacts, Manifest, RunRecord
from autoprof.perf import command as perf_command
from autoprof.schedule.plan import Plan, perf_event_args

# perf stat -I exits 0 whatever the workload did (perf 6.1), so the workload runs under a
# shell that writes its exit status to a file (the shell is PIE: it never maps the low
# addresses the breakpoint tests watch, and adds a constant few page faults).
_STATUS_WRAPPER = ["/bin/sh", "-c", '"$@"; s=$?; echo $s > "$0"; exit $s']
STATUS_FILE = "workload.status"
LOCK_FILE = ".lock"
FINAL = {outdir.RUN_OK, outdir.RUN_WORKLOAD_FAILED, outdir.RUN_PERF_FAILED, outdir.RUN_TIMEOUT}
# Options that change what the numbers mean: a resumed profile must keep them.
MEASUREMENT_OPTIONS = ("interval_ms", "system_wide", "cpu_list", "anchor", "duration")


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


class Interrupted(Exception):
    """The user stopped the profile; what finished is kept and a re-run resumes."""


def _now() -> str:
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
        return attach.perf_argv(folder, [e.spec for e in events], options, perf)
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


def manifest_options(options: ProfileOptions) -> dict:
    """The options a manifest records: what the numbers mean and which part this is (a plain
    profile's manifest has no part/parts)."""
    skip = {"force", "fail_fast", "retries"} | ({"part", "parts"} if options.parts == 1 else set())
    if not options.attached:
        skip |= {"pids", "cgroup", "duration"}
    return {k: v for k, v in asdict(options).items() if k not in skip}


def open_profile(
    out: Path,
    command: list[str],
    plan: Plan,
    options: ProfileOptions,
    facts: MachineFacts,
    profile_id: str | None = None,
) -> Manifest:
    """The manifest of `out`: created for a new profile, or the existing one when `out`
    holds this very profile (same command, plan, measurement options and part) to resume.

    `profile_id` names the profile (the parts of a split profile share one); default a new uuid.
    """
    wanted = manifest_options(options)
    path = out / outdir.MANIFEST
    if path.exists():
        try:
            manifest = outdir.read_manifest(out)
        except (ValueError, KeyError, TypeError) as err:
            raise AutoprofError(f"{path} is unreadable ({err}); use another -o") from None
        if manifest.command != command:
            raise AutoprofError(
                f"{out} holds a profile of another command "
                f"({' '.join(manifest.command)}); use another -o"
            )
        if manifest.plan != plan.to_json():
            raise AutoprofError(f"{out} holds a profile with another event plan; use another -o")
        if profile_id is not None and manifest.id != profile_id:
            raise AutoprofError(f"{out} holds another profile ({manifest.id}); use another -o")
        here = (manifest.options.get("part", 1), manifest.options.get("parts", 1))
        if here != (options.part, options.parts):
            raise AutoprofError(
                f"{out} holds part {here[0]} of {here[1]} of this profile, not part "
                f"{options.part} of {options.parts}; use another -o"
            )
        changed = [k for k in MEASUREMENT_OPTIONS if manifest.options.get(k) != wanted.get(k)]
        if changed:
            raise AutoprofError(
                f"{out} was profiled with other {', '.join(changed)}; "
                "use the same options or another -o"
            )
        if manifest.options.get("repeat", 1) < options.repeat:
            manifest.options["repeat"] = options.repeat
            outdir.write_manifest(out, manifest)
        return manifest
    out.mkdir(parents=True, exist_ok=True)
    manifest = Manifest(
        id=profile_id or str(uuid.uuid4()),
        autoprof_version=__version__,
        created=_now(),
        command=list(command),
        machine=facts,
        plan=plan.to_json(),
        options=wanted,
    )
    outdir.write_manifest(out, manifest)
    return manifest


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


def _journal(out: Path, records: list[RunRecord]) -> None:
    last = records[-1]
    status = next((r.status for r in records if r.status != outdir.RUN_OK), outdir.RUN_OK)
    entry = {
        "run": last.run,
        "repeat": last.repeat,
        "status": status,
        "end": last.end,
        "folders": [r.folder_name for r in records],
    }
    with (out / outdir.JOURNAL).open("a") as fh:
        fh.write(json.dumps(entry) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


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

    def run_all(self, todo: list[Task]) -> list[RunRecord]:
        """Run every task not finished yet; stop early on Ctrl-C (Interrupted) or fail_fast.

        Holds an exclusive lock on out/ meanwhile: two profiles never write one folder.
        """
        with (self.out / LOCK_FILE).open("w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise AutoprofError(f"another profile is running in {self.out}/") from None
            stop_leftovers(self.out)  # the lock was free: whoever held it is dead
            # Ctrl-C must stop a profile even when started with SIGINT ignored (as `cmd &`).
            previous = signal.signal(signal.SIGINT, signal.default_int_handler)
            try:
                return self._run_all(todo)
            except KeyboardInterrupt:  # between two runs: nothing is running, nothing to stop
                raise Interrupted from None
            finally:
                signal.signal(signal.SIGINT, previous)

    def _run_all(self, todo: list[Task]) -> list[RunRecord]:
        records: list[RunRecord] = []
        done = set() if self.options.force else finished(self.out)
        for task in todo:
            if (task.run, task.repeat) in done:
                self.on_event("skip", task, None)
                continue
            self.on_event("start", task, None)
            parts = self.run_task(task)
            _journal(self.out, parts)
            for attempt in range(2, self.options.retries + 2):
                if all(p.status == outdir.RUN_OK for p in parts) or attach.target_gone(parts):
                    break
                self.on_event("retry", task, parts[-1])
                parts = self.run_task(task, attempt)
                _journal(self.out, parts)
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
        for old in outdir.part_folders(self.out, task.run, task.repeat):
            if attempt > 1:
                outdir.set_aside(self.out, old, attempt - 1)
            else:
                shutil.rmtree(old)
        pending = [list(task.events)]
        unsupported: list[dict[str, str]] = []
        records: list[RunRecord] = []
        while pending:
            events = pending.pop(0)
            record = self._invoke(task, events, part=len(records) + 1)
            failure = perf_command.open_failure(self._stderr(record))
            culprit = _event_named(events, failure.event) if failure else None
            if record.status == outdir.RUN_PERF_FAILED and culprit is not None:
                rest = [e for e in events if e is not culprit]
                if failure.capacity and rest:
                    pending.append([culprit])  # no room here: count it in a run of its own
                else:
                    unsupported.append(
                        {"name": culprit.name, "pmu": culprit.pmu, "reason": failure.reason}
                    )
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

    def _stderr(self, record: RunRecord) -> str:
        path = self._folder(record) / outdir.STDERR
        return path.read_text(errors="replace") if path.exists() else ""

    def _invoke(self, task: Task, events: list[Event], part: int) -> RunRecord:
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
            start=_now(),
        )
        outdir.write_run_record(folder, record)  # what was attempted, even if we die now
        started = time.monotonic()
        env = dict(os.environ, LC_ALL="C")
        with (folder / outdir.STDOUT).open("wb") as out, (folder / outdir.STDERR).open("wb") as err:
            try:
                proc = subprocess.Popen(
                    argv,
                    stdout=out,
                    stderr=err,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            except OSError as error:
                raise AutoprofError(f"cannot start perf: {error}") from None
            record.perf_pid = proc.pid
            outdir.write_run_record(folder, record)
            try:
                code = proc.wait(timeout=self.options.timeout)
                record.status = ""
            except subprocess.TimeoutExpired:
                code = _stop(proc)
                record.status = outdir.RUN_TIMEOUT
                record.error = f"killed after --timeout {self.options.timeout:g} s"
            except KeyboardInterrupt:
                record.perf_exit = _stop(proc)
                record.status = outdir.RUN_INTERRUPTED
                record.error = "interrupted by the user"
                record.end, record.elapsed_s = _now(), round(time.monotonic() - started, 6)
                outdir.write_run_record(folder, record)
                raise Interrupted from None
            except BaseException:  # e.g. a queue job's timeout raised in this process
                _stop(proc)
                raise
        record.end, record.elapsed_s = _now(), round(time.monotonic() - started, 6)
        record.perf_exit = code
        if not record.status:
            self._classify(
                record,
                code,
                (folder / outdir.STDERR).read_text(errors="replace"),
                folder,
            )
        outdir.write_run_record(folder, record)
        return record

    def _classify(self, record: RunRecord, code: int, stderr: str, folder: Path) -> None:
        """ok / workload-failed / perf-failed from perf's exit code and output and the
        workload's own exit status."""
        output = folder / outdir.PERF_OUTPUT
        counted = output.exists() and any(
            line.strip() and not line.startswith("#") for line in output.read_text().splitlines()
        )
        failure = perf_command.open_failure(stderr)
        if self.options.attached:
            attach.classify(record, code, counted, failure, stderr, self.options)
            return
        status_text = (
            (folder / STATUS_FILE).read_text().strip() if (folder / STATUS_FILE).exists() else ""
        )
        if not status_text.isdigit() or (failure and not counted):
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


def _event_named(events: list[Event], name: str) -> Event | None:
    return next((e for e in events if name in (e.spec, e.label, e.name)), None)


def stop_leftovers(root: Path) -> list[int]:
    """Kill what a dead profiler left running under `root`: perf (and its workload) of every run
    still unfinished in its run.json. Returns the process groups killed.

    perf runs in a session of its own (so that a timeout can stop perf and workload together),
    which also means it outlives a profiler killed with SIGKILL and would disturb whatever is
    measured next. Only a live process named perf that leads its own group is killed.
    """
    killed = []
    for path in sorted(root.glob(f"**/{outdir.RUNS}/run*/{outdir.RUN_RECORD}")):
        try:
            record = outdir.read_run_record(path.parent)
        except (OSError, ValueError, TypeError, KeyError):
            continue
        pid = record.perf_pid
        if record.status or not pid:
            continue
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            if comm == "perf" and os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
                killed.append(pid)
        except (OSError, ProcessLookupError):
            continue  # gone already
    return killed


def _stop(proc: subprocess.Popen) -> int:
    """Stop perf and its workload: SIGINT first (perf then writes its counts), then SIGKILL."""
    for sig, grace in ((signal.SIGINT, 10), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            return proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait()
