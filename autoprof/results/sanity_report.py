"""`OUT/report.json`, the sanity report of an aggregation, as typed records.

`aggregate` builds a `Report` (see `autoprof.results.tally`); the uploader, the store's readers and
the analyses read one back with `read_report` / `Report.from_json`, never by string keys. The
file carries its `format`: a file without one is format 1 (written before formats were
recorded) and is upgraded as it is read; a newer format is refused with one line, since its
fields may mean what this code cannot know.

Records are read field by field: keys this code does not know are ignored and missing ones take
their defaults, so a report survives fields being added or dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import Field, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from autoprof.errors import AutoprofError
from autoprof.run import outdir
from autoprof.util import records
from autoprof.util.records import file_format, known_fields

FORMAT = 2  # the report.json format this code writes and reads up to

# an event counted in some intervals of a run but not in others, or in none at all
KIND_NOT_COUNTED = "not_counted"
KIND_IDLE_INTERVALS = "idle_intervals"


def uncounted_kind(uncounted: int, of: int) -> str | None:
    """Which sanity list an event belongs to in one run, from how many of its `of` intervals
    (or rows) had no count: none -> counted (None), all -> not counted, some -> idle intervals.
    The one rule shared by the report and by analyses of a results file without one."""
    if uncounted <= 0:
        return None
    return KIND_NOT_COUNTED if uncounted >= of else KIND_IDLE_INTERVALS


class _Record:
    """A flat record: JSON is its fields; reading takes the known keys and defaults the rest."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # subclasses are dataclasses

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Any:
        return cls(**known_fields(cls, data))


def _list(cls: Callable[[dict[str, Any]], Any], items: Any) -> list:
    return [cls(item) for item in items or []]


@dataclass
class RunId(_Record):
    """A planned (run, repeat) that never finished."""

    run: int = 0
    repeat: int = 1


@dataclass
class FailedRun(_Record):
    """A run that finished badly: its counts are kept, its status says why they may be off."""

    run: int = 0
    repeat: int = 1
    status: str = ""
    workload_exit: int | None = None
    error: str | None = None


@dataclass
class BrokenRun(_Record):
    """A run that finished, but whose perf output holds no count: unreadable, missing, or no
    line of it perf's (its problems are in `broken_files`)."""

    run: int = 0
    repeat: int = 1
    reason: str = ""


@dataclass
class RetriedRun(_Record):
    """A run that finished on a later attempt (`profile --retries`)."""

    run: int = 0
    repeat: int = 1
    attempt: int = 1


@dataclass
class RunsSummary(_Record):
    """The runs of the profile: expected (None without a manifest; a part of a split profile
    expects only its share), finished (failed or not), ok (finished, not failed, and their
    output read), and the lists behind the numbers."""

    expected: int | None = None
    finished: int = 0
    ok: int = 0
    failed: list[FailedRun] = field(default_factory=list)
    missing: list[RunId] = field(default_factory=list)
    retried: list[RetriedRun] = field(default_factory=list)
    broken: list[BrokenRun] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunsSummary:
        known = known_fields(cls, data)
        known["failed"] = _list(FailedRun.from_json, known.get("failed"))
        known["broken"] = _list(BrokenRun.from_json, known.get("broken"))
        known["missing"] = _list(RunId.from_json, known.get("missing"))
        known["retried"] = _list(RetriedRun.from_json, known.get("retried"))
        return cls(**known)

    def lists(self) -> list[tuple[str, list]]:
        """The runs not to trust, by what went wrong."""
        return [("failed", self.failed), ("broken", self.broken), ("missing", self.missing)]


@dataclass
class Multiplexed(_Record):
    """An event that shared its counter: perf scaled its counts up from a part of the time."""

    event: str = ""
    pmu: str | None = None
    min_percent_running: float = 0.0
    rows: int = 0


