"""The measurement table's bulk paths, each driver's own, in chunks: a run is never whole in
memory, whatever its size.

In: chunks of a results file (`results.csvfile.read_chunks`, pyarrow tables) become a part's
series (`SeriesNumbers`, numbered in the order they first appear) and its narrow measurement
rows, sent with PostgreSQL's ``COPY ... FROM STDIN (FORMAT BINARY)`` into the part's own
partition (`models.measurement_partition`; tuples built by numpy, a few chunks made ahead in a
thread while one is sent) or SQLite prepared inserts of SQLITE_ROWS_PER_INSERT rows each
(``executemany``), inside the upload's one transaction.

Out: a part's rows in their order (`seq`) as pyarrow tables, read through ADBC (`read_rows`):
Arrow record batches straight from the database, never a Python object per row (PostgreSQL's
ADBC driver reads with ``COPY (SELECT ...) TO STDOUT (FORMAT BINARY)``). On PostgreSQL a window
of `seq` at a time, found by the part's BRIN index on seq and put in order here; on SQLite
the table's own (part_id, seq) order. Values are exact both ways: numbers cross in binary (or
as sqlite3's doubles), never as text.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from autoprof.errors import AutoprofError
from autoprof.results import csvfile
from autoprof.store import driver
from autoprof.store.tables import SAMPLE_COLUMNS, SERIES_COLUMNS, measurement_partition
from autoprof.util import children
from autoprof.util.prefetch import prefetched

if TYPE_CHECKING:  # the readers' connections; the upload writes without SQLAlchemy
    from sqlalchemy import Connection

MEASUREMENT = ["part_id", "seq", "series", *SAMPLE_COLUMNS.values()]
# what a read returns per row: the series number, then the sample columns (results names)
READ_COLUMNS = ["series", *SAMPLE_COLUMNS]
WINDOW = 1 << 18  # rows per read on PostgreSQL, put in order here (about 15 MB of Arrow)
BATCH = 1 << 16  # rows per batch on SQLite (its driver's default, 1024, costs per batch)
# rows sent per COPY statement (1 M rows are 78 MB): between two, the server stores what else
# the upload made meanwhile (`write_measurements`)
COPY_BYTES = 16 << 20
SQLITE_ROWS_PER_INSERT = 256  # rows per INSERT statement: a third of the CPU of one per row
SQLITE_CACHE_KIB = 32 << 10  # 32 MiB of page cache for a load: 20% faster than the default 2
_WORK_MEM = "256MB"  # several parts' rows are sorted by the server


class SeriesNumbers:
    """The series of one part (its rows' values in SERIES_COLUMNS), numbered 0, 1, ... in the
    order they first appear, chunk after chunk."""

    def __init__(self) -> None:
        self.numbers: dict[tuple[Any, ...], int] = {}

    def number(self, table: pa.Table) -> np.ndarray:
        """The series number of each row of `table` (new series are numbered on the way)."""
        if table.num_rows == 0:
            return np.zeros(0, np.int32)
        columns = [table.column(name).combine_chunks() for name in SERIES_COLUMNS]
        # one int64 key per row from each column's small codes (text: dictionary indices,
        # integers: the value less the chunk's smallest), encoded again should it grow too wide
        key = np.zeros(table.num_rows, np.int64)
        span = 1
        for column in columns:
            code, width = _codes(column)
            if span * width >= 2**62:
                key = pc.dictionary_encode(pa.array(key)).indices.to_numpy().astype(np.int64)
                span = int(key.max()) + 1
            key = key * width + code
            span *= width
        encoded = pc.dictionary_encode(pa.array(key))
        local = encoded.indices.to_numpy().astype(np.int64)  # numbered as they first appear
        first = np.empty(len(encoded.dictionary), np.int64)
        first[local[::-1]] = np.arange(len(local) - 1, -1, -1)
        at = pa.array(first)
        values = [column.take(at).to_pylist() for column in columns]
        number = np.fromiter(
            (self.numbers.setdefault(v, len(self.numbers)) for v in zip(*values, strict=True)),
            np.int32,
            len(first),
        )
        return number[local]

    def write(self, conn: driver.Connection, part_id: int) -> None:
        """Insert the `series` table's rows of this part."""
        names = ["part_id", "number", *SERIES_COLUMNS.values()]
        conn.executemany(
            f"INSERT INTO series ({', '.join(names)}) VALUES ({', '.join(['%s'] * len(names))})",
            [(part_id, n, *values) for values, n in self.numbers.items()],
        )


def _codes(column: pa.Array) -> tuple[np.ndarray, int]:
    """Small non-negative codes of a column's values (a missing value is 0), and their bound."""
    if pa.types.is_dictionary(column.type):
        indices = pc.fill_null(column.indices, -1).to_numpy().astype(np.int64)
        return indices + 1, len(column.dictionary) + 1
    if column.null_count == len(column):
        return np.zeros(len(column), np.int64), 1
    low, high = pc.min(column).as_py(), pc.max(column).as_py()
    if high - low >= 2**31:  # far-apart values: hashed instead
        encoded = pc.dictionary_encode(column, null_encoding="encode")
        return encoded.indices.to_numpy().astype(np.int64), len(encoded.dictionary)
    values = pc.fill_null(column, low - 1).to_numpy().astype(np.int64)
    return values - (low - 1), high - low + 2


def _no_nan(column: pa.Array) -> pa.Array:
    """A float NaN as a missing value (NULL), as results files mean it."""
    if not pa.types.is_floating(column.type):
        return column
    nan = pc.is_nan(column)
    if pc.any(nan).as_py():
        return pc.if_else(nan, pa.scalar(None, column.type), column)
    return column


def measurement_rows(part_id: int, first: int, series: np.ndarray, table: pa.Table) -> pa.Table:
    """The measurement rows (MEASUREMENT columns) of a chunk whose first row is `first`."""
    n = table.num_rows
    columns = {
        "part_id": pa.array(np.full(n, part_id, np.int32)),
        "seq": pa.array(np.arange(first, first + n, dtype=np.int64)),
        "series": pa.array(series),
    }
    for name, column in SAMPLE_COLUMNS.items():
        columns[column] = _no_nan(table.column(name).combine_chunks())
    return pa.table(columns)


def write_measurements(
    conn: driver.Connection,
    part_id: int,
    chunks: Iterable[pa.Table],
    between: Callable[[], None] = lambda: None,
) -> None:
    """Insert `chunks` (MEASUREMENT columns, rows of `part_id`) through the driver's bulk path,
    in the connection's transaction. On PostgreSQL into a table of the part's own, made here:
    its rows copied in (FREEZE: the table is this transaction's, so its rows need no hint bits
    set by the first read), then its BRIN index on seq built over them all at once, then the
    table attached to `measurement` as the part's partition (which checks no row, its CHECK
    constraint says part_id already; other readers and writers of `measurement` go on).

    The rows go in a COPY statement per COPY_BYTES sent, and `between` runs between two: the
    server, which has time to spare while this process encodes rows, stores what the upload
    made meanwhile (its kept text and columns) instead of after the last row."""
    names = ", ".join(MEASUREMENT)
    if conn.postgresql:
        table = measurement_partition(part_id)
        with conn.driver.cursor() as cursor:
            cursor.execute(
                f"CREATE TABLE {table} (LIKE measurement, CHECK (part_id = {int(part_id)}))"
            )
            statement = f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY, FREEZE)"
            # chunks are read and encoded a few ahead, in a thread, while this one is sent: the
            # two overlap, and memory holds a few chunks, never a queue that grows when the
            # server is the slower side
            encoded = prefetched(map(binary_rows, chunks), ahead=4)
            while _copy(cursor, statement, encoded):
                between()
            cursor.execute(f"CREATE INDEX {table}_seq ON {table} USING brin (seq)")
            cursor.execute(
                f"ALTER TABLE measurement ATTACH PARTITION {table} FOR VALUES IN ({int(part_id)})"
            )
        return
    # pages written again and again (the b-tree's right edge) stay in memory, not in the WAL
    conn.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
    row = f"({', '.join(['%s'] * len(MEASUREMENT))})"
    insert = f"INSERT INTO measurement ({names}) VALUES "
    wide = insert + ", ".join([row] * SQLITE_ROWS_PER_INSERT)
    width = len(MEASUREMENT)
    for chunk in chunks:
        values = _python_values(chunk)
        whole = chunk.num_rows // SQLITE_ROWS_PER_INSERT * SQLITE_ROWS_PER_INSERT
        shared = itertools.islice(values, whole * width)  # zip takes from one iterator
        conn.executemany(wide, zip(*[shared] * (width * SQLITE_ROWS_PER_INSERT), strict=True))
        rest = iter(values[whole * width :])
        conn.executemany(insert + row, zip(*[rest] * width, strict=True))


