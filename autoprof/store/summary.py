"""What a run's page shows first, computed once and kept in the store beside the run: per-event
stats and the clustered correlation matrix (`autoprof analyze stats|correlation`), and each
event's timeline (its count per interval, summed over CPUs, one line per run and repeat, cut to
CHART_POINTS with LTTB) with a histogram. Opening a run then reads a few rows, never its
measurements.

A summary is built the first time a run's page asks (`stored`), from one pass over the run's
rows (a one-part run's columns kept at upload, `store.columns`; else its rows, `bulk.read_part`
or `bulk.read_rows`; read a batch ahead in a thread) that keeps only what the analyses need:
per (event, run, repeat, interval) the sum, count and time of the values (`data.per_interval`'s
view, built a chunk at a time), and per event its rows, samples, smallest percent running and
largest count. It is rebuilt when its VERSION is not this code's (bump it whenever what is
computed changes) or when the run gained rows since (a part uploaded later).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, Row, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from autoprof.analysis import correlation, data, stats
from autoprof.analysis.downsample import lttb_many
from autoprof.errors import AutoprofError
from autoprof.store import bulk, columns
from autoprof.store.engine import Store
from autoprof.store.models import RunPart, RunSummary, Series
from autoprof.store.queries import find_run
from autoprof.util.heap import release_free_memory
from autoprof.util.prefetch import prefetched

VERSION = 3  # 2: a run's region rows kept out of the whole program's analysis, and shown apart;
# 3: stats' mean and cv over the counted intervals of all executions, and each event's unit
ANALYSIS = "analysis"  # its "regions": the whole program and each region side by side
TIMELINE = "timeline:"  # + the event's name
CHART_POINTS = 1000  # a chart is about this many pixels wide: more points show nothing more
HISTOGRAM_BINS = 30
HEATMAP_EVENTS = 60  # the most variable events when a run has more
_SAMPLES = ["INDEX", "TIME", "SAMPLE_VALUE", "PERCENT_RUNNING"]  # what a pass reads of a row
_UNSEEN = np.iinfo(np.int64).max
_building: dict[int, threading.Lock] = {}  # run id -> held while its summary is built
_guard = threading.Lock()


def stored(store: Store, ident: str, name: str) -> str | None:
    """The JSON text of summary item `name` (ANALYSIS, or TIMELINE + event name) of the run
    `ident`, built first if it is missing or stale; None when the run has no such item."""
    with store.read() as conn:
        run = find_run(conn, ident)
        found = _read(conn, run, name)
    if found is not None:
        return found or None
    with _guard:
        lock = _building.setdefault(run.id, threading.Lock())
    with lock:  # one build per run at a time; the others wait for it and read it
        with store.read() as conn:
            found = _read(conn, run, name)
            if found is None:
                items = build(conn, run)
                release_free_memory()  # the build's peak, kept by malloc for nothing else
        if found is None:
            with store.write() as conn:
                _save(conn, run, items)
            found = items.get(name, "")
    return found or None


def _read(conn: Connection, run: Row[Any], name: str) -> str | None:
    """The item's text ("" when the current summary has no such item), or None when the run's
    summary is missing or stale."""
    current = conn.execute(
        select(RunSummary.version, RunSummary.rows).where(
            RunSummary.run_id == run.id, RunSummary.name == ANALYSIS
        )
    ).first()
    if current is None or tuple(current) != (VERSION, run.rows):
        return None
    text = conn.scalar(
        select(RunSummary.data).where(RunSummary.run_id == run.id, RunSummary.name == name)
    )
    return text or ""


def _save(conn: Connection, run: Row[Any], items: dict[str, str]) -> None:
    conn.execute(delete(RunSummary).where(RunSummary.run_id == run.id))
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    rows = [
        {"run_id": run.id, "name": name, "version": VERSION, "rows": run.rows, "data": text}
        for name, text in items.items()
    ]
    statement = dialect.insert(RunSummary)
    conn.execute(  # a build racing this one (another server) wrote the same: keep one
        statement.on_conflict_do_update(
            index_elements=["run_id", "name"],
            set_={c: statement.excluded[c] for c in ("version", "rows", "data")},
        ),
        rows,
    )


def build(conn: Connection, run: Row[Any]) -> dict[str, str]:
    """Every summary item of `run` as JSON text, from one pass over its rows."""
    parts = conn.execute(
        select(RunPart.id, RunPart.rows, RunPart.manifest)
        .where(RunPart.run_id == run.id)
        .order_by(RunPart.part)
    ).all()
    lines = _Lines.of(conn, [p.id for p in parts])
    offsets = np.cumsum([0, *(lines.per_part[p.id] for p in parts)])[:-1]
    read = [bulk.Part(p.id, p.rows, int(o)) for p, o in zip(parts, offsets, strict=True) if p.rows]
    pass_ = _Pass(lines)
    if len(read) == 1 and (count := columns.pieces(conn, read[0].id)):  # kept at upload
        tables = columns.read(conn, read[0].id, count)
    elif len(read) == 1:  # rows in any order, each saying its place (seq): no window sorted
        tables = bulk.read_part(conn, read[0], _SAMPLES)
    else:  # several parts: their rows' places are in the order `read_rows` merges them
        tables = bulk.read_rows(conn, read) if read else iter(())
    for table in prefetched(tables, ahead=1):
        pass_.add(table)
    intervals, facts, names = pass_.result()
    del pass_  # its cells, copied into `intervals`: the server's memory peaks below
    analysis = _analysis(intervals, facts)
    per_thread = any((p.manifest or {}).get("options", {}).get("per_thread") for p in parts)
    if lines.regions or per_thread:  # side by side: the whole program and each region, threads
        totals = series_totals(conn, [p.id for p in parts])
        if lines.regions:
            analysis["regions"] = _sides(data.region_totals(totals))
        if per_thread:
            analysis["threads"] = _sides(data.thread_totals(totals))
    items = {ANALYSIS: json.dumps(analysis, default=str)}
    events = _timeline_lines(intervals, names, lines.units)
    # an event no interval counted (not supported, not counted) has an empty timeline
    shown = {event for event, _, _ in events}
    events += [(event, unit, []) for event, unit in lines.units.items() if event not in shown]
    for event, timeline in timelines(events, CHART_POINTS).items():
        items[TIMELINE + event] = json.dumps(timeline)
    return items


@dataclass
class _Lines:
    """The run's series (all parts, numbered one part after the other) mapped to analysis
    lines: a line is an (event name, PMU) pair in one (RUN, REPEAT), both 1 when missing as
    `data.prepare` has them; a series without an event name has none (-1)."""

    line_of: np.ndarray  # series number -> line
    pairs: list[tuple[str, str | None]]  # pair number -> (name, pmu)
    line_pair: np.ndarray  # line -> pair number
    line_run: np.ndarray
    line_repeat: np.ndarray
    units: dict[str, str | None]  # event name -> VALUE_UNIT of its first series
    per_part: dict[int, int] = field(default_factory=dict)  # part id -> its series
    regions: bool = False  # some series count a named region (they have no line)

    @classmethod
    def of(cls, conn: Connection, part_ids: list[int]) -> _Lines:
        found = list(
            conn.execute(
                select(
                    Series.part_id,
                    Series.event_name,
                    Series.pmu,
                    Series.plan_run,
                    Series.repeat,
                    Series.value_unit,
                    Series.region,
                )
                .where(Series.part_id.in_(part_ids))
                .order_by(Series.part_id, Series.number)
            ).all()
        )
        position = {part_id: i for i, part_id in enumerate(part_ids)}
        found.sort(key=lambda row: position[row[0]])
        pairs: dict[tuple[str, str | None], int] = {}
        lines: dict[tuple[int, int, int], int] = {}
        line_of: list[int] = []
        units: dict[str, str | None] = {}
        per_part = dict.fromkeys(part_ids, 0)
        regions = False
        for part_id, name, pmu, run, repeat, unit, region in found:
            per_part[part_id] += 1
            regions = regions or region is not None
            if name is None or region is not None:  # a region's rows are not the program's
                line_of.append(-1)
                continue
            pair = pairs.setdefault((name, pmu), len(pairs))
            key = (pair, 1 if run is None else run, 1 if repeat is None else repeat)
            line_of.append(lines.setdefault(key, len(lines)))
            units.setdefault(name, unit)
        keys = np.array(list(lines), np.int64).reshape(-1, 3)
        return cls(
            np.asarray(line_of, np.int64),
            list(pairs),
            keys[:, 0],
            keys[:, 1],
            keys[:, 2],
            units,
            per_part,
            regions,
        )


def series_totals(conn: Connection, part_ids: list[int]) -> pd.DataFrame:
    """A results frame of one row per series of the run's parts, its values summed (one grouped
    query): what `data.region_totals` and `data.thread_totals` need, the region rows being few
    and a thread's rows summed in the server."""
    from sqlalchemy import func

    from autoprof.store.models import Measurement

    keys = [Series.event_name, Series.pmu, Series.region, Series.unit, Series.plan_run]
    keys.append(Series.repeat)
    found = conn.execute(
        select(*keys, func.sum(Measurement.sample_value))
        .join(
            Measurement,
            (Measurement.part_id == Series.part_id) & (Measurement.series == Series.number),
        )
        .where(Series.part_id.in_(part_ids), Measurement.part_id.in_(part_ids))  # (pruned)
        .group_by(*keys)
    ).all()
    columns = ["EVENT_NAME", "PMU", "REGION", "UNIT", "RUN", "REPEAT", "SAMPLE_VALUE"]
    frame = pd.DataFrame(found, columns=columns)
    regions = list(dict.fromkeys(r.region for r in found if r.region is not None))
    frame["REGION"] = pd.Categorical(frame["REGION"], categories=regions)
    return frame