@dataclass
class Uncounted(_Record):
    """An event perf printed `<not counted>` (or nothing) for in `intervals` of `of` intervals
    of the `runs` named (run folder names)."""

    event: str = ""
    pmu: str | None = None
    intervals: int = 0
    of: int = 0
    runs: list[str] = field(default_factory=list)


@dataclass
class NotSupported(_Record):
    """An event perf refused, with perf's reason."""

    event: str = ""
    pmu: str | None = None
    reason: str = ""


@dataclass
class Modifier(_Record):
    """An event perf counted with a modifier it added (`task-clock:u` in a rootless container:
    user space only); the rows carry the planned event's name."""

    event: str = ""
    pmu: str | None = None
    printed: str = ""
    modifier: str = ""


@dataclass
class CounterShortfall(_Record):
    """A PMU whose events came back multiplexed or not counted though the plan gave each a
    counter of its own: the machine schedules fewer counters than the plan assumed (a wrong
    --counters or model table, a watchdog or another profile holding counters)."""

    pmu: str = ""
    planned: int = 0  # the most events the plan put on its generic counters in one run
    events: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"{self.pmu}: {len(self.events)} events multiplexed or not counted though the plan "
            f"gave each a counter ({self.planned} a run): the counter number is wrong for this "
            "machine"
        )


@dataclass
class EventIssues(_Record):
    """The events not to trust blindly, one list per kind."""

    multiplexed: list[Multiplexed] = field(default_factory=list)
    not_counted: list[Uncounted] = field(default_factory=list)
    idle_intervals: list[Uncounted] = field(default_factory=list)
    not_supported: list[NotSupported] = field(default_factory=list)
    modifiers: list[Modifier] = field(default_factory=list)
    # PMUs with fewer counters than the plan assumed (their events are in the lists above)
    too_few_counters: list[CounterShortfall] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EventIssues:
        known = known_fields(cls, data)
        return cls(
            multiplexed=_list(Multiplexed.from_json, known.get("multiplexed")),
            not_counted=_list(Uncounted.from_json, known.get(KIND_NOT_COUNTED)),
            idle_intervals=_list(Uncounted.from_json, known.get(KIND_IDLE_INTERVALS)),
            not_supported=_list(NotSupported.from_json, known.get("not_supported")),
            modifiers=_list(Modifier.from_json, known.get("modifiers")),
            too_few_counters=_list(CounterShortfall.from_json, known.get("too_few_counters")),
        )

    def counts(self) -> dict[str, int]:
        """How many events each non-empty list names, by list name."""
        return {f.name: len(getattr(self, f.name)) for f in fields(self) if getattr(self, f.name)}


@dataclass
class BrokenFile(_Record):
    """A file of the profile folder that could not be read (or a line of it), and why."""

    path: str = ""
    error: str = ""


@dataclass
class RegionSummary(_Record):
    """A named region over the profile (`profile --region`): its entries summed over the runs
    that counted it; `never_entered` for a region asked for by name that no run entered (it
    has no rows: not zeros)."""

    name: str
    entries: int = 0
    runs: int = 0
    never_entered: bool = False


@dataclass
class RegionProblem(_Record):
    """A run whose markers were unbalanced (its region rows are kept, flagged here), or whose
    region counts could not be read or matched (it has none)."""

    run: int
    repeat: int
    problem: str


