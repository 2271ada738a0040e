"""A stored run back as the results.csv `aggregate` wrote, byte for byte, streamed. A one-part
run whose uploaded text was canonical sends that text, kept compressed in the store
(`store.text`). Otherwise the rows come from the database a window at a time
(`bulk.read_rows`), each window is joined to the run's series (few: held as pyarrow
dictionaries, so each event name or CPU is formatted once) and written by `csvfile.encode`.
Memory stays that of a window, whatever the run's size, and the first bytes leave before the
last rows are read.

One part: its rows in their original order. Several parts: stably sorted by (RUN, REPEAT),
which is the order a single-machine `aggregate` writes runs in.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Connection, Row, select

from autoprof.errors import AutoprofError
from autoprof.results import csvfile
from autoprof.store import bulk, text
from autoprof.store.models import RunPart, Series
from autoprof.store.queries import find_run
from autoprof.store.tables import RUN_COMPLETE, SERIES_COLUMNS
from autoprof.util import spreadsheet
from autoprof.util.prefetch import prefetched

if TYPE_CHECKING:
    import pandas as pd

ENCODED_ROWS = 1 << 16  # rows turned into text at a time: a few MB, and several times that
# in the steps between


def chunks(
    conn: Connection, ident: str, *, partial: bool = False, excel_safe: bool = False
) -> Iterator[pa.Table]:
    """The run's rows as pyarrow tables of the result columns, in results.csv's order (the run
    is looked up, and an incomplete one refused unless `partial`, before the first chunk).
    `excel_safe` quotes text cells a spreadsheet would run (`autoprof.util.spreadsheet`)."""
    parts = _parts(conn, ident, partial)
    series, read = _series(conn, [p.id for p in parts], [p.rows for p in parts])
    if excel_safe:
        series = {name: _safe(values) for name, values in series.items()}
    return _joined(conn, series, read, excel_safe)


def _parts(conn: Connection, ident: str, partial: bool) -> Sequence[Row[int, int]]:
    """The run's parts (id, rows) in order; an incomplete run refused unless `partial`."""
    run = find_run(conn, ident)
    parts = conn.execute(
        select(RunPart.id, RunPart.rows).where(RunPart.run_id == run.id).order_by(RunPart.part)
    ).all()
    if run.status != RUN_COMPLETE and not partial:
        raise AutoprofError(
            f"run {run.uuid} is incomplete ({len(parts)} of {run.parts_expected} parts stored); "
            "use --partial to export the parts present"
        )
    return parts


def _joined(
    conn: Connection, series: dict[str, pa.Array], read: list[bulk.Part], excel_safe: bool
) -> Iterator[pa.Table]:
    if not read:
        return
    for rows in prefetched(bulk.read_rows(conn, read), ahead=1):  # the next one read meanwhile
        number = rows.column("series").combine_chunks()
        columns = {
            name: pa.DictionaryArray.from_arrays(number, series[name]) for name in SERIES_COLUMNS
        }
        for name in bulk.READ_COLUMNS[1:]:
            columns[name] = rows.column(name)
        if excel_safe:
            columns["STATUS"] = _safe(pc.dictionary_encode(rows.column("STATUS").combine_chunks()))
        yield pa.table([columns[name] for name in csvfile.COLUMNS], names=csvfile.COLUMNS)


def _series(
    conn: Connection, part_ids: list[int], rows: list[int]
) -> tuple[dict[str, pa.Array], list[bulk.Part]]:
    """Every series of the parts, numbered one part after the other, as one array per result
    column; and the parts to read, each with the offset of its numbers."""
    found = list(
        conn.execute(
            select(Series.part_id, *(Series.__table__.c[c] for c in SERIES_COLUMNS.values()))
            .where(Series.part_id.in_(part_ids))
            .order_by(Series.part_id, Series.number)
        ).all()
    )
    position = {part_id: i for i, part_id in enumerate(part_ids)}
    found.sort(key=lambda row: position[row[0]])  # stable: by part, then number
    counts = {part_id: 0 for part_id in part_ids}
    for row in found:
        counts[row[0]] += 1
    offsets, total = [], 0
    for part_id in part_ids:
        offsets.append(total)
        total += counts[part_id]
    types = csvfile.arrow_types()
    columns = list(zip(*found, strict=True))[1:] if found else [()] * len(SERIES_COLUMNS)
    series = {
        name: pa.array(values, types[name])
        for name, values in zip(SERIES_COLUMNS, columns, strict=True)
    }
    read = [
        bulk.Part(part_id, n, offset)
        for part_id, n, offset in zip(part_ids, rows, offsets, strict=True)
        if n
    ]
    return series, read


def _safe(values: Any) -> Any:
    """A text dictionary (or dictionary array) with its cells made spreadsheet-safe."""
    if pa.types.is_dictionary(values.type):
        return pa.DictionaryArray.from_arrays(values.indices, _safe(values.dictionary))
    if not pa.types.is_string(values.type):
        return values
    return pa.array(spreadsheet.row(values.to_pylist()), pa.string())


def csv_chunks(
    conn: Connection, ident: str, *, partial: bool = False, excel_safe: bool = False
) -> Iterator[bytes]:
    """results.csv's bytes, header first, a few MB at a time (the run is looked up and checked
    before this returns): a one-part run's kept text (`store.text`) when it has one, else
    written from its rows (`chunks`)."""
    parts = _parts(conn, ident, partial)
    if len(parts) == 1 and not excel_safe and (count := text.pieces(conn, parts[0].id)):
        return itertools.chain([csvfile.HEADER], text.lines(conn, parts[0].id, count))
    return _encoded(chunks(conn, ident, partial=partial, excel_safe=excel_safe))


def csv_length(conn: Connection, ident: str, *, partial: bool = False) -> int | None:
    """results.csv's length in bytes where `csv_chunks` sends a kept text (known before any of
    it is read: the web download's Content-Length); None where it is written from rows."""
    parts = _parts(conn, ident, partial)
    if len(parts) == 1 and (kept := text.size(conn, parts[0].id)):
        return len(csvfile.HEADER) + kept
    return None


def _encoded(tables: Iterator[pa.Table]) -> Iterator[bytes]:
    yield csvfile.HEADER
    for table in tables:
        for start in range(0, table.num_rows, ENCODED_ROWS):  # its text and the steps to it
            yield csvfile.encode(table.slice(start, ENCODED_ROWS))


def frame(conn: Connection, ident: str, *, partial: bool = False) -> pd.DataFrame:
    """The run's results as one pandas frame (for analyses that need it whole: `compare`)."""
    tables = [csvfile.decoded(t) for t in chunks(conn, ident, partial=partial)]
    if not tables:
        return csvfile.empty_frame()
    return csvfile.normalize(pa.concat_tables(tables).to_pandas())