def region_totals(conn: Connection, part_ids: list[int]) -> pd.DataFrame:
    """`analysis.data.region_totals` of the run's parts."""
    return data.region_totals(series_totals(conn, part_ids))


def _sides(frame: pd.DataFrame) -> dict[str, Any]:
    return {"columns": ["event", *map(str, frame.columns)], "rows": records(frame.reset_index())}


class _Pass:
    """One pass over a run's rows, a chunk at a time: what `data.per_interval` and the per-event
    facts of `stats.event_table` need, and nothing more. Per-interval sums live in dense
    (line, interval) arrays, as `data.per_interval` builds them: intervals are numbered 0, 1,
    ... in each run, so a line's cells fill its row; they grow as later intervals come."""

    def __init__(self, lines: _Lines) -> None:
        self.lines = lines
        pairs = len(lines.pairs)
        self.first = np.full(pairs, _UNSEEN)  # first row of each pair
        self.rows = np.zeros(pairs, np.int64)
        self.samples = np.zeros(pairs, np.int64)
        self.min_percent = np.full(pairs, np.nan)
        self.absmax = np.full(pairs, np.nan)
        self.width = 0  # intervals per line held
        self.cells = np.zeros((4, len(lines.line_pair), 0))  # row count, sum, values, time
        self.seen = 0

    def add(self, table) -> None:
        """Count a table of rows: in the run's order, or each with its place (`seq`)."""
        series = table.column("series").to_numpy()
        index = table.column("INDEX").to_numpy(zero_copy_only=False).astype(np.float64)
        line = self.lines.line_of[series]
        keep = (line >= 0) & ~np.isnan(index)
        ordered = "seq" not in table.column_names  # else each row says its place
        position = None if ordered else table.column("seq").to_numpy().astype(np.int64)[keep]
        first_kept = self.seen
        self.seen += len(series)
        if not keep.all():
            line, index = line[keep], index[keep]
        if len(line) == 0:
            return
        if index.min() < 0:
            raise AutoprofError("results file has a negative interval INDEX")
        self._widen(int(index.max()) + 1)
        values = table.column("SAMPLE_VALUE").to_numpy(zero_copy_only=False)[keep]
        # an infinite count (stored before upload refused them) is no count
        values = np.where(np.isinf(values), np.nan, values)
        time = table.column("TIME").to_numpy(zero_copy_only=False)[keep]
        percent = table.column("PERCENT_RUNNING").to_numpy(zero_copy_only=False)[keep]
        pair = self.lines.line_pair[line]
        pairs = len(self.lines.pairs)
        if ordered:  # rows in order: only a pair not seen yet has its first row here
            new = np.flatnonzero(self.first[pair] == _UNSEEN)
            if len(new):
                kept_at = np.flatnonzero(keep)[new] + first_kept
                np.minimum.at(self.first, pair[new], kept_at)
        else:
            assert position is not None  # rows not in order each say their place
            np.minimum.at(self.first, pair, position)
        self.rows += np.bincount(pair, minlength=pairs)
        counted = ~np.isnan(values)
        self.samples += np.bincount(pair, weights=counted, minlength=pairs).astype(np.int64)
        np.fmin.at(self.min_percent, pair, percent)
        np.fmax.at(self.absmax, pair, np.abs(values))
        cell = line * self.width + index.astype(np.int64)
        # only the span of cells this table touches (a few lines of the run's many: its rows
        # are a few intervals of a few runs), so that a table costs its rows, not every cell
        low = int(cell.min())
        cell -= low
        size = int(cell.max()) + 1
        rows, sums, counts, latest = (c.reshape(-1)[low : low + size] for c in self.cells)
        rows += np.bincount(cell, minlength=size)
        sums += np.bincount(cell, weights=np.where(counted, values, 0.0), minlength=size)
        counts += np.bincount(cell, weights=counted, minlength=size)
        np.fmax.at(latest, cell, time)

    def _widen(self, width: int) -> None:
        if width <= self.width:
            return
        width = max(width, 2 * self.width)
        lines = len(self.lines.line_pair)
        if lines * width > 8 * self.seen + (1 << 22):  # intervals numbered far apart
            raise AutoprofError(
                f"interval INDEX up to {width - 1}: too sparse to summarize (expected 0, 1, ...)"
            )
        cells = np.zeros((4, lines, width))
        cells[3] = np.nan
        cells[:, :, : self.width] = self.cells
        self.cells, self.width = cells, width

    def result(self) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
        """`data.per_interval`'s frame, `stats.event_table_of`'s facts, and the event name of
        each label."""
        lines = self.lines
        present = np.flatnonzero(self.rows > 0)
        present_order = present[np.argsort(self.first[present], kind="stable")]  # as rows show
        labels = data.pair_labels([lines.pairs[p] for p in present_order])
        code_of = np.full(len(lines.pairs), -1, np.int64)
        code_of[present_order] = np.arange(len(present_order))
        category = pd.CategoricalDtype(labels)
        facts = pd.DataFrame(
            {
                "pmu": [lines.pairs[p][1] for p in present_order],
                "unit": [lines.units.get(lines.pairs[p][0]) for p in present_order],
                "rows": self.rows[present_order],
                "samples": self.samples[present_order],
                "min_percent_running": self.min_percent[present_order],
                "absmax": self.absmax[present_order],
            },
            index=pd.CategoricalIndex(labels, dtype=category, name=data.EVENT),
        )
        # the cells let go before the frame is made: the server's peak (it builds summaries)
        cell = np.flatnonzero(self.cells[0].reshape(-1) > 0)
        sums, counts, time = (c.reshape(-1)[cell] for c in self.cells[1:])
        self.cells = np.zeros((4, 0, 0))
        line, index = np.divmod(cell, max(self.width, 1))
        del cell
        event = code_of[lines.line_pair[line]]
        run, repeat = lines.line_run[line], lines.line_repeat[line]
        del line
        order = np.lexsort((index, repeat, run, event))
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(counts > 0, sums / counts, np.nan)
        intervals = pd.DataFrame(
            {
                data.EVENT: pd.Categorical.from_codes(event[order], dtype=category),
                "RUN": run[order],
                "REPEAT": repeat[order],
                "INDEX": index[order],
                "TIME": time[order],
                "MEAN": mean[order],
                "SUM": np.where(counts > 0, sums, np.nan)[order],
                "VALUES": counts.astype(np.int64)[order],
            },
            copy=False,  # a block per column: no second copy of them all
        )
        return intervals, facts, [lines.pairs[p][0] for p in present_order]


