"""`autoprof record`: preflight, `perf record` into an output folder, and a record of how.

Layout of the folder::

    OUT/perf.data      perf's samples (read by `autoprof flamegraph OUT`)
    OUT/record.json    RecordInfo: the command, perf's argv, times, exit status, preflight
    OUT/stderr.txt     perf's messages (and the workload's standard error)
"""

from __future__ import annotations

import json
import shutil
import signal
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from autoprof import __version__
from autoprof.catalog import host, machine
from autoprof.errors import AutoprofError
from autoprof.perf.record import (
    PERF_DATA,
    RECORD_INFO,
    RecordOptions,
    perf_error_line,
    record_argv,
    run_record,
    wrote_data,
)
from autoprof.run import preflight
from autoprof.util.records import file_format, known_fields, write_json
from autoprof.util.status import RunStatus

STDERR = "stderr.txt"


@dataclass
class RecordInfo:
    """record.json: how a recording was made and how it ended."""

    FORMAT: ClassVar[int] = 1

    command: list[str]
    perf_argv: list[str]
    options: dict
    autoprof_version: str = __version__
    start: str = ""
    end: str = ""
    elapsed_s: float = 0.0
    perf_exit: int | None = None
    status: str = ""  # RunStatus OK, WORKLOAD_FAILED (samples kept) or PERF_FAILED
    error: str | None = None
    findings: list[str] = field(default_factory=list)
    # the signal that ended the recording: SIGINT for Ctrl-C and --duration, SIGTERM, SIGHUP
    stopped_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"format": self.FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any], path: object = RECORD_INFO) -> RecordInfo:
        """NewerFormat for a newer file; unknown keys ignored, missing ones defaulted."""
        file_format(data, cls.FORMAT, path)
        return cls(**known_fields(cls, data))


def read_info(folder: Path) -> RecordInfo:
    """The RecordInfo of an `autoprof record` folder (OSError, ValueError, TypeError when it
    has no readable record.json)."""
    path = folder / RECORD_INFO
    return RecordInfo.from_json(json.loads(path.read_text()), path)


def record(
    options: RecordOptions, out: Path, command: list[str], env: dict[str, str] | None = None
) -> RecordInfo:
    """Sample `command` (or the process / whole system of `options`) into `out`. The events are
    checked as a profile's are (`host.resolve_events`), and perf gets what they resolve to;
    `env`: variables a job sets for its workload."""
    if options.events:
        chosen = host.resolve_events(host.build_catalog(), options.events)
        options = replace(options, events=[e.spec for e in chosen.events])
    limit = machine.max_sample_rate()
    if limit is not None and options.frequency > limit:
        raise AutoprofError(
            f"-F {options.frequency} is above this kernel's limit of {limit} samples a second "
            f"(/proc/sys/kernel/perf_event_max_sample_rate; perf would quietly sample at "
            f"{limit}): give -F {limit} or less, or raise the limit as root"
        )
    # perf samples kernel frames whenever allowed; preflight says when they will be missing
    findings = preflight.check(system_wide=options.system_wide, kernel=True, counters=False)
    preflight.fail_on_fatal(findings)
    if command and shutil.which(command[0]) is None:  # as `profile` says it, before perf does
        raise AutoprofError(f"command not found: {command[0]}")
    out.mkdir(parents=True, exist_ok=True)
    argv = record_argv(options, out / PERF_DATA, command)
    info = RecordInfo(command, argv, asdict(options), findings=[str(f) for f in findings])
    started = datetime.now(UTC)
    info.start = started.isoformat()
    write_json(out / RECORD_INFO, info.to_json())
    result = run_record(argv, out / STDERR, options.duration, env)
    ended = datetime.now(UTC)
    info.end, info.elapsed_s = ended.isoformat(), (ended - started).total_seconds()
    info.perf_exit = result.exit_code
    if result.stopped_by is not None:
        info.stopped_by = signal.Signals(result.stopped_by).name
    wrote = wrote_data(result.stderr)
    # a PID or the whole system is sampled until stopped: being stopped is its normal end
    until_stopped = not command and result.stopped_by is not None
    if wrote:
        info.status = (
            RunStatus.OK if result.exit_code == 0 or until_stopped else RunStatus.WORKLOAD_FAILED
        )
    else:
        info.status, info.error = RunStatus.PERF_FAILED, perf_error_line(result.stderr)
    write_json(out / RECORD_INFO, info.to_json())
    if not wrote:
        raise AutoprofError(f"perf record failed: {info.error} (see {out / STDERR})")
    return info
