"""One run's perf counts -> its results rows (`tally.RunRows`), and those rows as a pyarrow
table in the `results.csvfile` columns. Pure: no file is read or written here.

Everything per line is numpy over codes; Python only sees the distinct event names of a run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from autoprof.perf import labels as perf_labels
from autoprof.perf import stat_arrow
from autoprof.perf.threads import ThreadRecord
from autoprof.results.sanity_report import Modifier
from autoprof.results.tally import Label, RunRows
from autoprof.run import outdir
from autoprof.util.status import CountState, RowStatus

Modifiers = dict[tuple[str, str | None, str], Modifier]  # (event, pmu, modifier) -> first seen


def lookup(record: outdir.RunRecord) -> dict[str, outdir.EventRef]:
    """Every text perf may print for an event of this run -> its EventRef."""
    table: dict[str, outdir.EventRef] = {}
    for ref in record.events:
        for key in perf_labels.printed_forms(ref.pmu, ref.label, ref.spec):
            table[key] = ref
    return table


def run_rows(
    counts: stat_arrow.Counts | None,
    record: outdir.RunRecord,
    refused: list[Label],
    topology: np.ndarray,
    modifiers: Modifiers,
) -> RunRows:
    """The results rows of one run whose perf lines are all in `counts` (`RunMapper` in one
    piece): perf's lines mapped to catalog events, then the rows of events without a line."""
    mapper = RunMapper(record, refused, topology, modifiers)
    return concat([mapper.chunk(counts), mapper.rest()])


class RunMapper:
    """One run's results rows, made chunk by chunk of its perf lines (`chunk`), then `rest`:
    a `not supported` row for each refused event perf printed no line for (`refused`), and a
    `not counted` row for each planned event that got no line at all. `modifiers` collects the
    modifiers perf added to event names. Chunks must hold whole intervals, in order (INDEX
    goes on from one chunk to the next)."""

    def __init__(
        self,
        record: outdir.RunRecord,
        refused: list[Label],
        topology: np.ndarray,
        modifiers: Modifiers,
    ):
        self.record, self.refused, self.topology, self.modifiers = (
            record,
            refused,
            topology,
            modifiers,
        )
        self.table = lookup(record)
        self.present: set[Label] = set()
        self.next_index = 0
        self.counted_thread: ThreadRecord | None = None

    def thread(self, counted: ThreadRecord) -> None:
        """The chunks that follow are one thread's (--per-thread): UNIT names it (COMM-TID),
        its intervals count from 0 and TIME from the start of the run's first perf."""
        self.counted_thread, self.next_index = counted, 0

    def chunk(self, counts: stat_arrow.Counts | None) -> RunRows:
        labels: list[Label] = []
        label_code: dict[Label, int] = {}

        def code(label: Label) -> int:
            if label not in label_code:
                label_code[label] = len(labels)
                labels.append(label)
            return label_code[label]

        if counts is None or len(counts) == 0:
            return _empty_rows(self.record, labels)
        rows = _mapped(counts, self.record, self.table, code, labels, self.modifiers)
        if self.counted_thread is not None:
            rows.units, rows.unit = [self.counted_thread.label], np.zeros(len(rows), np.int64)
            rows.time = rows.time + self.counted_thread.start_s
        rows.index = rows.index + self.next_index
        self.next_index = int(rows.index.max()) + 1
        seen = np.flatnonzero(np.bincount(rows.label, minlength=len(labels)))
        self.present.update(labels[c] for c in seen)
        _locate(rows, self.topology)
        return rows

    def rest(self) -> RunRows:
        """The rows of the events perf printed no line for in any chunk."""
        extra = [lab for lab in dict.fromkeys(self.refused) if lab not in self.present]
        done = self.present | set(extra)
        silent = [(r.name, r.pmu) for r in self.record.events]
        silent = [lab for lab in dict.fromkeys(silent) if lab not in done]
        labels = extra + silent
        status = [RowStatus.NOT_SUPPORTED.code] * len(extra)
        status += [RowStatus.NOT_COUNTED.code] * len(silent)
        return _append(_empty_rows(self.record, labels), list(range(len(labels))), status)


