"""The sanity report of an aggregation (`OUT/report.json`), gathered run by run.

`aggregate` streams a profile one run at a time; `Tally` keeps, per (event, pmu), only what the
report needs (measured or not, multiplexed minimum, intervals uncounted), never the rows, so a
profile of any size is reported in constant memory per event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autoprof import __version__
from autoprof.results.sanity_report import (
    KIND_IDLE_INTERVALS,
    KIND_NOT_COUNTED,
    BrokenFile,
    CounterShortfall,
    EventIssues,
    Modifier,
    Multiplexed,
    NotSupported,
    Report,
    RunsSummary,
    Uncounted,
    uncounted_kind,
)
from autoprof.run import outdir
from autoprof.util.status import RowStatus

Label = tuple[str, str | None]  # (EVENT_NAME, PMU)
PERF_NOT_SUPPORTED = "perf printed <not supported>"  # the reason when perf gave none


@dataclass
class RunRows:
    """The results rows of one run, column-wise; text columns are codes into small lists."""

    run: int
    repeat: int
    labels: list[Label]  # (EVENT_NAME, PMU) per label code
    label: np.ndarray  # int64 label code per row
    index: np.ndarray  # int64 interval index
    time: np.ndarray  # float64
    cpu: np.ndarray  # int64, -1 where none (socket, core, node alike)
    socket: np.ndarray
    core: np.ndarray
    node: np.ndarray
    units: list[str | None]
    unit: np.ndarray  # int64 code into units (UNIT: box or pmu)
    value: np.ndarray  # float64
    value_units: list[str | None]
    value_unit: np.ndarray  # int64 code into value_units
    percent: np.ndarray  # float64
    status: np.ndarray  # int8 RowStatus codes

    def __len__(self) -> int:
        return len(self.label)


def _key(label: Label) -> tuple:
    """Sort order of pandas' groupby(sort=True, dropna=False): a missing PMU goes last."""
    return (label[0], label[1] is None, label[1] or "")


