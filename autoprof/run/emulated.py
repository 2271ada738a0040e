"""`profile --emulate`: each run of the plan executes the command under the emulator it needs
(`autoprof.emulate`) instead of perf, and keeps what it counted in the run's folder
(`outdir.EmulatedCounts`, emulated.json, beside the emulator's own output), which `aggregate`
reads as it reads perf.csv.

Everything else is the runner's (`Runner`): the journal and resume, the lock file and its note
of the running processes, --retries, --fail-fast, --timeout, signals. Before each emulated run
the command runs once natively (its output discarded, as `bench` does), timed: the emulated
run's wall time over that one is the emulation's slowdown, kept with the counts.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from autoprof import emulate
from autoprof.catalog.model import Event
from autoprof.errors import AutoprofError
from autoprof.perf.process import Interrupted, start_time, stop_group
from autoprof.run import outdir, spool
from autoprof.run.outcome import signal_name
from autoprof.run.outdir import EmulatedCounts, EventRef, RunRecord
from autoprof.run.runner import Runner, Task
from autoprof.util.clock import now_iso
from autoprof.util.status import RunStatus


class EmulatedRunner(Runner):
    """The runner, with each run counted by an emulator (`run_task` splits nothing off: no
    emulator refuses an event it listed)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.engine = emulate.engine_for(self.command)

    def _invoke(self, task: Task, events: list[Event], part: int) -> tuple[RunRecord, str]:
        folder = self._fresh_folder(task, part)
        names = [e.name for e in events]
        argv = self.engine.argv(self.command, names, folder)
        record = RunRecord(
            run=task.run,
            repeat=task.repeat,
            part=part,
            perf_argv=argv,
            events=[EventRef(e.name, e.pmu, e.spec, e.label) for e in events],
            start=now_iso(),
        )
        started = time.monotonic()
        with spool.outputs(self.out, folder) as (out, err):
            native = self._run(record, folder, self.engine.plain(self.command), None, None)
            if record.status:  # the native run timed out: no emulated run
                record.end, record.elapsed_s = now_iso(), round(time.monotonic() - started, 6)
                return record, ""
            native_s = time.monotonic() - started if native == 0 else None
            emulated_start = time.monotonic()
            self.engine.begin(folder)
            code = self._run(record, folder, argv, out, err)
            wall_s = time.monotonic() - emulated_start
        counts = self._counts(folder, names)
        record.end, record.elapsed_s = now_iso(), round(time.monotonic() - started, 6)
        if record.status:
            return record, ""
        record.workload_exit = code
        if isinstance(counts, AutoprofError):
            record.status = RunStatus.PERF_FAILED
            record.error = f"{self.engine.name} counted nothing: {counts}"
            return record, ""
        outdir.write_emulated(folder, EmulatedCounts(self.engine.name, counts, wall_s, native_s))
        if code == 0:
            record.status = RunStatus.OK
        else:
            record.status = RunStatus.WORKLOAD_FAILED
            record.error = (
                f"workload killed by {signal_name(-code)}"
                if code < 0
                else f"workload exited with status {code}"
            )
        return record, ""  # no perf: nothing of perf's to read in its stderr

    def _counts(self, folder: Path, names: list[str]) -> dict[str, float] | AutoprofError:
        try:
            return self.engine.read(folder, names)
        except AutoprofError as err:
            return err

    def _run(
        self, record: RunRecord, folder: Path, argv: list[str], out: int | None, err: int | None
    ) -> int:
        """Run `argv` in a process group of its own (None outputs: discarded) with the
        command's environment, noted in the lock file while it runs; its exit status. A
        timeout stops the group and sets the record's status; a signal stops it and raises."""
        started = time.monotonic()
        proc: subprocess.Popen | None = None
        discard = subprocess.DEVNULL
        try:
            with self.stopper.deferred():  # a signal now is raised once the pid is known
                try:
                    proc = subprocess.Popen(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=discard if out is None else out,
                        stderr=discard if err is None else err,
                        env=self.command_env,
                        start_new_session=True,
                    )
                except OSError as error:
                    raise AutoprofError(f"cannot start {argv[0]}: {error}") from None
                record.workload_pid, record.workload_start = proc.pid, start_time(proc.pid)
                self._note_running(record)
            return proc.wait(timeout=self.options.timeout)
        except subprocess.TimeoutExpired:
            assert proc is not None
            with self.stopper.deferred():
                code = stop_group(proc)
            record.status = RunStatus.TIMEOUT
            record.error = (
                f"timed out after --timeout {self.options.timeout:g} s: the command was stopped"
            )
            return code
        except Interrupted as stop:
            if proc is not None:
                record.workload_exit = stop_group(proc)
            self._interrupted(record, folder, stop, started)
            raise
        except BaseException:  # e.g. a queue job's timeout raised in this process
            if proc is not None:
                with self.stopper.deferred():
                    stop_group(proc)
            raise


def slowdown(out: Path, records: list[RunRecord]) -> float | None:
    """The median over `records` of each emulated run's wall time over its native run's: what
    the emulation cost (None when no run has both)."""
    import statistics

    ratios = []
    for record in records:
        try:
            found = outdir.read_emulated(
                outdir.run_dir(out, record.run, record.repeat, record.part)
            )
        except (OSError, ValueError, TypeError, KeyError, AutoprofError):
            continue
        if found.slowdown is not None:
            ratios.append(found.slowdown)
    return statistics.median(ratios) if ratios else None
