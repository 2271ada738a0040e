"""How one run of a command ended: ok, workload-failed or perf-failed, from perf's exit code and
stderr, the counts it wrote and the workload's exit status (attached runs: `attach.classify`)."""

from __future__ import annotations

import signal
from pathlib import Path

from autoprof.perf import command as perf_command
from autoprof.run import outdir
from autoprof.run.outdir import RunRecord
from autoprof.util.status import RunStatus


def classify(
    record: RunRecord, code: int | None, workload: int | None, stderr: str, folder: Path
) -> None:
    """Set the record's status, error and workload exit code from perf's exit `code` and the
    workload's end (`workload`: its exit status, -N when killed by signal N; None when it never
    ran, perf having failed before it could count)."""
    failure = perf_command.open_failure(stderr)
    if workload is None or (failure and not counted(folder)):
        record.status = RunStatus.PERF_FAILED
        record.error = (
            f"perf could not open {failure.event}: {failure.reason}"
            if failure
            else f"perf exited {code} without counting the workload"
        )
        return
    record.workload_exit = workload
    if code != 0:
        record.status = RunStatus.PERF_FAILED
        record.error = f"perf exited {code} while counting the workload"
    elif workload == 0:
        record.status = RunStatus.OK
    elif workload < 0:
        record.status = RunStatus.WORKLOAD_FAILED
        record.error = f"workload killed by {signal_name(-workload)}"
        if -workload == signal.SIGTRAP and any(e.pmu == "breakpoint" for e in record.events):
            record.error += (
                " (a breakpoint trap perf did not claim: is another debugger or profile "
                "using the debug registers? --retries N runs it again)"
            )
    else:
        record.status = RunStatus.WORKLOAD_FAILED
        record.error = f"workload exited with status {workload}"
    if perf_command.switched_off(stderr):
        record.status = RunStatus.PERF_FAILED
        record.error = (
            "perf's counting was switched off while the workload ran (perf printed 'Events "
            "disabled': a `disable` on its control channel, which autoprof never sends); the "
            "intervals after it were not counted"
        )


def counted(folder: Path) -> bool:
    """perf wrote at least one count (not only its header) into the run's output."""
    output = folder / outdir.PERF_OUTPUT
    if not output.exists():
        return False
    with output.open() as fh:
        return any(line.strip() and not line.startswith("#") for line in fh)


def signal_name(number: int) -> str:
    """SIGSEGV for 11; ``signal 40`` for a number the signal module does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
