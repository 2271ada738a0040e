"""A one-part run's measurement columns, kept compressed beside its rows (`PartColumns`): what
its summary reads (`store.summary`: each row's series number, INDEX, TIME, SAMPLE_VALUE and
PERCENT_RUNNING, in the rows' order), so that a run's page, opened first after its upload,
reads a few MB instead of every row back from the database (1 M rows: 1.5 s of a 2.5 s first
open). The upload has these columns in hand already (`bulk.measurement_rows`): writing them
costs it a tenth of a second.

Arrow IPC streams with LZ4-compressed buffers, a piece per PIECE_ROWS rows, spooled to a
temporary file while the rows are loaded and stored with them; read back a piece at a time:
memory holds a piece whatever the run's size. A part without them (a part of a split run, or
one stored before migration 0010) is read from its rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from autoprof.errors import AutoprofError
from autoprof.store import bulk, driver
from autoprof.store.tables import SAMPLE_COLUMNS

if TYPE_CHECKING:  # the readers' connections; the upload writes without SQLAlchemy
    from sqlalchemy import Connection

PIECE_ROWS = 1 << 16
_TABLE = "part_columns"
# the summary's columns: results names, as `bulk.read_part` gives them, and their types
COLUMNS = ["series", "INDEX", "TIME", "SAMPLE_VALUE", "PERCENT_RUNNING"]
SCHEMA = pa.schema(
    [
        ("series", pa.int32()),
        ("INDEX", pa.int64()),
        ("TIME", pa.float64()),
        ("SAMPLE_VALUE", pa.float64()),
        ("PERCENT_RUNNING", pa.float64()),
    ]
)
_SOURCE = ["series", *(SAMPLE_COLUMNS[name] for name in COLUMNS[1:])]  # measurement names
# LZ4: decompressed 3x faster than zstd; in the writer's thread (the upload's others are busy)
_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4", use_threads=False)


class Kept:
    """The columns of a part's measurement rows (`bulk.measurement_rows` tables, `add`ed in
    order), a compressed piece of PIECE_ROWS rows at a time spooled to a temporary file
    (`bulk.Spool`); the upload stores those made so far between its COPY statements
    (`store_made`), the rest at the end (`keep`). Use as a context manager: leaving drops the
    file."""

    def __init__(self) -> None:
        self._spool = bulk.Spool(_TABLE, _FIELDS)
        self._sink: Any = None  # the piece being written, and its writer
        self._writer: Any = None
        self._rows = 0  # of the piece being written

    def add(self, table: pa.Table) -> None:
        if self._writer is None:
            self._sink = pa.BufferOutputStream()
            self._writer = pa.ipc.new_stream(self._sink, SCHEMA, options=_OPTIONS)
        columns = [
            table.column(name).cast(t) for name, t in zip(_SOURCE, SCHEMA.types, strict=True)
        ]
        self._writer.write_table(pa.table(columns, schema=SCHEMA))
        self._rows += table.num_rows
        if self._rows >= PIECE_ROWS:
            self._end_piece()

    def _end_piece(self) -> None:
        if self._writer is None:
            return
        self._writer.close()
        self._spool.add(self._rows, self._sink.getvalue())
        self._sink, self._writer, self._rows = None, None, 0

    def store_made(self, conn: driver.Connection, part_id: int) -> None:
        """Store the pieces made so far as `part_id`'s columns."""
        self._spool.store(conn, part_id)

    def keep(self, conn: driver.Connection, part_id: int) -> None:
        """Store the rest of the pieces as `part_id`'s columns."""
        self._end_piece()
        self._spool.store(conn, part_id)

    def __enter__(self) -> Kept:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._writer is not None:
            self._writer.close()
        self._spool.close()


_FIELDS = ("part_id", "piece", "rows", "data")


def pieces(conn: Connection, part_id: int) -> int:
    """How many pieces of columns `part_id` has (0: none kept)."""
    return bulk.piece_count(conn, _TABLE, part_id)


def read(conn: Connection, part_id: int, count: int) -> Iterator[pa.Table]:
    """The `count` pieces of `part_id`'s columns, in order, a table of COLUMNS each. A store
    shared by many machines may hold pieces this process did not write: each must be the
    columns autoprof writes, in SCHEMA, and whole (Arrow's full validation), else the read
    stops with AutoprofError."""
    for piece in range(count):
        data = _piece(conn, part_id, piece)
        try:
            stream = pa.ipc.open_stream(pa.BufferReader(data))
            if not stream.schema.equals(SCHEMA):
                raise ValueError(f"schema {stream.schema.names}, not {COLUMNS}")
            table = stream.read_all()
            table.validate(full=True)
        except (pa.ArrowException, ValueError) as err:
            raise AutoprofError(f"part {part_id}'s kept columns, piece {piece}: {err}") from None
        yield table


def _piece(conn: Connection, part_id: int, piece: int) -> bytes:
    if conn.dialect.name == "postgresql":  # bytea in binary: its text form, hex, is 5x slower
        driver = conn.connection.driver_connection
        assert driver is not None  # an open connection has its driver's
        with driver.cursor(binary=True) as cursor:
            cursor.execute(_PIECE, (part_id, piece), binary=True)
            found = cursor.fetchone()
        assert found is not None  # pieces 0 .. count - 1 exist
        return found[0]
    return conn.exec_driver_sql(_PIECE.replace("%s", "?"), (part_id, piece)).scalar_one()


_PIECE = f"SELECT data FROM {_TABLE} WHERE part_id = %s AND piece = %s"