def _analysis(intervals: pd.DataFrame, facts: pd.DataFrame) -> dict[str, Any]:
    """Stats per event and the clustered correlation matrix (or why there is none)."""
    table = stats.event_table_of(facts, intervals) if len(facts) else pd.DataFrame()
    result: dict[str, Any] = {"stats": records(table.reset_index()) if len(table) else []}
    try:
        found = correlation.analyse_intervals(intervals, top=HEATMAP_EVENTS)
    except AutoprofError as err:
        result["correlation"] = {"error": str(err)}
        return result
    matrix = found.matrix
    result["correlation"] = {
        "events": [str(e) for e in matrix.index],
        "matrix": [
            [None if np.isnan(v) else round(float(v), 4) for v in row] for row in matrix.to_numpy()
        ],
        "method": found.method,
        "intervals": found.intervals,
        "excluded": records(found.excluded),
        "colorscale": correlation.colour_scale(),  # the PNG's colours: red is r = +1
    }
    return result


def records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-safe dicts (NaN and infinities as None, numpy scalars as Python)."""
    out = []
    for row in table.to_dict(orient="records"):
        clean = {}
        for key, value in row.items():
            if isinstance(value, np.generic):
                value = value.item()
            if value is pd.NA or (isinstance(value, float) and not math.isfinite(value)):
                value = None
            clean[str(key)] = value
        out.append(clean)
    return out


@dataclass
class Line:
    """One line of an event's timeline: a (run, repeat)'s count per interval, in order."""

    run: Any
    repeat: Any
    time: np.ndarray
    value: np.ndarray


def _timeline_lines(
    intervals: pd.DataFrame, names: list[str], units: dict[str, str | None]
) -> list[tuple[str, str | None, list[Line]]]:
    """Per event name: its unit and its lines, in (run, repeat) order. A name scheduled on two
    PMUs has their counts added per interval (the page plots events by name)."""
    codes = intervals[data.EVENT].cat.codes.to_numpy()
    keys = [codes, intervals["RUN"].to_numpy(), intervals["REPEAT"].to_numpy()]
    n = len(codes)
    change = np.zeros(max(n - 1, 0), bool)
    for key in keys:
        change |= key[1:] != key[:-1]
    starts = np.concatenate(([0], np.flatnonzero(change) + 1)) if n else np.zeros(0, np.int64)
    ends = np.append(starts[1:], n)
    time, value = intervals["TIME"].to_numpy(), intervals["SUM"].to_numpy()
    found: dict[str, list[tuple[Any, Any, np.ndarray]]] = {}
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        name = names[codes[start]]
        found.setdefault(name, []).append((keys[1][start], keys[2][start], np.arange(start, end)))
    out = []
    for name, pieces in found.items():
        pieces.sort(key=lambda piece: (piece[0], piece[1]))
        lines = []
        for (run, repeat), same in _by_key(pieces):
            rows = np.concatenate([rows for _, _, rows in same])
            t, v = time[rows], value[rows]
            if len(same) > 1:  # two PMUs: per interval, the latest time and the sum
                one = pd.DataFrame({"index": intervals["INDEX"].to_numpy()[rows], "t": t, "v": v})
                by = one.groupby("index", sort=True)
                t, v = by["t"].max().to_numpy(), by["v"].sum(min_count=1).to_numpy()
            lines.append(Line(run, repeat, t, v))
        out.append((name, units.get(name), lines))
    return out


def _by_key(pieces: list[tuple[Any, Any, np.ndarray]]) -> Iterator[tuple[tuple, list]]:
    """Pieces (sorted by run and repeat) grouped by their (run, repeat)."""
    group: list = []
    for piece in pieces:
        if group and (group[-1][0], group[-1][1]) != (piece[0], piece[1]):
            yield (group[0][0], group[0][1]), group
            group = []
        group.append(piece)
    if group:
        yield (group[0][0], group[0][1]), group


def timelines(
    events: Iterable[tuple[str, str | None, list[Line]]], points: int
) -> dict[str, dict[str, Any]]:
    """Each event's timeline as the page plots it: every line cut to `points` with LTTB (all
    lines of all events in one walk), and a histogram of all its interval counts."""
    events = list(events)
    flat = [line for _, _, found in events for line in found]
    kept = iter(lttb_many([line.time for line in flat], [line.value for line in flat], points))
    out = {}
    for name, unit, found in events:
        shown = []
        for line in found:
            keep = next(kept)
            shown.append(
                {
                    "name": f"run {_int(line.run)} repeat {_int(line.repeat)}",
                    "x": line.time[keep].tolist(),
                    "y": line.value[keep].tolist(),
                    "intervals": len(line.time),
                }
            )
        counted = np.concatenate([line.value for line in found]) if found else np.zeros(0)
        counts, edges = histogram(counted[np.isfinite(counted)])
        out[name] = {
            "event": name,
            "unit": unit,
            "lines": shown,
            "histogram": {
                "counts": np.asarray(counts, np.int64).tolist(),
                "edges": np.asarray(edges, np.float64).tolist(),
            },
        }
    return out


def histogram(values: np.ndarray) -> tuple[Any, Any]:
    """HISTOGRAM_BINS bins over `values`; one bin where numpy finds no width for them (counts
    all alike at 1e17 or more: numpy widens them by 0.5 each way, below a float's step)."""
    if not len(values):
        return [], []
    try:
        return np.histogram(values, bins=HISTOGRAM_BINS)
    except ValueError:
        return [len(values)], [values.min(), values.max()]


def _int(value: Any) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