def concat(parts: list[RunRows]) -> RunRows:
    """The rows of one run's pieces as one (labels and code lists merged)."""
    parts = [p for p in parts if len(p)] or parts[:1]
    if len(parts) == 1:
        return parts[0]
    labels: list[Label] = []
    units: list[str | None] = []
    value_units: list[str | None] = []
    arrays: dict[str, list[np.ndarray]] = {a: [] for a in _ROW_ARRAYS}
    for part in parts:
        for name in _ROW_ARRAYS:
            arrays[name].append(getattr(part, name))
        for column, texts, merged in (
            ("label", part.labels, labels),
            ("unit", part.units, units),
            ("value_unit", part.value_units, value_units),
        ):
            arrays[column][-1] = _recode(texts, merged)[arrays[column][-1]]
    first = parts[0]
    joined = {name: np.concatenate(arrays[name]) for name in _ROW_ARRAYS}
    return RunRows(
        first.run,
        first.repeat,
        labels,
        units=units,
        value_units=value_units,
        **joined,
    )


def _recode(texts: Sequence[Any], merged: list[Any]) -> np.ndarray:
    """The code in `merged` of each of `texts` (added to `merged` when new)."""
    where = {t: i for i, t in enumerate(merged)}
    for t in texts:
        if t not in where:
            where[t] = len(merged)
            merged.append(t)
    return np.asarray([where[t] for t in texts] or [0], np.int64)


def _mapped(
    counts: stat_arrow.Counts,
    record: outdir.RunRecord,
    table: dict[str, outdir.EventRef],
    code,
    labels: list[Label],
    modifiers: Modifiers,
) -> RunRows:
    per_event, unit_texts = [], []
    for printed, base, instance in zip(counts.events, counts.bases, counts.instances, strict=True):
        ref, modifier = perf_labels.resolve(base, table)
        label = (ref.name, ref.pmu) if ref else (printed, None)
        if modifier:
            modifiers.setdefault(
                (label[0], label[1], modifier), Modifier(label[0], label[1], printed, modifier)
            )
        per_event.append(code(label))
        unit_texts.append(instance if instance is not None else label[1])
    units, unit_of_event = _codes(unit_texts)
    event = counts.event_codes
    status = np.select(
        [
            counts.state == CountState.NOT_COUNTED.code,
            counts.state == CountState.NOT_SUPPORTED.code,
        ],
        [RowStatus.NOT_COUNTED.code, RowStatus.NOT_SUPPORTED.code],
        RowStatus.OK.code,
    ).astype(np.int8)
    status[(status == RowStatus.OK.code) & (counts.percent < 100)] = RowStatus.MULTIPLEXED.code
    rows = RunRows(
        run=record.run,
        repeat=record.repeat,
        labels=labels,
        label=np.asarray(per_event, np.int64)[event],
        index=_index(counts.time),
        time=counts.time,
        cpu=counts.cpu,
        socket=counts.socket,
        core=counts.core,
        node=counts.node,
        units=units,
        unit=np.asarray(unit_of_event, np.int64)[event],
        value=counts.value,
        value_units=counts.units,
        value_unit=counts.unit_codes,
        percent=counts.percent,
        status=status,
    )
    no_box = np.asarray([i is None for i in counts.instances], bool)[event]
    _number_boxes(rows, no_box)
    return rows


def _codes(texts: Sequence[str | None]) -> tuple[list[str | None], list[int]]:
    uniques = list(dict.fromkeys(texts))
    where = {t: i for i, t in enumerate(uniques)}
    return uniques, [where[t] for t in texts]


