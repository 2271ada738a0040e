"""Metric values from a results file: totals (`metrics.csv`) and per interval
(`metrics_series.csv`), each marked same-run or cross-run, thresholds evaluated, values outside
their physical range flagged.

A metric is `same-run` when one run of the plan counted all its events: its value comes from
counts of one execution of the program. Otherwise it is `cross-run`: each event's count is
its mean over the runs that counted it, and the metric mixes executions (less reliable for
programs that do not repeat exactly). Per-interval values align intervals by index.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from autoprof.analysis import data
from autoprof.analysis.tables import Table
from autoprof.metrics import constants as consts
from autoprof.metrics import events as metric_events
from autoprof.metrics.formula import FormulaError
from autoprof.metrics.model import Metric
from autoprof.metrics.tree import Node, tree_lines
from autoprof.util.status import RowStatus

SAME_RUN = "same-run"
CROSS_RUN = "cross-run"
COLUMNS = [
    "METRIC", "LEVEL", "PARENT", "VALUE", "UNIT", "SCOPE", "RUN", "THRESHOLD", "FLAG",
    "MISSING", "GROUPS", "DESCRIPTION",
]  # fmt: skip


@dataclass
class Counts:
    """The per-interval counts of a results frame, arranged for metric evaluation."""

    intervals: pd.DataFrame
    labels: dict[str, str]  # upper-cased event name -> the results' label
    by_event: dict[str, pd.DataFrame] = field(default_factory=dict)
    durations: pd.Series = field(default_factory=pd.Series)  # seconds per (RUN, REPEAT)
    lengths: pd.DataFrame = field(default_factory=pd.DataFrame)  # interval length (s) per
    # RUN, REPEAT, INDEX
    multiplexed: frozenset[str] = frozenset()  # labels with a multiplexed count somewhere
    # metrics share their events (cycles, instructions): each is reduced once
    _runs: dict[str, frozenset[int]] = field(default_factory=dict, repr=False)
    _reduced: dict[tuple, tuple[float, pd.Series]] = field(default_factory=dict, repr=False)
    _lengths: dict[int | None, pd.DataFrame] = field(default_factory=dict, repr=False)
    _tables: dict[int | None, _Reductions] = field(default_factory=dict, repr=False)
    _seconds: dict[int | None, float] = field(default_factory=dict, repr=False)

    def runs_of(self, label: str) -> frozenset[int]:
        """The runs that counted the event `label`."""
        if label not in self._runs:
            self._runs[label] = frozenset(self.by_event[label]["RUN"].unique())
        return self._runs[label]

    def reduced(self, label: str, run: int | None, column: str) -> tuple[float, pd.Series]:
        """(its total: the mean over (run, repeat) of each one's SUM, or MAX of VALUES; its mean
        per interval INDEX) of the event `label`, in `run` alone unless None."""
        key = (label, run, column)
        if key not in self._reduced:
            if run not in self._tables:
                frame = (
                    self.intervals if run is None else self.intervals[self.intervals["RUN"] == run]
                )
                self._tables[run] = _Reductions.of(frame)
            self._reduced[key] = self._tables[run].of_event(label, column)
        return self._reduced[key]

    def seconds(self, run: int | None) -> float:
        """The mean duration (s) of a (run, repeat), of `run` alone unless None."""
        if run not in self._seconds:
            durations = self.durations if run is None else self.durations.loc[[run]]
            self._seconds[run] = float(durations.mean())
        return self._seconds[run]

    def interval_lengths(self, run: int | None) -> pd.DataFrame:
        """The mean LENGTH and TIME of each interval INDEX, in `run` alone unless None."""
        if run not in self._lengths:
            lengths = self.lengths if run is None else self.lengths[self.lengths["RUN"] == run]
            self._lengths[run] = lengths.groupby("INDEX")[["LENGTH", "TIME"]].mean()
        return self._lengths[run]

    @classmethod
    def of(cls, frame: pd.DataFrame) -> Counts:
        intervals = data.per_interval(frame)
        labels = {str(c).upper(): str(c) for c in intervals[data.EVENT].cat.categories}
        by_event = {str(k): g for k, g in intervals.groupby(data.EVENT, observed=True)}
        times = intervals.groupby(["RUN", "REPEAT", "INDEX"], observed=True)["TIME"].max()
        times = times.reset_index().sort_values(["RUN", "REPEAT", "INDEX"])
        times["LENGTH"] = times.groupby(["RUN", "REPEAT"])["TIME"].diff().fillna(times["TIME"])
        durations = times.groupby(["RUN", "REPEAT"])["TIME"].max()
        shared = frame["PERCENT_RUNNING"] < 100 if "PERCENT_RUNNING" in frame else None
        if "STATUS" in frame:
            status = frame["STATUS"].astype("string") == RowStatus.MULTIPLEXED
            shared = status if shared is None else shared | status
        multiplexed = (
            frozenset()
            if shared is None
            else frozenset(
                str(e) for e in frame.loc[shared.fillna(False).to_numpy(bool), data.EVENT].unique()
            )
        )
        return cls(intervals, labels, by_event, durations, times, multiplexed)


COUNTED = ["SUM", "MEAN", "VALUES"]  # the per-interval columns a metric reads


@dataclass
class _Reductions:
    """Every event's reductions of one set of intervals, from three groupbys over all events at
    once (one per event, metric by metric, was most of a metric set's evaluation): the same
    values, as each event's rows are the same rows in the same order."""

    events: dict[str, tuple[int, int, int, int]]  # label -> its rows in `runs`, in `indexes`
    runs: pd.DataFrame  # per (EVENT, RUN, REPEAT): SUM and MEAN summed, VALUES' max
    indexes: pd.DataFrame  # per (EVENT, INDEX): the mean of SUM, MEAN and VALUES

    @classmethod
    def of(cls, frame: pd.DataFrame) -> _Reductions:
        keys = [data.EVENT, "RUN", "REPEAT"]
        by_run = frame.groupby(keys, observed=True)
        runs = by_run[["SUM", "MEAN"]].sum(min_count=1)
        runs["VALUES"] = by_run["VALUES"].max()
        indexes = frame.groupby([data.EVENT, "INDEX"], observed=True)[COUNTED].mean()
        spans = [_spans(table.index.get_level_values(0)) for table in (runs, indexes)]
        events = {e: (*spans[0][e], *spans[1][e]) for e in spans[0]}
        return cls(events, runs, indexes)

    def of_event(self, label: str, column: str) -> tuple[float, pd.Series]:
        """`Counts.reduced` of `label`: its total is pandas' mean (NaN skipped) of its rows."""
        start, stop, first, last = self.events[label]
        totals = self.runs[column].to_numpy(np.float64)[start:stop]
        counted = ~np.isnan(totals)
        with np.errstate(invalid="ignore", divide="ignore"):  # none counted: NaN, as pandas
            total = float(np.where(counted, totals, 0.0).sum() / counted.sum())
        rows = self.indexes.iloc[first:last]
        index = pd.Index(rows.index.get_level_values("INDEX"), name="INDEX")
        return total, pd.Series(rows[column].to_numpy(), index=index, name=column)


def _spans(events: pd.Index) -> dict[str, tuple[int, int]]:
    """label -> (first, end) of its run of rows in `events` (grouped, so each label's rows are
    together)."""
    labels = events.astype(str).to_numpy()
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    ends = np.r_[starts[1:], len(labels)]
    return {str(labels[a]): (int(a), int(b)) for a, b in zip(starts, ends, strict=True)}


@dataclass
class Value:
    metric: Metric
    value: float = math.nan
    scope: str = ""
    run: int | None = None
    missing: list[str] = field(default_factory=list)
    series: pd.Series | None = None  # per interval INDEX
    times: np.ndarray | None = None  # the intervals' mean TIME (s)
    crossed: bool | None = None
    read: frozenset[str] = frozenset()  # the aliases the formula read
    multiplexed: bool = False  # an input count was multiplexed (perf scaled it)
    percore: bool = False  # reads an EVENT:percore (a core's sum over SMT threads) per thread

    @property
    def flag(self) -> str:
        v = self.value
        if self.missing:
            return ""
        if math.isnan(v):
            return "undefined (0/0)"
        if math.isinf(v):
            return "infinite (division by zero)"
        flags = ["multiplexed input"] if self.multiplexed else []
        if self.percore:
            flags.append(":percore event read per thread")
        if self.metric.percent and not -1e-9 <= v <= 100 + 1e-9:
            flags.append("outside 0-100%")
        elif v < 0:
            flags.append("negative")
        return "; ".join(flags)


def _inputs(metric: Metric, counts: Counts, constants: dict, retire: dict) -> tuple:
    """(alias -> (label, factor, column), alias -> constant value, missing reasons): the
    column of the per-interval counts an alias reads, SUM over the CPUs/boxes, their MEAN
    (``:one_unit``) or how many gave a value (perf's ``source_count``)."""
    known = consts.for_metric(metric.constants, constants)  # retire latencies join them
    read = metric.formula.needed(known)
    missing = [
        f"constant {c} (give --set {shlex.quote(c + '=VALUE')})"
        for a, c in metric.constants.items()
        if a in read and a not in known and c not in (consts.DURATION_MS, consts.DURATION_S)
    ]
    labels = {}
    for alias in sorted(read & set(metric.events)):
        text = metric.events[alias]
        base, mods = metric_events.split(text)
        if any(m.lower() == "retire_latency" for m in mods):
            if base.upper() in retire:
                known[alias] = retire[base.upper()]
            else:
                missing.append(f"{text}: retire latency (needs perf record sampling)")
            continue
        name, factor, use_mean = metric_events.result_name(text)
        column = "VALUES" if metric_events.counted(text) else "MEAN" if use_mean else "SUM"
        # a name on two PMUs (hybrid cores) is labelled pmu/name in the results
        label = counts.labels.get(f"{metric.pmu}/{name}".upper()) or counts.labels.get(name.upper())
        if label is None:
            missing.append(f"{text}: not in the results")
        else:
            labels[alias] = (label, factor, column)
    return labels, known, missing


def evaluate(metric: Metric, counts: Counts, constants: dict, retire: dict) -> Value:
    """One metric's total and per-interval value."""
    labels, known, missing = _inputs(metric, counts, constants, retire)
    read = metric.formula.needed(consts.for_metric(metric.constants, constants))
    result = Value(metric, missing=missing, read=read)
    if missing:
        return result
    result.multiplexed = any(label in counts.multiplexed for label, _, _ in labels.values())
    result.percore = any(":percore" in metric.events[a].lower() for a in labels)
    common = (
        frozenset.intersection(*(counts.runs_of(label) for label, _, _ in labels.values()))
        if labels
        else frozenset()
    )
    result.run = int(min(common)) if common else None
    result.scope = SAME_RUN if common or not labels else CROSS_RUN
    total, per_interval = {}, {}
    for alias, (label, factor, column) in labels.items():
        run_total, by_index = counts.reduced(label, result.run, column)
        total[alias] = run_total * factor
        per_interval[alias] = (by_index, factor)
    try:
        seconds = counts.seconds(result.run)
        values = {**consts.for_metric(metric.constants, consts.with_duration(constants, seconds))}
        values.update(known)
        result.value = float(metric.formula({**values, **total})) * metric.scale
        index = pd.Index(
            sorted(set().union(*(s.index for s, _ in per_interval.values()))), name="INDEX"
        )
        series_values = {a: _at(s, index) * factor for a, (s, factor) in per_interval.items()}
        lengths = counts.interval_lengths(result.run)
        length = _at(lengths["LENGTH"], index)
        result.times = _at(lengths["TIME"], index)
        timed = {**constants, consts.DURATION_MS: length * 1000, consts.DURATION_S: length}
        every = {**consts.for_metric(metric.constants, timed), **known}
        result.series = pd.Series(
            np.broadcast_to(metric.formula({**every, **series_values}), (len(index),))
            * metric.scale,
            index=index,
        )
    except FormulaError as err:
        result.missing.append(str(err))
    return result


def _at(series: pd.Series, index: pd.Index) -> np.ndarray:
    """The values of `series` at `index` (NaN where it has none); most metrics read events of
    one run, all on the same intervals: no reindex then."""
    return series.to_numpy() if series.index.equals(index) else series.reindex(index).to_numpy()


def thresholds(values: dict[str, Value]) -> None:
    """Set `crossed` of each value whose metric has a threshold (None when a metric it reads
    has no value)."""
    for item in values.values():
        metric = item.metric
        if metric.threshold is None:
            continue
        refs = {
            a: values[m].value if m in values else math.nan
            for a, m in metric.threshold_metrics.items()
        }
        if any(math.isnan(v) for v in refs.values()):
            continue
        item.crossed = bool(metric.threshold(refs))


def compute(
    frame: pd.DataFrame, metrics: list[Metric], constants: dict, retire: dict | None = None
) -> dict[str, Value]:
    counts = Counts.of(frame)
    values = {m.name: evaluate(m, counts, constants, retire or {}) for m in metrics}
    thresholds(values)
    return values


def table(values: dict[str, Value]) -> pd.DataFrame:
    """metrics.csv: one row per metric."""
    rows = [
        {
            "METRIC": name,
            "LEVEL": v.metric.level,
            "PARENT": v.metric.parent or "",
            "VALUE": v.value,
            "UNIT": v.metric.unit,
            "SCOPE": v.scope,
            "RUN": v.run,
            "THRESHOLD": {None: "", True: "crossed", False: "no"}[v.crossed],
            "FLAG": v.flag,
            "MISSING": "; ".join(v.missing),
            "GROUPS": ";".join(v.metric.groups),
            "DESCRIPTION": v.metric.description,
        }
        for name, v in values.items()
    ]
    return pd.DataFrame(rows, columns=COLUMNS).astype({"RUN": "Int64"})


def series(values: dict[str, Value]) -> pd.DataFrame:
    """metrics_series.csv: METRIC, INDEX, TIME, VALUE, SCOPE (long format)."""
    parts = [
        pd.DataFrame(
            {
                "METRIC": name,
                "INDEX": v.series.index,
                "TIME": v.times,
                "VALUE": v.series.to_numpy(),
                "SCOPE": v.scope,
            }
        )
        for name, v in values.items()
        if v.series is not None and len(v.series)
    ]
    if not parts:
        return pd.DataFrame(columns=["METRIC", "INDEX", "TIME", "VALUE", "SCOPE"])
    return pd.concat(parts, ignore_index=True)


# said first where the results count no hardware event (a VM without a PMU): why the tree is
# empty, and what such a profile does answer
NO_HARDWARE = (
    "these results count no hardware event (a machine without a hardware PMU, such as most "
    "cloud VMs, counts none): the {n} metrics of {cpu} read hardware events and cannot be "
    "computed from them; what they answer is their software events, breakpoints, msr and "
    "tracepoints (autoprof analyze stats), or profile on a machine with a PMU"
)


def counted_hardware(frame: pd.DataFrame) -> bool:
    """Whether results hold an event of a hardware PMU (not software, tracepoint, breakpoint
    or msr): without one no CPU metric can be computed."""
    from autoprof.catalog.host import HOST_PMUS

    if "PMU" not in frame.columns:
        return True  # an older results file: nothing to say
    return bool((~frame["PMU"].isin(HOST_PMUS)).any())


@dataclass
class Metrics:
    """The metric values of a results file for the renderers: a terminal shows the top-down
    tree of CPU `cpu` (every node with `show_all`, else only under crossed thresholds; a tree
    without thresholds, perf's AMD and Arm ones, whole) and, unless `tree_only`, the other
    metrics' values, one line each. `refines`: the metric groups under a tree node (Arm's
    methodology); `sources`: where the constants read came from, for the notes."""

    values: dict[str, Value]
    cpu: str = ""
    show_all: bool = False
    refines: dict[str, list[str]] = field(default_factory=dict)
    tree_only: bool = False
    sources: dict[str, str] = field(default_factory=dict)
    hardware: bool = True  # the results hold a hardware event (`counted_hardware`)

    FIGURES: ClassVar[tuple[str, ...]] = ()

    @property
    def done(self) -> list[Value]:
        return [v for v in self.values.values() if not v.missing]

    @property
    def thresholds(self) -> bool:
        """Whether the tree's nodes have thresholds (Intel's TMA) to choose what is shown."""
        return any(v.metric.threshold is not None for v in self.values.values() if v.metric.tma)

    def tables(self) -> list[Table]:
        return [Table("metrics", table(self.values)), Table("metrics_series", series(self.values))]

    def nodes(self) -> list[Node]:
        """The tree: one node per computed tree metric, and under a node each group refining
        it, holding the group's computed metrics."""

        def node(v: Value, name: str, parent: str | None) -> Node:
            m = v.metric
            return Node(name, parent, v.value, m.unit, v.crossed, v.scope, v.flag, m.name)

        done = self.done
        nodes = [node(v, v.metric.name, v.metric.parent) for v in done if v.metric.tma]
        shown = {n.name for n in nodes}
        for parent, groups in self.refines.items():
            for group in groups if parent in shown else ():
                key = f"{parent}/{group}"
                members = [node(v, f"{key}/{v.metric.name}", key) for v in done
                           if group in v.metric.groups]  # fmt: skip
                if members:
                    nodes += [Node(key, parent, math.nan, label=group, group=True), *members]
        return nodes

    def shown(self) -> list[Table | str]:
        lines: list[Table | str] = []
        nodes = self.nodes()
        if nodes:
            tree = tree_lines(nodes, self.show_all, self.thresholds)
            lines += [f"[bold]Top-down tree[/] ({self.cpu})", *tree]
        for v in [] if self.tree_only else self.done:
            if not v.metric.tma:
                flag = f" [red]! {v.flag}[/]" if v.flag else ""
                m = v.metric
                lines.append(f"{m.name:<44} {v.value:>14.6g} {m.unit:<16} {v.scope}{flag}")
        return lines

    def notes(self) -> list[str]:
        done = self.done
        same = sum(v.scope == SAME_RUN for v in done)
        flagged = sum(bool(v.flag) for v in done)
        read = {c for v in done for a, c in v.metric.constants.items() if a in v.read}
        constants = [
            f"{name} from {self.sources[name]}" for name in sorted(read & set(self.sources))
        ]
        no_pmu = [] if self.hardware else [NO_HARDWARE.format(n=len(self.values), cpu=self.cpu)]
        return [
            *no_pmu,
            f"{len(done)} of {len(self.values)} metrics computed ({same} same-run, "
            f"{len(done) - same} cross-run), {flagged} flagged; {len(self.values) - len(done)} "
            "lack events or constants (MISSING in metrics.csv)",
            *([f"constants: {'; '.join(constants)}"] if constants else []),
        ]