def _copy(cursor: Any, statement: str, encoded: Iterator[memoryview]) -> bool:
    """One COPY `statement` of `encoded` rows, until COPY_BYTES are sent; whether rows are left."""
    sent = 0
    with cursor.copy(statement) as copy:
        copy.write(COPY_SIGNATURE)
        for data in encoded:
            copy.write(data)
            sent += len(data)
            if sent >= COPY_BYTES:
                break
        copy.write(COPY_TRAILER)
    return sent >= COPY_BYTES


# PostgreSQL's binary COPY: a signature, flags and header extension (both 0), tuples, a trailer
COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\0" + bytes(8)
COPY_TRAILER = b"\xff\xff"
# the binary form of MEASUREMENT's columns but the last (STATUS, UTF-8 text): numpy's
# big-endian types
_NUMBERS = [">i4", ">i4", ">i4", ">i8", ">f8", ">f8", ">f8"]


def binary_rows(chunk: pa.Table) -> memoryview:
    """The rows of `chunk` (MEASUREMENT columns) in PostgreSQL's binary COPY form: per row a
    field count, then per field its length (-1: NULL) and its bytes, big-endian. Rows of one
    layout (which fields are NULL, which STATUS text) are one numpy array of a packed record
    type: each row first the layout's constant bytes (count, lengths, text), then its numbers
    a field at a time, all in one buffer (4x faster than a field at a time into an array per
    layout, joined). No Python per row, and the server parses no text. They go out layout by
    layout: the table has no order, `seq` is each row's place."""
    *numbers, status = (chunk.column(name).combine_chunks() for name in MEASUREMENT)
    if not pa.types.is_dictionary(status.type):
        status = pc.dictionary_encode(status)
    texts: list[bytes | None] = [t.encode() for t in status.dictionary.to_pylist()] + [None]
    # a row's layout: its STATUS text (the last: none), then a bit per number that is NULL
    layout = pc.fill_null(status.indices, len(texts) - 1).to_numpy().astype(np.int64)
    for column in numbers:
        layout = layout * 2 + _nulls(column)
    values = [pc.fill_null(c, 0).to_numpy(zero_copy_only=False) for c in numbers]
    keys, counts = np.unique(layout, return_counts=True)
    records = [_record(texts[key >> len(numbers)], int(key)) for key in keys]
    found = np.empty(sum(int(n) * r.itemsize for r, n in zip(records, counts, strict=True)), "u1")
    at = 0
    for key, count, record in zip(keys, counts, records, strict=True):
        size = int(count) * record.itemsize
        rows = found[at : at + size].reshape(-1, record.itemsize)
        at += size
        rows[:] = np.frombuffer(record.tobytes(), "u1")  # the constant bytes, every row
        fields = rows.reshape(-1).view(record.dtype)
        which = slice(None) if count == len(layout) else np.flatnonzero(layout == key)
        for i, column in enumerate(values):
            if f"v{i}" in (record.dtype.names or ()):
                fields[f"v{i}"] = column[which]  # made big-endian on the way
    return found.data


