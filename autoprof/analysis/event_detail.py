"""What the program does over time: chosen events plotted against the real time of each interval.

The x axis is perf's TIME column (end of the interval, seconds since the run started), never
an assumed interval rate: the last interval of a run is short and a loaded machine stretches
intervals. Each (run, repeat) an event was measured in is its own line.

autoperf's feature names work too: `AVG.EVENT`, `MAX.EVENT`, `MIN.EVENT`, `STD.EVENT` plot that
statistic over the CPUs/boxes of each interval (`add_features`) instead of the mean.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from autoprof.analysis import data
from autoprof.analysis.tables import Table
from autoprof.errors import AutoprofError

DEFAULT_EVENTS = 6  # with no choice, the most variable events
MAX_EVENTS = 16  # one readable panel each
FEATURES = {"AVG": "mean", "MAX": "max", "MIN": "min", "STD": "std"}  # autoperf's prefixes


@dataclass
class EventDetail:
    """The points to plot (see `timelines`) and how: `shared` axes, `rate`, `log` scale."""

    lines: pd.DataFrame
    events: list[str]
    units: dict[str, str] = field(default_factory=dict)
    shared: bool = False
    rate: bool = False
    log: bool = False

    FIGURES: ClassVar[tuple[str, ...]] = ("event_detail.png", "event_detail.svg")

    def tables(self) -> list[Table]:
        return [Table("event_detail", self.lines)]

    def shown(self) -> list[Table]:
        values = self.lines.groupby(data.EVENT, sort=False)["VALUE"]
        summary = pd.DataFrame(
            {"points": values.count(), "min": values.min(), "mean": values.mean()}
        ).assign(max=values.max())
        summary["unit"] = [self.units.get(e, "") for e in summary.index]
        what = "per second" if self.rate else "per interval, mean over CPUs/boxes"
        return [
            Table("event_detail", summary.loc[self.events], f"Events over time ({what})", "event")
        ]

    def notes(self) -> list[str]:
        return [f"plotted {', '.join(self.events)}"]


def split_feature(name: str, known: set[str]) -> tuple[str | None, str]:
    """(pandas statistic, event) of an autoperf feature name (`MAX.EVENT`); (None, name) for
    a plain event name, which wins when an event itself is called so."""
    prefix, _, event = name.partition(".")
    if name in known or prefix not in FEATURES or event not in known:
        return None, name
    return FEATURES[prefix], event


def add_features(frame: pd.DataFrame, intervals: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """`intervals` plus, for each feature name among `names`, rows labelled with it whose MEAN
    is the feature's statistic over the event's CPUs/boxes in each (run, repeat, interval)."""
    known = set(intervals[data.EVENT].cat.categories)
    extra = []
    for name in names:
        stat, event = split_feature(name, known)
        if stat is None:
            continue
        rows = frame[frame[data.EVENT] == event]
        grouped = rows.groupby(["RUN", "REPEAT", "INDEX"], observed=True)
        feature = grouped.agg(
            TIME=("TIME", "max"),
            MEAN=("SAMPLE_VALUE", stat),
            SUM=("SAMPLE_VALUE", "sum"),
            VALUES=("SAMPLE_VALUE", "count"),
        ).reset_index()
        feature[data.EVENT] = name
        extra.append(feature)
    if not extra:
        return intervals
    combined = pd.concat(
        [intervals.assign(**{data.EVENT: intervals[data.EVENT].astype(str)}), *extra],
        ignore_index=True,
    )
    combined[data.EVENT] = combined[data.EVENT].astype("category")
    return combined


def feature_units(units: dict[str, str], names: list[str]) -> dict[str, str]:
    """`units` (event -> perf's unit) plus each feature name's, its event's unit."""
    known = set(units)
    more = {n: units[split_feature(n, known)[1]] for n in names if split_feature(n, known)[0]}
    return {**units, **more}


def choose(intervals: pd.DataFrame, names: list[str], pattern: str | None) -> list[str]:
    """The events to plot: the named ones and those matching `pattern`; with neither, the
    most variable events (coefficient of variation of the interval series)."""
    known = set(intervals[data.EVENT].cat.categories)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise AutoprofError(f"event(s) not in the results: {', '.join(unknown)}")
    chosen = list(names)
    if pattern:
        matched = data.filter_events(sorted(known), pattern)
        if not matched:
            raise AutoprofError(f"no event matches --events {pattern!r}")
        chosen += [m for m in matched if m not in chosen]
    if not chosen:
        series = data.interval_series(intervals)
        chosen = list(data.variability(series).nlargest(DEFAULT_EVENTS).index)
    if len(chosen) > MAX_EVENTS:
        raise AutoprofError(
            f"{len(chosen)} events chosen; plot at most {MAX_EVENTS} at once (narrow --events)"
        )
    return chosen


def timelines(intervals: pd.DataFrame, events: list[str], rate: bool = False) -> pd.DataFrame:
    """The points to plot: EVENT, RUN, REPEAT, TIME, VALUE (mean over CPUs/boxes per interval;
    with `rate`, divided by the interval's real length in seconds)."""
    rows = intervals[intervals[data.EVENT].isin(events)].sort_values(
        [data.EVENT, "RUN", "REPEAT", "INDEX"]
    )
    out = rows[[data.EVENT, "RUN", "REPEAT", "TIME"]].copy()
    out["VALUE"] = rows["MEAN"]
    if rate:
        previous = rows.groupby([data.EVENT, "RUN", "REPEAT"], observed=True)["TIME"].shift()
        length = rows["TIME"] - previous.fillna(0.0)
        out["VALUE"] = rows["MEAN"] / length.where(length > 0)
    out[data.EVENT] = out[data.EVENT].astype(str)
    return out.reset_index(drop=True)


def value_units(frame: pd.DataFrame) -> dict[str, str]:
    """perf's unit of each event's values (``msec`` for task-clock), when it gave one."""
    units = frame.dropna(subset=["VALUE_UNIT"])
    units = units[units["VALUE_UNIT"] != ""]
    return units.groupby(data.EVENT, observed=True)["VALUE_UNIT"].first().astype(str).to_dict()


def check_plottable(lines: pd.DataFrame, events: list[str]) -> None:
    """Refuse events with no number in any interval: an empty panel looks like a zero count."""
    counted = lines.dropna(subset=["VALUE"])[data.EVENT].unique()
    empty = [e for e in events if e not in set(counted)]
    if empty:
        raise AutoprofError(f"no counted value to plot for: {', '.join(empty)}")
    if not np.isfinite(lines["TIME"]).any():
        raise AutoprofError("the results have no TIME values to plot against")


def analyse(
    frame: pd.DataFrame,
    names: list[str],
    pattern: str | None = None,
    rate: bool = False,
    shared: bool = False,
    log: bool = False,
) -> EventDetail:
    """The timelines of the `names` (autoperf features too) and `pattern`'s events in a loaded
    results frame (with its VALUE_UNIT column), refused when one has nothing to plot."""
    intervals = add_features(frame, data.per_interval(frame), names)
    chosen = choose(intervals, names, pattern)
    lines = timelines(intervals, chosen, rate)
    check_plottable(lines, chosen)
    units = feature_units(value_units(frame), chosen)
    return EventDetail(lines, chosen, units, shared, rate, log)
