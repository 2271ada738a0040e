"""The options of a profile: what `autoprof profile`, the queue's job spec and the runner
share."""

from __future__ import annotations

from dataclasses import dataclass


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
