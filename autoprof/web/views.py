"""What the pages show, read from the store: plain data (dicts and lists), the same for the HTML
pages and the JSON API.

A run may hold millions of rows, so nothing here ships rows: the event table is aggregated in
SQL per series, a chart's series is summed per interval and cut to a chart's width with LTTB.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, case, func, select

from autoprof.errors import AutoprofError
from autoprof.results.sanity_report import Report
from autoprof.run.options import ProfileOptions
from autoprof.store import queries
from autoprof.store.models import Measurement, Run, RunPart, Series
from autoprof.store.summary import CHART_POINTS, Line, timelines
from autoprof.util.clock import naive_now

PER_PAGE = 50


@dataclass
class RunFilters:
    """The runs list's filters, as the page's form and the API's query string give them."""

    text: str = ""
    machine: str = ""
    tag: str = ""  # KEY=VALUE
    since: str = ""  # ISO date or 7d
    until: str = ""  # ISO date (exclusive)

    def query(self) -> queries.RunFilter:
        """The store's filter these form fields ask for."""
        now = naive_now()
        tags = None
        if self.tag.strip():
            key, sep, value = self.tag.strip().partition("=")
            if not sep:
                raise AutoprofError(f"tag filter {self.tag!r}: expected KEY=VALUE")
            tags = {key.strip(): value.strip()}
        return queries.RunFilter(
            text=self.text.strip() or None,
            machine=self.machine.strip() or None,
            tags=tags,
            since=queries.parse_since(self.since, now) if self.since.strip() else None,
            until=queries.parse_since(self.until, now) if self.until.strip() else None,
        )


def _stored_report(data: dict | None) -> Report | None:
    """A part's report as the store holds it (any format up to this code's), or None."""
    return Report.from_json(data, "a stored run's report.json") if data else None


def _sanity_flags(report: dict | None) -> dict[str, int]:
    """How many events (or runs) each sanity list of a report names; empty lists left out."""
    read = _stored_report(report)
    return read.flags() if read else {}


def runs_page(conn: Connection, filters: RunFilters, page: int = 1, per_page: int = PER_PAGE):
    """One page of the runs list, newest first, with each run's events and sanity flags."""
    where = filters.query()
    total = queries.count_runs(conn, where)
    pages = max(1, math.ceil(total / per_page))
    page = min(max(1, page), pages)
    runs = queries.list_runs(
        conn, where, newest_first=True, offset=(page - 1) * per_page, limit=per_page
    )
    reports: dict[str, list[Report]] = {}
    if runs:
        for uuid, report in conn.execute(
            select(Run.uuid, RunPart.report)
            .join(RunPart, RunPart.run_id == Run.id)
            .where(Run.uuid.in_([r.uuid for r in runs]))
        ):
            reports.setdefault(uuid, []).append(_stored_report(report) or Report())
    items = []
    for run in runs:
        parts = reports.get(run.uuid, [])
        flags: dict[str, int] = {}
        for report in parts:
            for key, count in report.flags().items():
                flags[key] = flags.get(key, 0) + count
        item = asdict(run)
        item["created"] = run.created.isoformat(sep=" ", timespec="seconds")
        item["events"] = sum(r.events_measured for r in parts)
        item["sanity"] = flags
        items.append(item)
    return {"total": total, "page": page, "pages": pages, "per_page": per_page, "runs": items}


def _part_ids(conn: Connection, uuid: str) -> list[int]:
    return list(
        conn.scalars(select(RunPart.id).join(Run).where(Run.uuid == uuid).order_by(RunPart.id))
    )


def _frame(rows: Sequence, columns: list[str]) -> pd.DataFrame:
    """Fetched rows -> a frame, column by column (building it from Row objects costs seconds
    for a few hundred thousand rows)."""
    values = list(zip(*rows, strict=True)) if rows else [()] * len(columns)
    return pd.DataFrame({name: list(v) for name, v in zip(columns, values, strict=True)})


def _series_table(conn: Connection, part_ids: list[int]) -> pd.DataFrame:
    rows = conn.execute(
        select(
            Series.part_id,
            Series.number,
            Series.event_name,
            Series.pmu,
            Series.plan_run,
            Series.repeat,
            Series.value_unit,
        ).where(Series.part_id.in_(part_ids))
    ).all()
    return _frame(rows, ["part_id", "number", "event", "pmu", "run", "repeat", "unit"])


def event_table(conn: Connection, uuid: str) -> list[dict[str, Any]]:
    """Per event: PMU, unit, plan runs, repeats and locations (CPUs/boxes), from the series
    alone: a page opens without reading the measurements. Totals come with the run's stats
    (`store.summary`), which the page loads next."""
    series = _series_table(conn, _part_ids(conn, uuid))
    if series.empty:
        return []
    series["event"] = series["event"].fillna("")
    by_event = series.groupby("event", sort=True)
    table = pd.DataFrame(
        {
            "pmu": by_event["pmu"].first(),
            "unit": by_event["unit"].first(),
            "runs": by_event["run"].nunique(),
            "repeats": by_event["repeat"].nunique(),
            "series": by_event.size(),
        }
    ).reset_index()
    return [_plain(row) for row in table.to_dict(orient="records")]


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """JSON-safe values: numpy scalars to Python, NaN to None."""
    out = {}
    for key, value in row.items():
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, float) and math.isnan(value):
            value = None
        out[key] = value
    return out