def _record(text: bytes | None, layout: int) -> np.ndarray:
    """One row of a layout (`binary_rows`) with its constant fields filled in: its record
    type, and the bytes every row of the layout starts from."""
    count = len(_NUMBERS)
    present = [not (layout >> (count - 1 - i)) & 1 for i in range(count)]
    fields = [("count", ">i2")]
    for i, kind in enumerate(_NUMBERS):
        fields += [(f"n{i}", ">i4")] + ([(f"v{i}", kind)] if present[i] else [])
    fields += [("n_text", ">i4")] + ([("text", f"S{len(text)}")] if text else [])
    record = np.zeros(1, fields)
    record["count"] = len(MEASUREMENT)
    for i, kind in enumerate(_NUMBERS):
        record[f"n{i}"] = np.dtype(kind).itemsize if present[i] else -1
    record["n_text"] = -1 if text is None else len(text)
    if text:
        record["text"] = text
    return record


def _nulls(column: pa.Array) -> np.ndarray | int:
    """1 where `column` is NULL (0 for a column without)."""
    return column.is_null().to_numpy(zero_copy_only=False) if column.null_count else 0


def _python_values(chunk: pa.Table) -> list[Any]:
    """The values of `chunk`, row after row, for sqlite3: numbers through numpy (fast), None for
    a missing value (a float NaN binds as NULL too)."""
    flat: list[Any] = [None] * (chunk.num_rows * len(MEASUREMENT))
    for i, name in enumerate(MEASUREMENT):
        column = chunk.column(name).combine_chunks()
        if pa.types.is_string(column.type) or pa.types.is_dictionary(column.type):
            encoded = (
                column if pa.types.is_dictionary(column.type) else pc.dictionary_encode(column)
            )
            texts = np.asarray([*encoded.dictionary.to_pylist(), None], dtype=object)
            codes = pc.fill_null(encoded.indices, len(texts) - 1).to_numpy()
            values = texts[codes].tolist()
        elif pa.types.is_floating(column.type):
            values = column.to_numpy(zero_copy_only=False).tolist()
        else:
            values = pc.fill_null(column, 0).to_numpy().tolist()
            if column.null_count:
                for at in np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False)):
                    values[at] = None
        flat[i :: len(MEASUREMENT)] = values
    return flat


