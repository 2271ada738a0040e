"""The status vocabularies, defined once: what perf said about a count, how a run ended, and
what a results row holds.

They are `StrEnum`s, so a member *is* its text: results.csv, run.json, record.json and
memory.json hold exactly the strings they held before, a status read back from a file compares
equal to its member, and json/pyarrow/pandas serialise a member as its value. Numpy columns
hold a member's `code`, its position in the declaration.
"""

from __future__ import annotations

from enum import StrEnum


class _Coded(StrEnum):
    @property
    def code(self) -> int:
        """The member's position in its declaration: the int8 code numpy columns hold."""
        return list(type(self)).index(self)


class CountState(_Coded):
    """The STATE column of parsed perf stat output: what perf printed for a count."""

    COUNTED = "counted"
    NOT_COUNTED = "not counted"  # perf printed <not counted>
    NOT_SUPPORTED = "not supported"  # perf printed <not supported>


class RunStatus(_Coded):
    """How one run of a workload under perf (or valgrind) ended: RunRecord.status,
    RecordInfo.status (flame), MemoryProfile.status."""

    OK = "ok"  # perf and the workload both exited 0
    WORKLOAD_FAILED = "workload-failed"  # the workload exited non-zero (its counts are kept)
    PERF_FAILED = "perf-failed"  # perf could not count (its stderr says why)
    TIMEOUT = "timeout"  # killed after --timeout
    INTERRUPTED = "interrupted"  # Ctrl-C or a signal; partial output kept, run not finished
    TARGET_EXITED = "target-exited"  # attached: the process exited mid-run; not finished
    CRASHED = "crashed"  # memory: the workload was killed by a signal under valgrind


# a run that ended so is done: resume skips it, aggregate counts it
FINAL_RUN_STATUSES = frozenset(
    {RunStatus.OK, RunStatus.WORKLOAD_FAILED, RunStatus.PERF_FAILED, RunStatus.TIMEOUT}
)


class RowStatus(_Coded):
    """The STATUS column of results.csv."""

    OK = "ok"  # counted all the time
    MULTIPLEXED = "multiplexed"  # counted part of the time, value scaled by perf
    NOT_COUNTED = "not counted"  # perf printed <not counted>
    NOT_SUPPORTED = "not supported"  # perf printed <not supported>