@dataclass
class Tally:
    """What the report says about the rows seen so far."""

    rows: int = 0
    measured: set[Label] = field(default_factory=set)
    multiplexed: dict[Label, list[float]] = field(default_factory=dict)  # [min percent, rows]
    not_supported: dict[Label, None] = field(default_factory=dict)  # first-seen order
    # (label, run, repeat) -> intervals seen, and those with a <not counted> line (if any)
    intervals: dict[tuple[Label, int, int], int] = field(default_factory=dict)
    idle: dict[tuple[Label, int, int], int] = field(default_factory=dict)

    @property
    def uncounted(self) -> dict[tuple[Label, int, int], tuple[int, int]]:
        """(label, run, repeat) -> (intervals with <not counted>, intervals), where the first
        is > 0."""
        return {key: (n, self.intervals[key]) for key, n in self.idle.items()}

    def add(self, rows: RunRows) -> None:
        status = rows.status
        for code in np.unique(rows.label[status == RowStatus.OK.code]):
            self.measured.add(rows.labels[code])
        mux = status == RowStatus.MULTIPLEXED.code
        if mux.any():
            for code in np.unique(rows.label[mux]):
                these = rows.percent[mux & (rows.label == code)]
                seen = self.multiplexed.setdefault(rows.labels[code], [float("inf"), 0])
                seen[0] = min(seen[0], float(these.min()))
                seen[1] += len(these)
        refused = status == RowStatus.NOT_SUPPORTED.code
        if refused.any():
            codes, first = np.unique(rows.label[refused], return_index=True)
            for code in codes[np.argsort(first)]:
                self.not_supported.setdefault(rows.labels[code], None)
        self._intervals(rows, ~refused)

    def _intervals(self, rows: RunRows, measured: np.ndarray) -> None:
        """Per event of the run: intervals (INDEX) seen, and those with a <not counted> line.
        Added up over the chunks of a run, which hold whole intervals each."""
        if not measured.any():
            return
        idle = measured & (rows.status == RowStatus.NOT_COUNTED.code)
        width = int(rows.index.max()) + 1
        seen = np.unique(rows.label[measured] * width + rows.index[measured])
        of = np.bincount(seen // width, minlength=len(rows.labels))
        none = np.zeros_like(of)
        if idle.any():
            empty = np.unique(rows.label[idle] * width + rows.index[idle])
            none = np.bincount(empty // width, minlength=len(rows.labels))
        for code in np.flatnonzero(of):
            key = (rows.labels[code], rows.run, rows.repeat)
            self.intervals[key] = self.intervals.get(key, 0) + int(of[code])
            if none[code]:
                self.idle[key] = self.idle.get(key, 0) + int(none[code])


def build(
    tally: Tally,
    manifest: outdir.Manifest | None,
    runs: RunsSummary,
    unsupported_reasons: dict[Label, str],
    modifiers: list[Modifier],
    broken: list[BrokenFile],
    results_name: str,
) -> Report:
    """The sanity report of what `tally` saw."""
    multiplexed = sorted(tally.multiplexed.items(), key=lambda i: _key(i[0]))
    not_counted, idle = _counted_in(tally.uncounted)
    failed = {outdir.run_folder_name(f.run, f.repeat) for f in runs.failed}
    short = [(e, p) for (e, p), _ in multiplexed] + [
        (u.event, u.pmu) for u in not_counted if set(u.runs) - failed
    ]
    return Report(
        autoprof_version=__version__,
        profile_id=manifest.id if manifest else None,
        results=results_name,
        rows=tally.rows,
        events_measured=len(tally.measured),
        runs=runs,
        events=EventIssues(
            multiplexed=[Multiplexed(e, p, lo, int(n)) for (e, p), (lo, n) in multiplexed],
            not_counted=not_counted,
            idle_intervals=idle,
            not_supported=[
                NotSupported(e, p, unsupported_reasons.get((e, p)) or PERF_NOT_SUPPORTED)
                for e, p in tally.not_supported
            ],
            modifiers=modifiers,
            too_few_counters=shortfalls(manifest.plan if manifest else None, short),
        ),
        broken_files=broken,
    )


def shortfalls(
    plan: dict[str, Any] | None, events: list[tuple[str, str | None]]
) -> list[CounterShortfall]:
    """The PMUs among `events` (multiplexed, or not counted in a run that did not fail) whose
    plan gave those events generic counters (``gpN``): counted apart, each would have run all
    the time, so the machine had fewer counters than planned."""
    if not plan:
        return []
    placed: dict[tuple[str, str], str | None] = {}
    load: dict[str, int] = {}
    for run in plan.get("runs", []):
        per_pmu: dict[str, int] = {}
        for item in run.get("events", []):
            counter = item.get("counter")
            placed[(item.get("pmu"), item.get("name"))] = counter
            if isinstance(counter, str) and counter.startswith("gp"):
                per_pmu[item["pmu"]] = per_pmu.get(item["pmu"], 0) + 1
        for pmu, n in per_pmu.items():
            load[pmu] = max(load.get(pmu, 0), n)
    found: dict[str, list[str]] = {}
    for event, unit in events:
        where = placed.get((unit or "", event))
        if unit and isinstance(where, str) and where.startswith("gp"):
            names = found.setdefault(unit, [])
            if event not in names:
                names.append(event)
    return [CounterShortfall(pmu, load.get(pmu, 0), names) for pmu, names in sorted(found.items())]


def _counted_in(
    uncounted: dict[tuple[Label, int, int], tuple[int, int]],
) -> tuple[list[Uncounted], list[Uncounted]]:
    """Events counted in no interval of a run (not counted), or in only some (idle intervals).

    An interval is (run, repeat, INDEX); it is uncounted for an event when perf printed
    `<not counted>` for it there (on any CPU or box), or printed no line for the event at all.
    """
    out: dict[str, list[Uncounted]] = {KIND_NOT_COUNTED: [], KIND_IDLE_INTERVALS: []}
    grouped: dict[tuple[str, Label], list[tuple[int, int, int, int]]] = {}
    for (label, run, repeat), (none, of) in uncounted.items():
        kind = uncounted_kind(none, of)
        if kind is not None:
            grouped.setdefault((kind, label), []).append((run, repeat, none, of))
    for (kind, (event, pmu)), items in sorted(grouped.items(), key=lambda i: _key(i[0][1])):
        items.sort()
        out[kind].append(
            Uncounted(
                event,
                pmu,
                intervals=sum(i[2] for i in items),
                of=sum(i[3] for i in items),
                runs=[outdir.run_folder_name(r, k) for r, k, _, _ in items],
            )
        )
    return out[KIND_NOT_COUNTED], out[KIND_IDLE_INTERVALS]
