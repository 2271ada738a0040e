"""Per-function rows in the store: the sampled recordings kept in a profile's folder
(`autoprof record -o OUT/NAME -e ... -- CMD` next to `autoprof profile -o OUT`) and trace flame
graphs kept there (`autoprof flamegraph --trace LOG --binary ELF --save OUT/NAME`) are read with
`autoprof report`'s rules when the folder is uploaded, stored with its part, and read back as
the same tables for `runs show` and `runs export --report`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from autoprof.errors import AutoprofError
from autoprof.functions.table import Cell, Row, Table, assemble
from autoprof.store import driver

if TYPE_CHECKING:  # the readers' connections; the upload writes without SQLAlchemy
    from sqlalchemy import Connection

_COLUMNS = ("part_id", "recording", "row", "event_index", "symbol", "dso", "event", "period",
            "samples")  # fmt: skip


def recordings(out: Path) -> list[Path]:
    """The `record` folders and kept trace flame graphs directly inside a profile folder."""
    # here, not above: what reads recordings imports perf's and the catalog's modules, which
    # every store command would pay for
    from autoprof.flame import kept
    from autoprof.perf.record import PERF_DATA, RECORD_INFO

    return sorted(
        d
        for d in out.iterdir()
        if ((d / RECORD_INFO).is_file() and (d / PERF_DATA).is_file()) or kept.is_kept(d)
    )


def load_functions(out: Path) -> dict[str, Table]:
    """Recording name -> its per-function table (by symbol). Needs perf (`perf script`)."""
    folders = recordings(out)
    if not folders:
        return {}
    from autoprof.functions.recording import read_table  # here: it imports perf's and the catalog's

    tables = {}
    for folder in folders:
        try:
            tables[folder.name], _ = read_table(folder)
        except AutoprofError as err:
            raise AutoprofError(f"{folder}: cannot read its samples for the store: {err}") from None
    return tables


def insert_functions(conn: driver.Connection, part_id: int, tables: dict[str, Table]) -> int:
    """Store `tables` as rows of `part_id`; the number of rows written."""
    values = []
    for name, table in tables.items():
        for rank, row in enumerate(table.rows):
            for index, event in enumerate(table.events):
                cell = row.cells.get(event)
                if cell is not None:
                    values.append(
                        (part_id, name, rank, index, row.key, row.dso, event, cell.period,
                         cell.samples)
                    )  # fmt: skip
    if values:
        conn.executemany(
            f"INSERT INTO function_row ({', '.join(_COLUMNS)}) "
            f"VALUES ({', '.join(['%s'] * len(_COLUMNS))})",
            values,
        )
    return len(values)


def read_functions(conn: Connection, run_id: int) -> dict[str, Table]:
    """The stored tables of a run: recording name (``partN/name`` for N > 1) -> Table."""
    from sqlalchemy import select

    from autoprof.store.models import FunctionRow, RunPart

    f = FunctionRow
    found = conn.execute(
        select(RunPart.part, f.recording, f.row, f.event_index, f.symbol, f.dso, f.event,
               f.period, f.samples)
        .join(RunPart, RunPart.id == f.part_id)
        .where(RunPart.run_id == run_id)
        .order_by(RunPart.part, f.recording, f.row, f.event_index)
    ).all()  # fmt: skip
    grouped: dict[str, tuple[dict[int, Row], dict[int, str]]] = {}
    for part, recording, rank, index, symbol, dso, event, period, samples in found:
        name = recording if part == 1 else f"part{part}/{recording}"
        rows, events = grouped.setdefault(name, ({}, {}))
        row = rows.setdefault(rank, Row(symbol, dso))
        row.cells[event] = Cell(period, samples)
        events[index] = event
    tables = {}
    for name, (rows, events) in grouped.items():
        totals: dict[str, Cell] = {}
        for row in rows.values():
            for event, cell in row.cells.items():
                total = totals.setdefault(event, Cell())
                total.period += cell.period
                total.samples += cell.samples
        order = [events[i] for i in sorted(events)]
        tables[name] = assemble("symbol", list(rows.values()), totals, None, order)
    return tables


def _function(table: Table, row: Row) -> dict:
    shares = {
        e: {"period": row.period(e), "percent": round(table.share(row, e), 4)} for e in table.events
    }
    return {"symbol": row.key, "dso": row.dso, **shares}


def summary(tables: dict[str, Table], top: int = 10) -> dict[str, dict]:
    """Plain data for `runs show`: per recording its events, totals and top functions."""
    return {
        name: {
            "events": table.events,
            "totals": {e: table.totals[e].period for e in table.events},
            "functions": [_function(table, row) for row in table.rows[:top]],
        }
        for name, table in tables.items()
    }
