"""What a results file holds, and what in it not to trust: a per-event table and a summary.

The per-event table has one row per event: where it was counted, how many samples gave a
number, its total, and how much it varies over the intervals. The summary adds the events the
sanity report (`report.json`, written by `aggregate` beside results.csv) flags as multiplexed,
not counted, idle in some intervals or not supported; without a report, the same lists are
derived from the STATUS column and the summary says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from autoprof.analysis import data
from autoprof.analysis.tables import Table
from autoprof.results.sanity_report import Report, uncounted_kind
from autoprof.util.status import RowStatus

SANITY_KINDS = ("multiplexed", "not_counted", "idle_intervals", "not_supported")


@dataclass
class Summary:
    """`metrics`: (name, value) pairs; `sanity`: rows of kind, event, detail; `source`: where
    the sanity lists came from."""

    metrics: list[tuple[str, object]]
    sanity: pd.DataFrame
    source: str
    warnings: list[str] = field(default_factory=list)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.metrics, columns=["metric", "value"])


# what each column of the per-event table is, said under its tables (issue #41: "Total" was the
# mean over repeats, "mean" divided by one count of intervals and "samples" showed another)
COLUMNS_NOTE = (
    "total per execution: the mean over the executions (runs and repeats) of each one's count; "
    "mean per interval: over the counted intervals of all executions (total x executions = "
    "mean x intervals); cv: std / mean over those intervals; unit: perf's (none: a count)"
)


def event_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per event, by label: pmu, unit, runs, repeats, rows, samples (rows with a
    number), no_value (rows without), intervals (the counted intervals of all executions),
    total (the mean over executions of each one's total), mean and cv over those intervals,
    all_zero, min_percent_running (see COLUMNS_NOTE)."""
    by_event = frame.groupby(data.EVENT, observed=True)
    facts = pd.DataFrame(
        {
            "pmu": by_event["PMU"].first(),
            "unit": by_event["VALUE_UNIT"].first(),
            "rows": by_event.size(),
            "samples": by_event["SAMPLE_VALUE"].count(),
            "min_percent_running": by_event["PERCENT_RUNNING"].min(),
            "absmax": frame["SAMPLE_VALUE"].abs().groupby(frame[data.EVENT], observed=True).max(),
        }
    )
    return event_table_of(facts, data.per_interval(frame))


def event_table_of(facts: pd.DataFrame, intervals: pd.DataFrame) -> pd.DataFrame:
    """`event_table` from what it needs of the rows: per event label (the index, in label
    order) its pmu, rows, samples, min_percent_running and absmax (largest |count|); and the
    per-interval view (`data.per_interval`). A store builds both a chunk of rows at a time."""
    by_event = intervals.groupby(data.EVENT, observed=True)
    table = facts[["pmu"]].copy()
    table["unit"] = facts["unit"]
    table["runs"] = by_event["RUN"].nunique()
    table["repeats"] = by_event["REPEAT"].nunique()
    table["rows"] = facts["rows"]
    table["samples"] = facts["samples"]
    sums = by_event["SUM"]  # one interval of one execution: its count over CPUs and boxes
    table["intervals"] = sums.count()
    table["min_percent_running"] = facts["min_percent_running"]
    table["no_value"] = table["rows"] - table["samples"]
    table["total"] = data.run_totals(intervals).groupby(data.EVENT, observed=True)["TOTAL"].mean()
    table["mean"] = sums.mean()
    table["cv"] = (sums.std(ddof=0) / table["mean"].abs().replace(0, np.nan)).fillna(0.0)
    table["all_zero"] = (facts["absmax"] == 0).reindex(table.index, fill_value=False)
    table.index = table.index.astype(str)
    table.index.name = "event"
    columns = ["pmu", "unit", "runs", "repeats", "rows", "samples", "no_value", "intervals"]
    return table[[*columns, "total", "mean", "cv", "all_zero", "min_percent_running"]]


def sanity_from_status(frame: pd.DataFrame) -> pd.DataFrame:
    """The sanity lists derived from results.csv alone (when no report.json sits beside it):
    the same four kinds as the report, by event, with a short detail."""
    rows: list[dict[str, str]] = []
    if frame["STATUS"].isna().all():  # an autoperf file: no status to judge by
        return pd.DataFrame(rows, columns=["kind", "event", "detail"])
    status = frame["STATUS"].astype("string").fillna(RowStatus.OK)  # categories lack OK
    for event, group in frame[status == RowStatus.MULTIPLEXED].groupby(data.EVENT, observed=True):
        low = group["PERCENT_RUNNING"].min()
        rows.append({"kind": "multiplexed", "event": event, "detail": f"min {low:.1f}% running"})
    for event, group in frame[status == RowStatus.NOT_SUPPORTED].groupby(data.EVENT, observed=True):
        rows.append({"kind": "not_supported", "event": event, "detail": f"{len(group)} rows"})
    supported = frame[status != RowStatus.NOT_SUPPORTED]
    per_run = (
        supported.assign(counted=supported["SAMPLE_VALUE"].notna())
        .groupby([data.EVENT, "RUN", "REPEAT"], observed=True)["counted"]
        .agg(["sum", "size"])
    )
    for (event, run, repeat), (counted, size) in per_run.iterrows():
        kind = uncounted_kind(size - counted, size)
        if kind is None:
            continue
        rows.append(
            {
                "kind": kind,
                "event": event,
                "detail": f"run {run} repeat {repeat}: {size - counted} of {size} rows no value",
            }
        )
    return pd.DataFrame(rows, columns=["kind", "event", "detail"])


