"""`perf stat -x` output as plain column arrays, read by pyarrow's CSV reader when it can.

Most perf.csv files are regular: one separator (``,``), one field count on every line, no
event spec with a comma in it, no extra-metric lines. Those are read by pyarrow in C (event names,
CPUs and units dictionary-encoded, numbers parsed there), which is several times faster than the
general parser. Anything else (a foreign locale, ``-r`` noise, ``--per-socket`` prefixes, a line
of another length, a field that does not convert) makes the fast reader step aside and
`autoprof.perf.stat_csv.parse` reads the file: it knows every quirk and reports bad lines. Both
give the same `Counts`, so the aggregator has one input shape.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autoprof.perf import stat_csv, stat_fields
from autoprof.perf.labels import split_instance
from autoprof.util.status import CountState

_STATE_CODES = {state: state.code for state in CountState}
_CPU = re.compile(r"^CPU(\d+)$")
_VALUE = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|<not counted>|<not supported>)\s*$")


@dataclass
class Counts:
    """The lines of one perf.csv, column-wise, in file order.

    Text columns are (codes, uniques): perf repeats a few event names and units on every line.
    Locations are -1 where perf printed none.
    """

    time: np.ndarray  # float64 seconds, NaN in total mode
    cpu: np.ndarray  # int64
    socket: np.ndarray
    core: np.ndarray
    node: np.ndarray
    value: np.ndarray  # float64, NaN unless counted
    state: np.ndarray  # int8 CountState codes
    percent: np.ndarray  # float64 percent running
    event_codes: np.ndarray  # int64 into events
    events: list[str]  # the event as perf printed it
    instances: list[str | None]  # per event: the uncore box perf named (uncore_cha_3), or None
    bases: list[str]  # per event: the event without its box
    unit_codes: np.ndarray  # int64 into units
    units: list[str | None]  # perf's unit of the value (msec), None when none

    def __len__(self) -> int:
        return len(self.value)


def totals(values: dict[str, float]) -> Counts:
    """One total per event, counted all the time, with no interval, CPU or unit: the Counts
    of a counter other than perf (`profile --emulate`), so that aggregate maps them as perf's."""
    n = len(values)
    names = list(values)

    def minus() -> np.ndarray:
        return np.full(n, -1, np.int64)

    return Counts(
        time=np.full(n, np.nan),
        cpu=minus(),
        socket=minus(),
        core=minus(),
        node=minus(),
        value=np.asarray(list(values.values()), np.float64),
        state=np.full(n, CountState.COUNTED.code, np.int8),
        percent=np.full(n, 100.0),
        event_codes=np.arange(n, dtype=np.int64),
        events=names,
        instances=[None] * n,
        bases=names,
        unit_codes=np.zeros(n, np.int64),
        units=[None],
    )


# perf.csv is read this many bytes at a time (about 60k lines), rounded to whole intervals:
# a run's memory is that of a chunk, whatever the length of its file
CHUNK_BYTES = 1 << 22


def read_file(
    path: Path, sep: str, interval: bool, chunk_bytes: int | None = None
) -> Iterator[tuple[Counts, list[stat_fields.Problem]]]:
    """The Counts of the perf.csv at `path` chunk by chunk, each chunk whole intervals of
    `perf stat -I` (a file without intervals is one chunk: perf prints it at the end, small);
    problems carry the file's line numbers. At least one chunk, empty for an empty file."""
    before = 0
    for data in chunks(path, sep, interval, chunk_bytes or CHUNK_BYTES):
        counts, problems = read(data, sep, interval)
        yield counts, [stat_fields.Problem(p.line + before, p.message) for p in problems]
        before += data.count(b"\n")