def _numbers(conn: Connection, query) -> np.ndarray:
    """A query of numeric columns as one float array (NULL -> NaN), fetched from the driver's
    cursor: SQLAlchemy's Row objects cost seconds for a million values."""
    rows = conn.execute(query).cursor.fetchall()
    return np.array(rows, dtype=np.float64).reshape(len(rows), -1)


def event_series(
    conn: Connection, uuid: str, event: str, points: int = CHART_POINTS
) -> dict[str, Any]:
    """An event's count per interval (summed over CPUs/boxes), one line per (run, repeat), each
    cut to `points` with LTTB; and a histogram of all its interval counts. Summed in SQL: what
    the page asks for first (CHART_POINTS) comes from the run's stored summary instead."""
    series = _series_table(conn, _part_ids(conn, uuid))
    chosen = series[series["event"] == event]
    if chosen.empty:
        raise AutoprofError(f"no event {event!r} in run {uuid}")
    # one line per (run, repeat): its series (CPUs/boxes) are summed per interval in SQL, so
    # a million rows come back as one row per interval
    chosen = chosen.assign(line=chosen.groupby(["run", "repeat"], dropna=False).ngroup())
    pieces = []
    for part_id, of_part in chosen.groupby("part_id"):
        line = case(
            dict(zip(of_part["number"].tolist(), of_part["line"].tolist(), strict=True)),
            value=Measurement.series,
        )
        pieces.append(
            _numbers(
                conn,
                select(
                    line,
                    Measurement.interval_index,
                    func.max(Measurement.time),
                    func.sum(Measurement.sample_value),
                )
                .where(
                    Measurement.part_id == int(part_id),
                    Measurement.series.in_([int(n) for n in of_part["number"]]),
                )
                .group_by(line, Measurement.interval_index),
            )
        )
    per_interval = pd.DataFrame(np.concatenate(pieces), columns=["line", "index", "time", "value"])
    # the parts of a split run hold different plan runs: a line never spans two parts
    per_interval = per_interval.sort_values(["line", "index"], kind="stable")
    names = chosen.drop_duplicates("line").set_index("line")
    lines = []
    for number, line in per_interval.groupby("line"):
        run, repeat = names.loc[int(number), ["run", "repeat"]]
        time = line["time"].to_numpy(np.float64, na_value=np.nan)
        value = line["value"].to_numpy(np.float64, na_value=np.nan)
        # an infinite count (stored before upload refused them) is no count
        value = np.where(np.isinf(value), np.nan, value)
        lines.append(Line(run, repeat, time, value))
    unit = chosen["unit"].dropna().iloc[0] if chosen["unit"].notna().any() else None
    return timelines([(event, unit, lines)], points)[event]


def run_overview(conn: Connection, ident: str) -> dict[str, Any]:
    """Facts, plan, options, tags and the sanity report of a run (parts merged for display)."""
    details = queries.run_details(conn, ident)
    uuid = details["id"]
    manifests = conn.scalars(select(RunPart.manifest).join(Run).where(Run.uuid == uuid)).all()
    plan = manifests[0].get("plan", {}) if manifests else {}
    for key in ("created", "started", "ended"):
        if details[key] is not None:
            details[key] = details[key].isoformat(sep=" ", timespec="seconds")
    for part in details["parts"]:
        part["uploaded"] = part["uploaded"].isoformat(sep=" ", timespec="seconds")
        report = _stored_report(part["report"])
        part["report"] = report.to_json() if report else None  # the current format, for display
        part["sanity"] = report.flags() if report else {}
        part["flags"] = _flags(part["options"])
    details["plan"] = {"runs": len(plan.get("runs", [])), "lower_bound": plan.get("lower_bound")}
    details["plan_runs"] = [
        [e.get("name") for e in run.get("events", [])] for run in plan.get("runs", [])
    ]
    details["command_line"] = conn.scalar(select(Run.command_line).where(Run.uuid == uuid))
    return details


def _flags(recorded: Any) -> str:
    """A part's options as their flags; a stored record autoprof would not have written (a
    value of the wrong type) as its JSON."""
    options = ProfileOptions.from_json(recorded) if isinstance(recorded, dict) else None
    if options is None or options.problem() is not None:
        return json.dumps(recorded)
    return options.as_flags()


def run_machine(conn: Connection, uuid: str) -> dict[str, Any]:
    """The machine facts the run's first part recorded (its manifest's, topology and slots
    included): what its metrics' constants come from."""
    manifests = conn.scalars(
        select(RunPart.manifest).join(Run).where(Run.uuid == uuid).order_by(RunPart.part)
    ).all()
    machine = manifests[0].get("machine") if manifests else None
    return machine if isinstance(machine, dict) else {}


def event_usage(conn: Connection) -> dict[str, int]:
    """How many stored run parts measured each event: the new-measurement page lists the most
    used events first."""
    return {
        str(name): n
        for name, n in conn.execute(
            select(Series.event_name, func.count(func.distinct(Series.part_id))).group_by(
                Series.event_name
            )
        ).all()
    }
