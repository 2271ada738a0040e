"""One measurement as every entry point asks for it: `Request`.

`autoprof profile`, `autoprof schedule`, `autoprof bench`, a queue job (`queue.spec.JobSpec`
carries one) and the web's form (`web.form.JobRequest`) all end in a Request, and
`run.planning` plans every one of them the one way: so a plan `schedule` prints is the plan
`profile` runs. How each run measures is `ProfileOptions`, which events `EventSelection`: their
fields declare their flags and limits once (`run.options`), for the CLI, the queue and the web.

Imports nothing heavy (the CLI's --help builds its flags from `PLAN_OPTIONS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autoprof.run.options import EventSelection, ProfileOptions
from autoprof.util.declared import Checked

# The ProfileOptions that change a plan (`run.planning`): a profile that is not system-wide
# leaves out the system-wide-only PMUs, --user counts every event in user mode, the anchor joins
# every run, --core-type keeps one core PMU's events; --region adds no run (`schedule` says
# so). `schedule` takes exactly these, so it plans what `profile` runs.
PLAN_OPTIONS = ("system_wide", "cpu_list", "user", "anchor", "core_type", "regions")


@dataclass(frozen=True)
class Request(Checked):
    """What to measure and how, on which machine's catalog."""

    command: list[str] = field(default_factory=list)  # none: a plan only, or an attached profile
    events: list[str] = field(default_factory=list)  # empty: every event of the machine
    # the metrics (names, groups, `all`) whose events to measure instead of `events`; with only
    # `metrics_files`, every metric of those files
    metrics: tuple[str, ...] = ()
    metrics_files: tuple[str, ...] = ()
    consistent: bool = False  # metrics: more runs, so each metric is measured in one run
    options: ProfileOptions = field(default_factory=ProfileOptions)
    selection: EventSelection = field(default_factory=EventSelection)
    events_dir: str | None = None
    cpu: str | None = None  # another machine's catalog (--cpu): planned, never profiled here
    smt: str | None = None
    counters: tuple[str, ...] = ()  # PMU=N where the model table's count is wrong (AMD, Arm)
    probe: bool = True  # this machine's core PMU counters probed (--no-probe: the table's)
    profile_id: str | None = None  # the store's run id (shared by a split profile's parts)
    tags: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # a web job's variables, for its workload

    @property
    def by_metrics(self) -> bool:
        """Measure what metrics need (--metrics, --metrics-file), not events."""
        return bool(self.metrics or self.metrics_files)

    def problem(self) -> str | None:
        """What is wrong with this request, in one line (None when nothing is)."""
        if self.by_metrics and self.events:
            return "give events (-e, --events) or --metrics, not both"
        if self.options.emulate and (self.by_metrics or self.cpu):
            return "--emulate counts the emulator's events: not with --metrics or --cpu"
        if self.options.emulate and not self.command:
            return "--emulate counts a command: give -- COMMAND"
        if self.by_metrics and self.options.user:
            return (
                "--user counts events in user mode: give it with events (-e), not --metrics "
                "(a metric's formula names the modes of its events itself)"
            )
        return self.options.problem() or self.selection.problem()