def chunks(path: Path, sep: str, interval: bool, chunk_bytes: int) -> Iterator[bytes]:
    """The file's bytes in pieces of about `chunk_bytes`, each cut where an interval begins."""
    with open(path, "rb") as file:
        carry, first = b"", True
        while True:
            block = file.read(chunk_bytes)
            data = carry + block
            if not block:
                if data or first:
                    yield data
                return
            cut = _interval_start(data, sep.encode()) if interval else 0
            if cut:
                yield data[:cut]
                first = False
            carry = data[cut:]


def _interval_start(data: bytes, sep: bytes) -> int:
    """Where the last interval that starts in `data` begins (its lines, which perf prints
    together, all start with the same time field); 0 when that is the start of `data` (one
    interval is longer than a chunk: read on)."""
    end = data.rfind(b"\n")
    if end < 0:
        return 0
    last = data[data.rfind(b"\n", 0, end) + 1 : end]
    time, found, _ = last.partition(sep)
    if not found or not time.strip() or time.lstrip().startswith(b"#"):
        return end + 1  # no interval line last (a comment): cut after it
    if data.startswith(time + sep):
        return 0
    start = data.find(b"\n" + time + sep)
    return start + 1 if start >= 0 else 0


def read(data: bytes, sep: str, interval: bool) -> tuple[Counts, list[stat_fields.Problem]]:
    """Counts and the problems of the lines left out; raises StatCsvError like stat_csv.parse."""
    counts = _fast(data, sep, interval)
    if counts is not None:
        return counts, []
    parsed = stat_csv.parse(data, sep=sep, interval=interval)
    return from_frame(parsed.frame), parsed.problems


def _layout(data: bytes, sep: str, interval: bool) -> tuple[int, bool] | None:
    """(fields per line, CPU column?) from the first data line, when the fast reader fits."""
    for raw in data[: 1 << 16].split(b"\n")[:50]:
        line = raw.decode("utf-8", "replace")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split(sep)
        t = int(interval)
        if len(fields) <= t + 1:
            return None
        cpu = _CPU.match(fields[t].strip()) is not None
        if not cpu and not _VALUE.match(fields[t]):
            return None  # --per-socket, --per-thread, ...: the general parser
        n = t + int(cpu) + 7  # VALUE UNIT EVENT RUN_TIME PERCENT METRIC METRIC_UNIT
        return (n, cpu) if len(fields) == n else None
    return None