@dataclass
class Report(_Record):
    """The sanity report of an aggregation: what was measured and what not to trust."""

    autoprof_version: str = ""  # the autoprof that aggregated
    profile_id: str | None = None
    results: str = ""  # the results file the rows went to
    rows: int = 0  # rows written to it
    # sha256 of the bytes written to it (`csvfile.ResultsWriter`): an upload finding the same
    # bytes takes every cell as canonical without reading it as text ("" for none recorded)
    results_sha256: str = ""
    events_measured: int = 0  # events with at least one value counted 100% of the time
    runs: RunsSummary = field(default_factory=RunsSummary)
    events: EventIssues = field(default_factory=EventIssues)
    broken_files: list[BrokenFile] = field(default_factory=list)
    # events with rows that the manifest's plan does not name: left out of results.csv
    unknown_events: list[str] = field(default_factory=list)
    # metric values computed over the results, when a tool added them: shown by `serve`
    metrics: dict[str, Any] | list[dict[str, Any]] | None = None
    regions: list[RegionSummary] = field(default_factory=list)
    region_problems: list[RegionProblem] = field(default_factory=list)
    format: int = FORMAT

    @property
    def usable(self) -> bool:
        """Whether the aggregation saw any counted value; else the profile measured nothing."""
        return self.events_measured > 0 or bool(self.events.multiplexed)

    def summary(self) -> str:
        """One line on the runs and files: why an aggregation gave nothing usable."""
        runs = self.runs
        parts = [
            f"{runs.ok} of {runs.finished if runs.expected is None else runs.expected} runs ok"
        ]
        for name, items in runs.lists():
            if items:
                parts.append(f"{len(items)} {name}")
        if self.broken_files:
            parts.append(f"{len(self.broken_files)} broken files")
        return ", ".join(parts) + f", no counted value (see {outdir.REPORT})"

    def flags(self) -> dict[str, int]:
        """How many events (or runs) each sanity list names; empty lists left out."""
        flags = self.events.counts()
        for name, items in self.runs.lists():
            if items:
                flags[f"runs {name}"] = len(items)
        if self.unknown_events:
            flags["unknown events"] = len(self.unknown_events)
        never = [r for r in self.regions if r.never_entered]
        if never:
            flags["regions never entered"] = len(never)
        if self.region_problems:
            flags["region problems"] = len(self.region_problems)
        return flags

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if self.metrics is None:
            del data["metrics"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], source: object = outdir.REPORT) -> Report:
        """The report of a report.json object written by any autoprof up to this one; `source`
        (the file, or the stored part) names it in the error for a newer format."""
        known_fields(cls, data)  # a JSON object, or TypeError
        found = file_format(data, FORMAT, source)
        for step in range(found, FORMAT):
            data = _UPGRADES[step](data)
        known = known_fields(cls, data)
        known["runs"] = RunsSummary.from_json(known.get("runs") or {})
        known["events"] = EventIssues.from_json(known.get("events") or {})
        known["broken_files"] = _list(BrokenFile.from_json, known.get("broken_files"))
        known["unknown_events"] = [str(n) for n in known.get("unknown_events") or []]
        known["regions"] = _list(RegionSummary.from_json, known.get("regions"))
        known["region_problems"] = _list(RegionProblem.from_json, known.get("region_problems"))
        known["format"] = FORMAT
        return cls(**known)


def not_planned(names: list[str], shown: int = 5) -> str:
    """`events not in the plan: '=cmd|...', 'x'`: each name quoted and escaped by repr (a name
    is untrusted text: no control character reaches the terminal), the first `shown` only."""
    listed = ", ".join(repr(n) for n in names[:shown])
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"{len(names)} events not in the plan: {listed}{more}"


def _upgrade_1(data: dict[str, Any]) -> dict[str, Any]:
    """Format 1 -> 2: format 2 records its format, and always says how many runs were ok
    (format 1 reports written before "ok" existed: finished runs that did not fail)."""
    runs = dict(data.get("runs") or {})
    if "ok" not in runs:
        runs["ok"] = int(runs.get("finished") or 0) - len(runs.get("failed") or [])
    return {**data, "runs": runs, "format": 2}


_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _upgrade_1}


def read_report(path: Path) -> Report:
    """The report.json at `path`; one AutoprofError line when it cannot be read."""
    try:
        data = records.loads(Path(path).read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return Report.from_json(data, path)
    except (OSError, ValueError, TypeError) as err:
        raise AutoprofError(f"{path}: unreadable sanity report ({err})") from None


def write_report(path: Path, report: Report) -> None:
    records.write_json(path, report.to_json())
