"""The job model shared by both backends: a job's typed result, its states, and the interface a
backend (the web's local subprocess queue, RQ) offers.

A job is queued, then running, then ends ONCE in done, failed or stopped: `settle` never lets a
finished state be overwritten (a worker that died after its job failed must not turn it done).
What a job returns travels as JSON (RQ's return value, the local job's result.json) and is read
back with `JobResult.from_json`, whichever backend ran it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autoprof.pipeline.measure import Measured

QUEUED, RUNNING, DONE, FAILED, STOPPED = "queued", "running", "done", "failed", "stopped"
FINISHED = frozenset({DONE, FAILED, STOPPED})


@dataclass(frozen=True)
class JobResult:
    """How a job ended and what it stored."""

    state: str  # done, failed or stopped
    error: str | None = None
    run_id: str | None = None  # the stored run (profile jobs)
    part: int = 1
    parts: int = 1
    rows: int = 0
    complete: bool = False  # every part of the run is stored
    failed_runs: list[str] = field(default_factory=list)  # "run.repeat" of failed runs
    load1: float | None = None  # the 1-minute load average before the profile (workers)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, measured: Measured, **extra: Any) -> JobResult:
        """A measurement that ran and was stored; its failed runs, if any, are the error."""
        stored, failed = measured.stored, measured.failed_runs
        if stored is None:
            raise ValueError("a job's measurement is stored")
        return cls(
            DONE,
            error=f"{len(failed)} run(s) failed" if failed else None,
            run_id=stored.uuid,
            part=stored.part,
            parts=stored.parts,
            rows=stored.rows,
            complete=stored.complete,
            failed_runs=failed,
            warnings=measured.warnings,
            **extra,
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> JobResult:
        """A result as any version wrote it (unknown keys ignored); a result that is not an
        object, or has no final state, reads as failed."""
        if not isinstance(data, dict):
            return cls(FAILED, error="the job left no result")
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if "run" in data and "run_id" not in values:  # results written before JobResult
            values["run_id"] = data["run"]
        if values.get("state") not in FINISHED:
            values["state"] = DONE if values.get("run_id") else FAILED
        return cls(**values)


def settle(current: str, new: str) -> str:
    """The state after `new` is reported for a job in state `current`: a finished job keeps
    its state whatever comes later."""
    return current if current in FINISHED else new
