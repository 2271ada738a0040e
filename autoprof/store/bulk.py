"""The measurement table's bulk paths, each driver's own, in chunks: a run is never whole in
memory, whatever its size.

In: chunks of a results file (`autoprof.results.read_chunks`, pyarrow tables) become a part's
series (`SeriesNumbers`, numbered in the order they first appear) and its narrow measurement
rows, sent with PostgreSQL's ``COPY measurement FROM STDIN`` (CSV text that pyarrow writes, a
thread sending one chunk while the next is made) or SQLite prepared inserts (``executemany``),
inside the upload's one transaction.

Out: a part's rows in their order (`seq`) as pyarrow tables: on PostgreSQL ``COPY (SELECT ...
ORDER BY seq) TO STDOUT`` over windows of `seq` (the BRIN index on (part_id, seq) finds a
window's pages, and each window sorts in memory), read a window ahead in a thread; on SQLite the
cursor over the table's own (part_id, seq) order. Values are exact both ways: PostgreSQL prints
and pyarrow writes floats in shortest round-trip form.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
from sqlalchemy import Connection

from autoprof import results
from autoprof.store.models import MEASUREMENT_INDEX, SAMPLE_COLUMNS, SERIES_COLUMNS

MEASUREMENT = ["part_id", "seq", "series", *SAMPLE_COLUMNS.values()]
# what a read returns per row: the series number, then the sample columns (results names)
READ_COLUMNS = ["series", *SAMPLE_COLUMNS]
WINDOW = 1 << 18  # rows per ordered read on PostgreSQL: a window sorts in memory
_WORK_MEM = "128MB"  # a window's sort, with room


class SeriesNumbers:
    """The series of one part (its rows' values in SERIES_COLUMNS), numbered 0, 1, ... in the
    order they first appear, chunk after chunk."""

    def __init__(self) -> None:
        self.numbers: dict[tuple[Any, ...], int] = {}

    def number(self, table: pa.Table) -> np.ndarray:
        """The series number of each row of `table` (new series are numbered on the way)."""
        if table.num_rows == 0:
            return np.zeros(0, np.int32)
        key: np.ndarray | None = None
        codes, dictionaries = [], []
        for name in SERIES_COLUMNS:
            encoded = pc.dictionary_encode(
                table.column(name).combine_chunks(), null_encoding="encode"
            )
            code = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            codes.append(code)
            dictionaries.append(encoded.dictionary)
            # combined codes stay dense (each step encoded again): no overflow, any width
            joined = code if key is None else key * len(encoded.dictionary) + code
            key = pc.dictionary_encode(pa.array(joined)).indices.to_numpy().astype(np.int64)
        assert key is not None
        # codes are numbered in order of first appearance; the row where each first appears
        first = np.empty(int(key.max()) + 1, np.int64)
        first[key[::-1]] = np.arange(len(key) - 1, -1, -1)
        values = [
            d.take(pa.array(c[first])).to_pylist()
            for c, d in zip(codes, dictionaries, strict=False)
        ]
        number = np.fromiter(
            (self.numbers.setdefault(v, len(self.numbers)) for v in zip(*values, strict=True)),
            np.int32,
            len(first),
        )
        return number[key]

    def rows(self, part_id: int) -> list[dict[str, Any]]:
        """The `series` table's rows of this part."""
        names = list(SERIES_COLUMNS.values())
        return [
            {"part_id": part_id, "number": n, **dict(zip(names, values, strict=True))}
            for values, n in self.numbers.items()
        ]


def _no_nan(column: pa.Array) -> pa.Array:
    """NaN as a missing value (NULL), as results files mean it."""
    if pc.any(pc.is_nan(column)).as_py():
        return pc.if_else(pc.is_nan(column), pa.scalar(None, column.type), column)
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
        values = table.column(name).combine_chunks()
        columns[column] = _no_nan(values) if pa.types.is_floating(values.type) else values
    return pa.table(columns)


def write_measurements(conn: Connection, chunks: Iterable[pa.Table]) -> None:
    """Insert `chunks` (MEASUREMENT columns) through the driver's bulk path, in the
    connection's transaction."""
    driver = conn.connection.driver_connection
    assert driver is not None  # an open connection has its driver's
    names = ", ".join(MEASUREMENT)
    if conn.dialect.name == "postgresql":
        from psycopg.copy import QueuedLibpqWriter

        with driver.cursor() as cursor:
            statement = f"COPY measurement ({names}) FROM STDIN (FORMAT CSV)"
            with cursor.copy(statement, writer=QueuedLibpqWriter(cursor)) as copy:
                for chunk in chunks:
                    text = io.BytesIO()
                    pcsv.write_csv(chunk, text, pcsv.WriteOptions(include_header=False))
                    copy.write(text.getbuffer())
        return
    marks = ", ".join("?" * len(MEASUREMENT))
    insert = f"INSERT INTO measurement ({names}) VALUES ({marks})"
    for chunk in chunks:
        driver.executemany(insert, _python_rows(chunk))


def index_new_rows(conn: Connection) -> None:
    """PostgreSQL: summarize the page ranges the load added in the BRIN index (the rows of the
    open transaction included), so that the first export reads only its own pages."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT brin_summarize_new_values('{MEASUREMENT_INDEX}')")


def _python_rows(chunk: pa.Table) -> Iterator[tuple]:
    """The rows of `chunk` as tuples for sqlite3: numbers through numpy (fast), None for a
    missing value (a float NaN binds as NULL too)."""
    columns: list[Any] = []
    for name in MEASUREMENT:
        column = chunk.column(name).combine_chunks()
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            encoded = pc.dictionary_encode(column)
            texts = np.asarray([*encoded.dictionary.to_pylist(), None], dtype=object)
            codes = pc.fill_null(encoded.indices, len(texts) - 1).to_numpy()
            columns.append(texts[codes].tolist())
        elif pa.types.is_floating(column.type):
            columns.append(column.to_numpy(zero_copy_only=False).tolist())
        else:
            values = pc.fill_null(column, 0).to_numpy().tolist()
            if column.null_count:
                for i in np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False)):
                    values[i] = None
            columns.append(values)
    return zip(*columns, strict=True)


_READ_TYPES = {
    "series": pa.int32(),
    **{name: results.arrow_types()[name] for name in SAMPLE_COLUMNS},
}
_SAMPLES = ", ".join(f"m.{c}" for c in SAMPLE_COLUMNS.values())


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
    single-machine `aggregate` writes runs in (a missing RUN or REPEAT last), part by part."""
    if len(parts) == 1:
        (part,) = parts
        where = f"m.part_id = {int(part.id)}"
        if conn.dialect.name == "postgresql":
            windows = (
                f"{where} AND m.seq >= {start} AND m.seq < {start + WINDOW}"
                for start in range(0, part.rows, WINDOW)
            )
            return _copy_out(
                conn, (_select(f"m.series + {part.offset}", w, "m.seq") for w in windows)
            )
        return _fetch(conn, _select(f"m.series + {part.offset}", where, "m.seq"))
    shift = " ".join(f"WHEN {int(p.id)} THEN {int(p.offset)}" for p in parts)
    query = _select(
        f"m.series + CASE m.part_id {shift} END",
        f"m.part_id IN ({', '.join(str(int(p.id)) for p in parts)})",
        "s.plan_run IS NULL, s.plan_run, s.repeat IS NULL, s.repeat, r.part, m.seq",
        "JOIN series s ON s.part_id = m.part_id AND s.number = m.series "
        "JOIN run_part r ON r.id = m.part_id",
    )
    return _copy_out(conn, [query]) if conn.dialect.name == "postgresql" else _fetch(conn, query)


def _select(series: str, where: str, order: str, joins: str = "") -> str:
    return f"SELECT {series}, {_SAMPLES} FROM measurement m {joins} WHERE {where} ORDER BY {order}"


def _fetch(conn: Connection, query: str) -> Iterator[pa.Table]:
    """SQLite: the query's rows through the cursor, WINDOW at a time."""
    driver = conn.connection.driver_connection
    assert driver is not None
    cursor = driver.execute(query)
    while batch := cursor.fetchmany(WINDOW):
        columns = zip(READ_COLUMNS, zip(*batch, strict=True), strict=True)
        yield pa.table([pa.array(v, _READ_TYPES[n]) for n, v in columns], names=READ_COLUMNS)


def _copy_out(conn: Connection, queries: Iterable[str]) -> Iterator[pa.Table]:
    """PostgreSQL: the queries' rows one after the other, through `COPY (...) TO STDOUT`,
    parsed by pyarrow's streaming CSV reader as they arrive."""
    driver = conn.connection.driver_connection
    assert driver is not None
    driver.execute(f"SET LOCAL work_mem = '{_WORK_MEM}'")
    driver.execute("SET LOCAL jit = off")  # compiling a window's query costs more than it saves
    driver.execute("SET LOCAL max_parallel_workers_per_gather = 0")

    def data() -> Iterator[bytes]:
        with driver.cursor() as cursor:
            for query in queries:
                with cursor.copy(f"COPY ({query}) TO STDOUT (FORMAT CSV)") as copy:
                    yield from copy  # a row at a time, as libpq receives them

    reader = pcsv.open_csv(  # pyarrow reads and parses ahead in its own threads
        _Chunks(data()),
        read_options=pcsv.ReadOptions(column_names=READ_COLUMNS, block_size=4 << 20),
        convert_options=pcsv.ConvertOptions(
            column_types=_READ_TYPES,
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,  # "" is an empty text, an empty field NULL
        ),
    )
    for batch in reader:
        yield pa.Table.from_batches([batch])


class _Chunks(io.RawIOBase):
    """A read-only file over an iterator of byte strings (what pyarrow's reader wants)."""

    def __init__(self, chunks: Iterator[Any]) -> None:
        self.chunks = chunks
        self.pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        """Fill `buffer` (short only at the end): pyarrow reads a block at a time."""
        done = 0
        while done < len(buffer):
            if not self.pending:
                chunk = next(self.chunks, None)
                if chunk is None:
                    break
                self.pending = memoryview(chunk)
            n = min(len(buffer) - done, len(self.pending))
            buffer[done : done + n] = self.pending[:n]
            self.pending = self.pending[n:]
            done += n
        return done