_READ_TYPES = {
    "series": pa.int32(),
    **{name: csvfile.arrow_types()[name] for name in SAMPLE_COLUMNS},
}
_NULLABLE = list(SAMPLE_COLUMNS.values())
_RESULTS_NAME = {column: name for name, column in SAMPLE_COLUMNS.items()}


@dataclass(frozen=True)
class Part:
    """A stored part to read: its id, its rows, and what to add to its series numbers (the
    parts of a run read as one numbers their series one after the other)."""

    id: int
    rows: int
    offset: int = 0


def read_rows(conn: Connection, parts: list[Part]) -> Iterator[pa.Table]:
    """The measurements of `parts` as tables of READ_COLUMNS, in the order `runs export`
    writes them: one part in its own order; several stably sorted by (RUN, REPEAT), the order a
    single-machine `aggregate` writes runs in (a missing RUN or REPEAT last), part by part.

    Read through ADBC (Arrow's database connectivity), apart from the caller's connection (see
    `_Reader`): rows arrive as Arrow record batches, never as Python objects (PostgreSQL's
    driver reads them with ``COPY ... TO STDOUT (FORMAT BINARY)``). Raises AutoprofError when
    the run's rows change while they are read (a delete, on another connection)."""
    expected = sum(p.rows for p in parts)
    found = 0
    with _reader(conn) as reader:
        for table in reader.tables(parts):
            found += table.num_rows
            yield table
    if found != expected:
        raise AutoprofError(f"the run changed while it was read ({found} of {expected} rows)")


def read_part(conn: Connection, part: Part, columns: list[str]) -> Iterator[pa.Table]:
    """The rows of one part in no particular order, each with its `seq`: `series` and the
    sample `columns` named (results names), no other. For what sums rows up and needs no order
    (a run's summary): one query, where `read_rows` reads a window at a time and puts each in
    order. Raises AutoprofError when the part's rows change while they are read."""
    wanted = [SAMPLE_COLUMNS[name] for name in columns]
    series, where = f"m.series + {int(part.offset)}", f"m.part_id = {int(part.id)}"
    found = 0
    with _reader(conn) as reader:
        for table in reader.query(series, "measurement m", where, seq=True, columns=wanted):
            found += table.num_rows
            yield table
    if found != part.rows:
        raise AutoprofError(f"the run changed while it was read ({found} of {part.rows} rows)")