def sanity_from_report(report: Report) -> pd.DataFrame:
    """The sanity lists of a `report.json`, flattened to kind, event, detail rows."""
    rows: list[dict[str, str]] = []
    for kind in SANITY_KINDS:
        for item in getattr(report.events, kind):
            rows.append({"kind": kind, "event": item.event, "detail": _detail(item)})
    return pd.DataFrame(rows, columns=["kind", "event", "detail"])


def _detail(item) -> str:
    """One sanity item in words: an uncounted event's intervals over the runs they add up (one
    interval count over several repeats, said so), the other fields as name=value."""
    fields = {k: v for k, v in item.to_json().items() if k != "event" and v not in (None, [])}
    runs = fields.pop("runs", [])
    if "of" in fields:
        over = f" of {len(runs)} runs together" if len(runs) > 1 else ""
        said = [f"uncounted in {fields.pop('intervals')} of {fields.pop('of')} intervals{over}"]
    else:
        said = []
    said += [f"{k}={v}" for k, v in fields.items()]
    if runs:
        said.append(" ".join(map(str, runs[:3])) + (f" +{len(runs) - 3}" if len(runs) > 3 else ""))
    return ", ".join(said)


def summarize(frame: pd.DataFrame, table: pd.DataFrame, report: Report | None) -> Summary:
    """Key numbers of a results file and its sanity lists (from `report` when given)."""
    if report is not None:
        sanity, source = sanity_from_report(report), "report.json"
    else:
        sanity, source = sanity_from_status(frame), "STATUS column of results.csv (no report.json)"
    measured = int((table["samples"] > 0).sum())
    metrics: list[tuple[str, object]] = [
        ("rows", len(frame)),
        ("events", len(table)),
        ("events measured (at least one value)", measured),
        ("events with no value", int((table["samples"] == 0).sum())),
        ("all-zero events", int(table["all_zero"].sum())),
        ("runs", int(frame["RUN"].nunique())),
        ("repeats", int(frame["REPEAT"].nunique())),
        ("intervals (max per run)", int(frame["INDEX"].max()) + 1),
        ("samples per event (median)", float(table["samples"].median())),
        ("samples per event (min)", int(table["samples"].min())),
    ]
    for kind in SANITY_KINDS:
        count = sanity.loc[sanity["kind"] == kind, "event"].nunique()
        metrics.append((f"{kind.replace('_', ' ')} events", int(count)))
    warnings = []
    if report is not None:
        for key, items in report.runs.lists():
            if items:
                metrics.append((f"runs {key}", len(items)))
                warnings.append(f"{len(items)} run(s) {key}: see report.json")
        if report.broken_files:
            metrics.append(("broken files", len(report.broken_files)))
            warnings.append(f"{len(report.broken_files)} broken perf output file(s)")
    return Summary(metrics, sanity, source, warnings)


def top(table: pd.DataFrame, column: str, k: int) -> pd.DataFrame:
    """The k events with the largest `column` (total or cv), ignoring events with no value."""
    ranked = table[table["samples"] > 0].sort_values(column, ascending=False, kind="stable")
    shown = ranked.head(k)[["pmu", "unit", "total", "mean", "cv", "intervals"]]
    return shown.rename(columns=SHOWN_AS)


# the headers of the terminal's tables (the CSVs keep the short names)
SHOWN_AS = {"total": "total per execution", "mean": "mean per interval"}


@dataclass
class Stats:
    """`stats`'s result for the renderers: the per-event table and the summary of results file
    `name`; a terminal shows the top `top` events."""

    name: str
    events: pd.DataFrame
    summary: Summary
    top: int = 10
    # the whole program and its regions (`data.region_totals`), or its threads
    # (`data.thread_totals`), side by side
    sides: pd.DataFrame = field(default_factory=pd.DataFrame)

    FIGURES: ClassVar[tuple[str, ...]] = ()

    def tables(self) -> list[Table]:
        found = [
            Table("stats", self.events, index="event"),
            Table("stats_summary", self.summary.table()),
            Table("stats_sanity", self.summary.sanity),
        ]
        if len(self.sides):
            found.append(Table(self._sides_name, self.sides, index="event"))
        return found

    @property
    def _sides_name(self) -> str:
        return "stats_regions" if data.WHOLE_PROGRAM in self.sides.columns else "stats_threads"

    def shown(self) -> list[Table]:
        k = self.top
        found = [Table("stats_summary", self.summary.table(), self.name)]
        if len(self.summary.sanity):
            found.append(
                Table(
                    "stats_sanity", self.summary.sanity.head(3 * k), "Events not to trust blindly"
                )
            )
        for column, what in (("total", "total count"), ("cv", "variability (cv)")):
            title = f"Top {k} events by {what}"
            found.append(Table(f"stats_top_{column}", top(self.events, column, k), title, "event"))
        if len(self.sides):
            what = "Regions" if self._sides_name == "stats_regions" else "Threads"
            title = f"{what} side by side (total per execution)"
            found.append(Table(self._sides_name, self.sides.head(3 * k), title, "event"))
        return found

    def notes(self) -> list[str]:
        return [
            COLUMNS_NOTE,
            f"sanity lists from the {self.summary.source}",
            *(f"warning: {w}" for w in self.summary.warnings),
        ]


def analyse(
    frame: pd.DataFrame,
    report: Report | None,
    name: str = "",
    k: int = 10,
    sides: pd.DataFrame | None = None,
) -> Stats:
    """The per-event table and summary of a loaded results frame (and its report.json);
    `sides`: the whole program and its regions, or its threads, side by side."""
    table = event_table(frame)
    shown = pd.DataFrame() if sides is None else sides
    return Stats(name, table, summarize(frame, table, report), k, shown)
