"""A child process that runs one query on a SQLite file through ADBC (Arrow's database
connectivity) and writes its rows to standard output as an Arrow IPC stream: a million rows
cross in a fraction of a second, where Python's sqlite3 module makes a tuple of objects per row.

Why a process of its own: ADBC's SQLite driver carries its own copy of SQLite, and two copies
of SQLite in one process corrupt databases (sqlite.org/howtocorrupt.html, 2.2.1: closing a
file through one copy drops the POSIX locks the other holds on it). autoprof's own process
touches SQLite only through Python's sqlite3 module.

Usage (by `autoprof.store.bulk`): python -m autoprof.store.sqlite_arrow PATH BATCH_ROWS QUERY
"""

from __future__ import annotations

import sys
from urllib.parse import quote


def main(argv: list[str]) -> int:
    # pyarrow without numpy (optional since pyarrow 16): batches pass through here and are
    # never arrays of numbers, and importing numpy was two thirds of this process's CPU
    sys.modules["numpy"] = None  # type: ignore[assignment]
    # ADBC's low-level API: its DB-API module imports pyarrow.dataset and with it pandas, half
    # a second of this process's life (a run page's first open waits on it)
    import adbc_driver_manager
    import adbc_driver_sqlite
    import pyarrow as pa

    path, batch_rows, query = argv
    with (
        adbc_driver_sqlite.connect(f"file:{quote(path)}?mode=ro") as database,
        adbc_driver_manager.AdbcConnection(database) as conn,
        adbc_driver_manager.AdbcStatement(conn) as statement,
    ):
        statement.set_options(**{"adbc.sqlite.query.batch_rows": batch_rows})
        statement.set_sql_query(query)
        handle, _ = statement.execute_query()
        reader = pa.RecordBatchReader.from_stream(handle)  # the Arrow C stream interface
        with pa.ipc.new_stream(sys.stdout.buffer, reader.schema) as stream:
            for batch in reader:
                stream.write_batch(batch)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # the reader stopped early (an export cut short)
        sys.exit(0)
    except Exception as err:
        print(" ".join(str(err).split()) or type(err).__name__, file=sys.stderr)
        sys.exit(1)