def _index(time: np.ndarray) -> np.ndarray:
    """Interval number per line: perf prints intervals in time order."""
    if len(time) == 0 or np.isnan(time).all():
        return np.zeros(len(time), np.int64)
    step = np.diff(time)
    if not np.isnan(time).any() and (step >= 0).all():
        return np.concatenate(([0], np.cumsum(step > 0))).astype(np.int64)
    return np.unique(time, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _number_boxes(rows: RunRows, no_box: np.ndarray) -> None:
    """An uncore event opened with name= prints one line per box without naming the box; number
    the boxes in perf's print order (UNIT ``uncore_cha_0``, ``uncore_cha_1``, ...)."""
    where = np.flatnonzero(no_box)
    if len(where) < 2:
        return
    # perf's print order (interval, event, CPU) keeps distinct keys rising: a cheap test first
    group = _group_ids(
        [rows.index, rows.label, rows.unit, rows.cpu, rows.socket, rows.core, rows.node], where
    )
    size = np.bincount(group)
    dup = size[group] > 1
    if not dup.any():
        return
    order = np.argsort(group, kind="stable")  # perf's order within a group
    start = np.concatenate(([True], group[order][1:] != group[order][:-1]))
    nth = np.empty(len(group), np.int64)
    nth[order] = np.arange(len(order)) - np.flatnonzero(start)[np.cumsum(start) - 1]
    lines, nth = where[dup], nth[dup]
    units = rows.unit[lines]
    names = [
        perf_labels.box_name(rows.units[u], n)
        for u, n in zip(units.tolist(), nth.tolist(), strict=True)
    ]
    uniques, codes = _codes(names)
    rows.unit = rows.unit.copy()
    rows.unit[lines] = np.asarray(codes, np.int64) + len(rows.units)
    rows.units = rows.units + uniques


def _group_ids(columns: list[np.ndarray], where: np.ndarray) -> np.ndarray:
    """A group number per selected row, equal where every column is equal (one int64 key when
    the columns' ranges allow it)."""
    key = np.zeros(len(where), np.int64)
    span = 1
    for column in columns:
        values = column[where] + 1  # -1 (none) -> 0
        width = int(values.max()) + 1
        span *= width
        if span >= 2**62:
            stacked = np.stack([c[where] for c in columns], axis=1)
            return np.unique(stacked, axis=0, return_inverse=True)[1].reshape(-1)
        key = key * width + values
    if (key[1:] > key[:-1]).all():
        return np.arange(len(key))
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.dictionary_encode(pa.array(key)).indices.to_numpy(zero_copy_only=False)  # hashing


def _empty_rows(record: outdir.RunRecord, labels: list[Label]) -> RunRows:
    none = np.zeros(0, np.int64)
    nan = np.zeros(0, np.float64)
    return RunRows(
        record.run,
        record.repeat,
        labels,
        none,
        none,
        nan,
        none,
        none,
        none,
        none,
        [],
        none,
        nan,
        [None],
        none,
        nan,
        np.zeros(0, np.int8),
    )


# the per-row arrays of RunRows (the rest are code lists)
_ROW_ARRAYS: tuple[str, ...] = ("label", "index", "time", "cpu", "socket", "core", "node")
_ROW_ARRAYS += ("unit", "value", "value_unit", "percent", "status")


def outside(rows: RunRows, planned: frozenset[str]) -> tuple[RunRows, list[str]]:
    """The rows of planned events only, and the names of the others that had rows (an edited
    run.json or perf.csv: a name such as `=HYPERLINK(...)` must not reach results.csv)."""
    unplanned = [c for c, (name, _) in enumerate(rows.labels) if name not in planned]
    drop = np.isin(rows.label, unplanned)
    if not drop.any():
        return rows, []
    names = [rows.labels[c][0] for c in np.unique(rows.label[drop])]
    keep = ~drop
    return dataclasses.replace(rows, **{a: getattr(rows, a)[keep] for a in _ROW_ARRAYS}), names


def _append(rows: RunRows, label_codes: list[int], status: list[int]) -> RunRows:
    """Rows for events perf printed no line for: interval 0, no location, no value, UNIT = PMU."""
    n = len(label_codes)
    units = rows.units + [rows.labels[c][1] for c in label_codes]
    minus = np.full(n, -1, np.int64)
    nan = np.full(n, np.nan)
    cat = np.concatenate
    return RunRows(
        rows.run,
        rows.repeat,
        rows.labels,
        label=cat([rows.label, np.asarray(label_codes, np.int64)]),
        index=cat([rows.index, np.zeros(n, np.int64)]),
        time=cat([rows.time, nan]),
        cpu=cat([rows.cpu, minus]),
        socket=cat([rows.socket, minus]),
        core=cat([rows.core, minus]),
        node=cat([rows.node, minus]),
        units=units,
        unit=cat([rows.unit, np.arange(len(rows.units), len(units))]),
        value=cat([rows.value, nan]),
        value_units=[*rows.value_units, None],
        value_unit=cat([rows.value_unit, np.full(n, len(rows.value_units), np.int64)]),
        percent=cat([rows.percent, nan]),
        status=cat([rows.status, np.asarray(status, np.int8)]),
    )


def _locate(rows: RunRows, topology: np.ndarray) -> None:
    """SOCKET, CORE and NODE of each CPU row from the machine's topology, where perf gave none.
    An uncore box counts for its socket, read on one CPU of it: no CORE there."""
    known = (rows.cpu >= 0) & (rows.cpu < len(topology))
    if not known.any():
        return
    at = topology[np.where(known, rows.cpu, 0)]
    uncore = np.asarray([perf_labels.is_uncore(pmu) for _, pmu in rows.labels], bool)
    per_socket = uncore[rows.label] if len(rows.labels) else np.zeros(len(rows), bool)
    for i, name in enumerate(("socket", "core", "node")):
        column = getattr(rows, name)
        fill = known & (column < 0) & (~per_socket if name == "core" else True)
        if fill.any():
            column = column.copy()
            column[fill] = at[fill, i]
            setattr(rows, name, column)


def table(rows: RunRows, keep: np.ndarray):
    """The rows where `keep` is true as a pyarrow table of the results columns, every column
    but SAMPLE_VALUE and PERCENT_RUNNING dictionary-encoded (a run has a few names, CPUs and
    intervals): the writer formats each distinct value once."""
    import pyarrow as pa

    def coded(codes: np.ndarray, dictionary):
        kept = codes[keep]
        missing = kept < 0
        indices = np.where(missing, 0, kept).astype(np.int32)
        mask = missing if missing.any() else None
        return pa.DictionaryArray.from_arrays(pa.array(indices, mask=mask), dictionary)

    def text(values: Sequence[str | None], codes: np.ndarray):
        missing = np.asarray([v is None for v in values], bool)
        codes = np.where(missing[codes], -1, codes)
        return coded(codes, pa.array(["" if v is None else v for v in values], pa.string()))

    def integer(values: np.ndarray):
        return coded(values, pa.array(np.arange(max(int(values.max(initial=0)) + 1, 1))))

    nan = np.isnan(rows.time)
    # a chunk of a long run holds intervals lo..hi: its dictionaries start at lo, not 0
    lo, hi = int(rows.index.min(initial=0)), int(rows.index.max(initial=0))
    time_of = np.zeros(hi - lo + 1)
    time_of[rows.index[~nan] - lo] = rows.time[~nan]  # equal times have equal INDEX (run_rows)
    one = np.zeros(len(rows), np.int64)
    columns = {
        "EVENT_NAME": text([lab[0] for lab in rows.labels], rows.label),
        "INDEX": coded(rows.index - lo, pa.array(np.arange(lo, hi + 1))),
        "TIME": coded(np.where(nan, -1, rows.index - lo), pa.array(time_of)),
        "SOCKET": integer(rows.socket),
        "CORE": integer(rows.core),
        "CPU": integer(rows.cpu),
        "NODE": integer(rows.node),
        "UNIT": text(rows.units, rows.unit),
        "SAMPLE_VALUE": pa.array(rows.value[keep], pa.float64()),
        "RUN": coded(one, pa.array([rows.run])),
        "REPEAT": coded(one, pa.array([rows.repeat])),
        "PMU": text([lab[1] for lab in rows.labels], rows.label),
        "VALUE_UNIT": text(rows.value_units, rows.value_unit),
        "PERCENT_RUNNING": pa.array(rows.percent[keep], pa.float64()),
        "STATUS": text(list(RowStatus), rows.status.astype(np.int64)),
        "REGION": pa.nulls(int(keep.sum()), pa.string()),
    }
    return pa.table(columns)