class _Reader:
    """Queries through ADBC, as tables of READ_COLUMNS: on PostgreSQL a connection of its own
    (`adbc`), on SQLite a child process per query (`autoprof.store.sqlite_arrow`)."""

    def __init__(self, adbc: Any, path: str) -> None:
        self.adbc, self.path = adbc, path
        self.postgresql = adbc is not None

    def tables(self, parts: list[Part]) -> Iterator[pa.Table]:
        if len(parts) > 1:
            shift = " ".join(f"WHEN {int(p.id)} THEN {int(p.offset)}" for p in parts)
            order = "s.plan_run IS NULL, s.plan_run, s.repeat IS NULL, s.repeat, r.part, m.seq"
            yield from self.query(
                f"m.series + CASE m.part_id {shift} END",
                "measurement m JOIN series s ON s.part_id = m.part_id AND s.number = m.series "
                "JOIN run_part r ON r.id = m.part_id",
                f"m.part_id IN ({', '.join(str(int(p.id)) for p in parts)}) ORDER BY {order}",
            )
            return
        (part,) = parts
        series, where = f"m.series + {int(part.offset)}", f"m.part_id = {int(part.id)}"
        if not self.postgresql:  # the table is the (part_id, seq) b-tree: read in its order
            yield from self.query(series, "measurement m", f"{where} ORDER BY m.seq")
            return
        # a window of seq at a time, found by the part's BRIN index (built whole at upload),
        # put in order here: no sort in the server, and memory bounded by the window
        for start in range(0, part.rows, WINDOW):
            window = f"{where} AND m.seq >= {start} AND m.seq < {start + WINDOW}"
            table = pa.concat_tables(self.query(series, "measurement m", window, seq=True))
            ordered = np.argsort(table.column("seq").to_numpy(), kind="stable")
            yield table.drop_columns(["seq"]).take(pa.array(ordered))

    def query(
        self,
        series: str,
        source: str,
        where: str,
        seq: bool = False,
        columns: list[str] = _NULLABLE,
    ) -> Iterator[pa.Table]:
        """Tables of `series` and the sample `columns` (measurement's names), then `seq`."""
        if self.postgresql:
            selected = [f"{series} AS series", *(f"m.{c}" for c in columns)]
        else:  # the driver types a column by its first values: never let one start NULL
            selected = [f"{series} AS series"]
            selected += [f"coalesce(m.{c}, {_ZERO[c]})" for c in columns]
            selected.append(" | ".join(f"((m.{c} IS NULL) << {i})" for i, c in enumerate(columns)))
        if seq:
            selected.append("m.seq")
        query = f"SELECT {', '.join(selected)} FROM {source} WHERE {where}"
        batches = self._postgresql(query) if self.postgresql else _sqlite(self.path, query)
        for batch in batches:
            yield self._typed(batch, seq, columns)

    def _postgresql(self, query: str) -> Iterator[pa.RecordBatch]:
        cursor = self.adbc.cursor()
        try:
            cursor.execute(query)
            yield from cursor.fetch_record_batch()
        finally:
            cursor.close()

    def _typed(self, batch: pa.RecordBatch, seq: bool, columns: list[str]) -> pa.Table:
        arrays = list(batch.columns)
        if not self.postgresql:
            nulls = arrays.pop(1 + len(columns)).to_numpy()
            for i in range(len(columns)):
                missing = (nulls >> i) & 1 == 1
                if missing.any():
                    arrays[i + 1] = pc.if_else(
                        missing, pa.scalar(None, arrays[i + 1].type), arrays[i + 1]
                    )
        names = ["series", *(_RESULTS_NAME[c] for c in columns)] + (["seq"] if seq else [])
        typed = [
            a.cast(_READ_TYPES[n]) if n in _READ_TYPES else a
            for a, n in zip(arrays, names, strict=False)
        ]
        return pa.table(typed, names=names)


_ZERO = {c: ("''" if c == "status" else "0") for c in _NULLABLE}


