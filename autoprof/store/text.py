"""A part's results.csv lines kept in the store, compressed, beside its rows (`PartText`): when
the uploaded file is the canonical text of its rows (`results.ResultsChunks`, checked as it is
read), it *is* what `runs export` would write from them, so exporting a one-part run, or
downloading it from the web server, sends these pieces decompressed at the speed of the disk
instead of formatting every number again (the slow part of writing a million rows).

Pieces of PIECE_BYTES, each zstd-compressed (level 1: about 5x smaller, a few hundred MB/s
each way), are made a few ahead in a thread while one is sent to the database, and read back
one at a time: memory holds a few pieces whatever the run's size.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from sqlalchemy import Connection, insert, select

from autoprof.store.models import PartText
from autoprof.util.prefetch import prefetched

PIECE_BYTES = 4 << 20
CODEC = "zstd"
LEVEL = 1


def keep(conn: Connection, part_id: int, path: Path) -> None:
    """Store the lines of the results file `path` (its header aside) as `part_id`'s text."""
    for piece, (size, data) in enumerate(prefetched(_compressed(path), ahead=2)):
        conn.execute(insert(PartText).values(part_id=part_id, piece=piece, size=size, data=data))


def _compressed(path: Path) -> Iterator[tuple[int, bytes]]:
    codec = pa.Codec(CODEC, compression_level=LEVEL)
    with open(path, "rb") as file:
        file.readline()
        while block := file.read(PIECE_BYTES):
            yield len(block), codec.compress(block, asbytes=True)


def pieces(conn: Connection, part_id: int) -> int:
    """How many pieces of text `part_id` has (0: none kept)."""
    found = conn.scalar(
        select(PartText.piece)
        .where(PartText.part_id == part_id)
        .order_by(PartText.piece.desc())
        .limit(1)
    )
    return 0 if found is None else found + 1


def lines(conn: Connection, part_id: int, count: int) -> Iterator[bytes]:
    """The `count` pieces of `part_id`'s text, decompressed, in order (the next one read and
    decompressed in a thread meanwhile)."""
    return prefetched(_decompressed(conn, part_id, count), ahead=1)


def _decompressed(conn: Connection, part_id: int, count: int) -> Iterator[bytes]:
    codec = pa.Codec(CODEC)
    for size, data in _stored(conn, part_id, count):
        yield codec.decompress(data, decompressed_size=size, asbytes=True)


def _stored(conn: Connection, part_id: int, count: int) -> Iterator[tuple[int, bytes]]:
    """(size, data) of each piece, in order, a query each."""
    if conn.dialect.name == "postgresql":  # bytea in binary: its text form, hex, is 5x slower
        driver = conn.connection.driver_connection
        assert driver is not None  # an open connection has its driver's
        with driver.cursor(binary=True) as cursor:
            for piece in range(count):
                cursor.execute(_PIECE, (part_id, piece), binary=True)
                yield cursor.fetchone()
        return
    for piece in range(count):
        found = conn.execute(
            select(PartText.size, PartText.data).where(
                PartText.part_id == part_id, PartText.piece == piece
            )
        ).one()
        yield found.size, found.data


_PIECE = "SELECT size, data FROM part_text WHERE part_id = %s AND piece = %s"
