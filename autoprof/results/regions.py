"""A run's regions (`run.regions.RegionsRecord`) -> its region rows of results.csv. Pure.

The relay read perf's counters raw, in the order perf opened them: the run's events less
those perf printed `<not supported>` for. Each event's region value is scaled as perf scaled
the whole run's: nanoseconds to perf's msec for task-clock and cpu-clock, else by the ratio of
perf's printed total to the raw total read at the workload's end (1 for a count: perf prints
the count itself). A region row is the region's total over the run: INDEX 0, no TIME, the
whole program's UNIT, PERCENT_RUNNING its running over enabled time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autoprof.errors import AutoprofError
from autoprof.perf.counters import Reading
from autoprof.results.sanity_report import RegionProblem, RegionSummary
from autoprof.results.tally import Label, RunRows
from autoprof.run import outdir
from autoprof.run.regions import ALL, RegionsRecord, read_record
from autoprof.util.status import RowStatus

_NS_IN = {"msec": 1e6}  # perf's unit of a time event -> raw nanoseconds in one


@dataclass
class Total:
    """What perf printed for one event over the whole run (summed over intervals)."""

    value: float
    unit: str | None  # UNIT of its rows
    value_unit: str | None
    supported: bool = True


@dataclass
class RegionRows:
    rows: list[dict] = field(default_factory=list)  # results columns per row
    problem: str | None = None  # why this run has no region rows


def region_rows(
    regions: RegionsRecord, record: outdir.RunRecord, totals: dict[Label, Total]
) -> RegionRows:
    """The region rows of one run (see the module's doc)."""
    if regions.error:
        return RegionRows(problem=regions.error)
    refs = list(dict.fromkeys((r.name, r.pmu) for r in record.events))
    opened = [label for label in refs if totals.get(label, Total(0, None, None)).supported]
    if len(opened) != len(regions.total):
        return RegionRows(
            problem=f"{len(regions.total)} counters read for {len(opened)} events perf "
            "opened: region counts cannot be matched to events"
        )
    out = RegionRows()
    for name, region in regions.regions.items():
        for label, reading, end in zip(opened, region.readings, regions.total, strict=True):
            total = totals.get(label) or Total(float(end.value), label[1], None)
            out.rows.append(_row(name, label, reading, end, total, record))
    return out


def _value(reading: Reading, end: Reading, total: Total) -> float:
    """The region's value as perf would print it (see the module's doc)."""
    if total.value_unit in _NS_IN:
        return reading.value / _NS_IN[total.value_unit]
    if not end.value or total.value == end.value:
        return float(reading.value)
    return reading.value * (total.value / end.value)


def _row(
    region: str,
    label: Label,
    reading: Reading,
    end: Reading,
    total: Total,
    record: outdir.RunRecord,
) -> dict:
    value = _value(reading, end, total)
    percent = 100.0 if reading.enabled == 0 else 100.0 * reading.running / reading.enabled
    status = RowStatus.OK if reading.running == reading.enabled else RowStatus.MULTIPLEXED
    return {
        "EVENT_NAME": label[0],
        "INDEX": 0,
        "TIME": None,
        "SOCKET": None,
        "CORE": None,
        "CPU": None,
        "NODE": None,
        "UNIT": total.unit,
        "SAMPLE_VALUE": float(value),
        "RUN": record.run,
        "REPEAT": record.repeat,
        "PMU": label[1],
        "VALUE_UNIT": total.value_unit,
        "PERCENT_RUNNING": round(percent, 2),
        "STATUS": str(status),
        "REGION": region,
    }


def table(rows: list[dict]):
    """Region rows as a pyarrow table of the results columns."""
    import pyarrow as pa

    from autoprof.results import csvfile

    types = csvfile.arrow_types()
    return pa.table(
        {name: pa.array([r[name] for r in rows], types[name]) for name in csvfile.COLUMNS}
    )


def add_totals(totals: dict[Label, Total], rows: RunRows) -> None:
    """Add a chunk of a run's whole-program rows to its per-event totals."""
    if not len(rows):
        return
    counted = np.isin(rows.status, (RowStatus.OK.code, RowStatus.MULTIPLEXED.code))
    refused = rows.status == RowStatus.NOT_SUPPORTED.code
    sums = np.bincount(rows.label[counted], weights=rows.value[counted], minlength=len(rows.labels))
    for code in np.unique(rows.label).tolist():
        label = rows.labels[code]
        first = int(np.flatnonzero(rows.label == code)[0])
        total = totals.setdefault(
            label,
            Total(0.0, rows.units[rows.unit[first]], rows.value_units[rows.value_unit[first]]),
        )
        total.value += float(sums[code])
        if refused[rows.label == code].all():
            total.supported = False


class Regions:
    """The regions of one profile's runs, as `aggregate` meets them: each run's region rows
    (`run`), and what the report says of them (`summaries`)."""

    def __init__(self, out: Path, asked: tuple[str, ...]):
        self.out = out
        self.asked = [a for a in asked if a != ALL]
        self.entries: dict[str, int] = {name: 0 for name in self.asked}
        self.runs: dict[str, int] = {name: 0 for name in self.asked}
        self.problems: list[RegionProblem] = []

    def run(self, record: outdir.RunRecord, totals: dict[Label, Total]) -> Any:
        """The region rows of one run (a pyarrow table), or None when it has none."""
        folder = outdir.run_dir(self.out, record.run, record.repeat, record.part)
        try:
            found = read_record(folder)
        except (AutoprofError, ValueError, TypeError, KeyError) as err:
            self.problems.append(RegionProblem(record.run, record.repeat, f"regions: {err}"))
            return None
        if found is None:
            return None
        for problem in found.problems:
            self.problems.append(RegionProblem(record.run, record.repeat, problem))
        made = region_rows(found, record, totals)
        if made.problem:
            self.problems.append(RegionProblem(record.run, record.repeat, made.problem))
            return None
        for name, region in found.regions.items():
            self.entries[name] = self.entries.get(name, 0) + region.entries
            self.runs[name] = self.runs.get(name, 0) + 1
        return table(made.rows) if made.rows else None

    def summaries(self) -> tuple[list[RegionSummary], list[RegionProblem]]:
        summaries = [
            RegionSummary(name, self.entries[name], self.runs[name], self.runs[name] == 0)
            for name in self.entries
        ]
        return summaries, self.problems