@contextlib.contextmanager
def _reader(conn: Connection) -> Iterator[_Reader]:
    """What reads `conn`'s database through ADBC (PostgreSQL: a connection, closed after)."""
    url = conn.engine.url
    if conn.dialect.name != "postgresql":
        yield _Reader(None, str(Path(url.database or "").expanduser().resolve()))
        return
    import adbc_driver_postgresql.dbapi as adbc_pg

    adbc = adbc_pg.connect(url.set(drivername="postgresql").render_as_string(hide_password=False))
    try:
        with adbc.cursor() as cursor:
            cursor.execute(f"SET work_mem = '{_WORK_MEM}'")
            cursor.execute("SET jit = off")  # compiling a window's query costs more than it saves
            cursor.execute("SET max_parallel_workers_per_gather = 0")
        yield _Reader(adbc, "")
    finally:
        adbc.close()


def _sqlite(path: str, query: str) -> Iterator[pa.RecordBatch]:
    """The rows of `query` on the SQLite file `path`, from a child process (see its module)."""
    argv = children.python_argv("autoprof.store.sqlite_arrow", path, str(BATCH), query)
    child = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=children.SAFE_CWD,
        env=children.plain_env(),
    )
    try:
        assert child.stdout is not None
        # nothing written: the child failed, and says why below
        with contextlib.suppress(pa.ArrowInvalid):
            yield from pa.ipc.open_stream(child.stdout)
    finally:
        if child.poll() is None and child.stdout is not None:
            child.stdout.close()  # a reader stopping early: the child ends on a broken pipe
        _, error = child.communicate()
    if child.returncode:
        raise AutoprofError(f"reading {path}: {error.decode(errors='replace').strip()}")


class Spool:
    """The pieces of a table of kept pieces (part_text, part_columns: a part, a piece number, a
    count, its bytes) for one part, spooled to a temporary file as one thread makes them
    (`add`), stored in order by another as they come (`store`): memory holds a piece. An upload
    stores them between its COPY statements, while the server has time to spare."""

    def __init__(self, table: str, fields: tuple[str, ...]) -> None:
        self.table, self.fields = table, fields
        self._file = tempfile.TemporaryFile(buffering=0)  # noqa: SIM115  # closed by close()
        self._made: list[tuple[int, int, int]] = []  # (count, offset, length) of each piece
        self._end = 0
        self._stored = 0  # pieces stored

    def add(self, count: int, data: Any) -> None:
        """A piece (`data`: bytes, or a buffer) of `count` rows or bytes, after the others."""
        left = memoryview(data).cast("B")
        length = len(left)
        while left:
            left = left[self._file.write(left) :]
        self._made.append((count, self._end, length))  # once written: `store` may read it
        self._end += length

    def store(self, conn: driver.Connection, part_id: int) -> None:
        """Store the pieces made and not stored yet as `part_id`'s."""
        made = self._made[self._stored :]
        if not made:
            return
        rows = (
            (part_id, self._stored + n, count, os.pread(self._file.fileno(), length, offset))
            for n, (count, offset, length) in enumerate(made)
        )
        write_pieces(conn, self.table, self.fields, rows)
        self._stored += len(made)

    def drop(self, conn: driver.Connection, part_id: int) -> None:
        """Delete the pieces stored as `part_id`'s (the last call: none are kept after all)."""
        if self._stored:
            conn.execute(f"DELETE FROM {self.table} WHERE part_id = %s", [part_id])
            self._stored = 0

    def close(self) -> None:
        self._file.close()


def write_pieces(
    conn: driver.Connection, table: str, fields: tuple[str, ...], rows: Iterable[tuple[Any, ...]]
) -> None:
    """Rows of a table of kept pieces, one at a time: memory holds a piece. On PostgreSQL by
    binary COPY: a bytea as a parameter goes out as hex."""
    names = ", ".join(fields)
    if not conn.postgresql:
        conn.executemany(f"INSERT INTO {table} ({names}) VALUES (%s, %s, %s, %s)", rows)
        return
    with (
        conn.driver.cursor() as cursor,
        cursor.copy(f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)") as copy,
    ):
        copy.set_types(["int4", "int4", "int4", "bytea"])
        for row in rows:
            copy.write_row(row)


def piece_count(conn: Connection, table: str, part_id: int) -> int:
    """How many pieces a table of kept pieces (`write_pieces`) holds for `part_id` (0: none)."""
    found = conn.exec_driver_sql(
        f"SELECT max(piece) FROM {table} WHERE part_id = {int(part_id)}"
    ).scalar()
    return 0 if found is None else found + 1