def _fast(data: bytes, sep: str, interval: bool) -> Counts | None:
    """pyarrow's reader for a regular file; None when the file is not regular."""
    if sep != "," or b"\x00" in data:
        return None
    layout = _layout(data, sep, interval)
    if layout is None:
        return None
    import pyarrow as pa
    import pyarrow.csv as pcsv

    n, has_cpu = layout
    t = int(interval)
    names = [f"f{i}" for i in range(n)]
    v = t + int(has_cpu)
    text = pa.string()  # dictionary-encoded after reading: faster than the reader's own
    types = {names[v]: text, names[v + 1]: text, names[v + 2]: text}
    types[names[n - 4]] = types[names[n - 3]] = pa.float64()  # run time, percent running
    if t:
        types[names[0]] = pa.float64()
    if has_cpu:
        types[names[t]] = text
    odd: list[str] = []

    def invalid(row) -> str:
        if row.text.strip() and not row.text.lstrip().startswith("#"):
            odd.append(row.text)
        return "skip"

    try:
        table = pcsv.read_csv(
            pa.py_buffer(data),
            # one thread: files are read one after another, and threads cost more than they give
            read_options=pcsv.ReadOptions(
                column_names=names, block_size=1 << 24, use_threads=False
            ),
            parse_options=pcsv.ParseOptions(
                delimiter=sep, quote_char=False, invalid_row_handler=invalid
            ),
            convert_options=pcsv.ConvertOptions(
                column_types=types,
                include_columns=list(types),
                strings_can_be_null=False,
                null_values=[],
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None  # a field that does not convert: the general parser says which line
    if odd:
        return None
    return _columns(table, names, t, has_cpu, v, n)


def _dict(column) -> tuple[np.ndarray, list[str]]:
    """(codes, uniques) of a text column."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column.combine_chunks())
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, encoded.dictionary.to_pylist()


def _columns(table, names: list[str], t: int, has_cpu: bool, v: int, n: int) -> Counts | None:
    import pyarrow.compute as pc

    rows = table.num_rows
    value_text = table.column(names[v])
    event_codes, events = _dict(table.column(names[v + 2]))
    events = [e.strip() for e in events]
    empty_event = np.asarray([e == "" for e in events], bool)
    if rows and empty_event[event_codes].any():
        return None  # extra-metric lines or a nameless event: the general parser sorts them out
    not_counted = pc.equal(value_text, stat_fields.NOT_COUNTED).to_numpy(zero_copy_only=False)
    not_supported = pc.equal(value_text, stat_fields.NOT_SUPPORTED).to_numpy(zero_copy_only=False)
    state = np.full(rows, CountState.COUNTED.code, np.int8)
    state[not_counted] = CountState.NOT_COUNTED.code
    state[not_supported] = CountState.NOT_SUPPORTED.code
    numbers = pc.if_else(pc.equal(value_text, ""), "x", value_text)  # "" is no number either
    counted = pc.invert(pc.or_(not_counted, not_supported))
    try:
        value = pc.cast(pc.if_else(counted, numbers, None), "float64")
    except Exception:  # a counted value that is not a number: the general parser reports it
        return None
    cpu = np.full(rows, -1, np.int64)
    if has_cpu:
        cpu_codes, cpu_names = _dict(table.column(names[t]))
        numbers_of = [_CPU.match(c.strip()) for c in cpu_names]
        if not all(numbers_of):
            return None
        cpu = np.asarray([int(m[1]) for m in numbers_of if m], np.int64)[cpu_codes]
    unit_codes, units = _dict(table.column(names[v + 1]))
    time = table.column(names[0]).to_numpy() if t else np.full(rows, np.nan)
    bases, instances = zip(*map(split_instance, events), strict=True) if events else ((), ())
    missing = np.full(rows, -1, np.int64)
    return Counts(
        time=np.asarray(time, np.float64),
        cpu=cpu,
        socket=missing,
        core=missing.copy(),
        node=missing.copy(),
        value=value.to_numpy(zero_copy_only=False).astype(np.float64, copy=False),
        state=state,
        percent=table.column(names[n - 3]).to_numpy(),
        event_codes=event_codes,
        events=events,
        instances=list(instances),
        bases=list(bases),
        unit_codes=unit_codes,
        units=[(u.strip() or None) for u in units],
    )


def _codes(column) -> tuple[np.ndarray, list]:
    import pandas as pd

    codes, uniques = pd.factorize(column.astype(object), use_na_sentinel=False)
    return codes.astype(np.int64), [None if pd.isna(u) else u for u in uniques]


def _location(column) -> np.ndarray:
    return column.astype("Int64").fillna(-1).to_numpy(dtype=np.int64)


def from_frame(frame) -> Counts:
    """The Counts of a frame of `stat_csv.parse` (the general parser's output)."""
    event_codes, events = _codes(frame["EVENT"])
    unit_codes, units = _codes(frame["UNIT"])
    state = frame["STATE"].astype(object).map(_STATE_CODES).to_numpy(dtype=np.int8)
    split = [split_instance(e) for e in events]
    return Counts(
        time=frame["TIME"].to_numpy(dtype=np.float64),
        cpu=_location(frame["CPU"]),
        socket=_location(frame["SOCKET"]),
        core=_location(frame["CORE"]),
        node=_location(frame["NODE"]),
        value=frame["VALUE"].to_numpy(dtype=np.float64),
        state=state,
        percent=frame["PERCENT_RUNNING"].to_numpy(dtype=np.float64),
        event_codes=event_codes,
        events=[str(e) for e in events],
        instances=[i for _, i in split],
        bases=[b for b, _ in split],
        unit_codes=unit_codes,
        units=units,
    )
