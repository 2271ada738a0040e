"""Upload an `out/` folder (after `aggregate`) into the store: one part, one transaction.

Through the database's own driver (`driver`), without SQLAlchemy, whose import and statement
compiling cost a loaded machine a third of a million-row upload's time: the statements here
store what SQLAlchemy's models would (the readers read them back with SQLAlchemy). A store that
is not at this autoprof's schema revision goes through `engine.open_store` first.

Idempotent and atomic: the run row is inserted if absent and then locked (``FOR UPDATE`` on
PostgreSQL, the database write lock on SQLite), so concurrent uploads of the same run queue up
behind each other and all but the first find their part already stored. The part, its
measurements and the run's totals are written in that one transaction: a killed uploader leaves
nothing behind, and a retry starts afresh. Measurements go in through the fastest path each
driver offers (`bulk`): ``COPY FROM STDIN`` on PostgreSQL, prepared inserts on SQLite, fed a chunk
of results.csv at a time: memory stays flat however many rows the part has.

Parts: a profile split over N machines (``manifest.options.part`` of ``.parts``, both
1-based and shared by the parts' manifests with the same `id`) arrives as N uploads; the run
turns ``complete`` when the last one lands. A plain profile is part 1 of 1.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import shlex
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autoprof.catalog.facts import MachineFacts
from autoprof.errors import AutoprofError
from autoprof.results import csvfile
from autoprof.results.sanity_report import Report, not_planned, read_report
from autoprof.run import outdir
from autoprof.run.options import ProfileOptions
from autoprof.store import bulk, columns, driver, text
from autoprof.store.functions import insert_functions, load_functions
from autoprof.store.tables import (
    KIND_BENCH,
    KIND_PROFILE,
    RUN_COMPLETE,
    RUN_INCOMPLETE,
    machine_columns,
    machine_fingerprint,
)
from autoprof.util.clock import naive_now, naive_utc
from autoprof.util.prefetch import prefetched

MAX_COUNT = float(2**64)  # perf's counters are 64-bit (2**64 - 1 reads as this float)


@dataclass
class Profile:
    """What one `out/` folder contributes to the store, results.csv aside: `load_results` reads
    that only when the part is not already stored."""

    manifest: outdir.Manifest
    part: int
    parts: int
    report: Report | None
    records: list[dict[str, Any]]
    kind: str = KIND_PROFILE  # KIND_BENCH: a folder `autoprof bench -o` wrote


@dataclass
class Uploaded:
    uuid: str
    part: int
    parts: int
    rows: int
    stored: bool  # False: this part was already in the store, nothing written
    complete: bool  # every part of the run is now stored
    seconds: float


def _part_of(manifest: outdir.Manifest) -> tuple[int, int]:
    part, parts = manifest.options.part, manifest.options.parts
    if not (isinstance(part, int) and isinstance(parts, int) and 1 <= part <= parts):
        raise AutoprofError(
            f"manifest {manifest.id}: options part={part!r} of parts={parts!r} is not a valid part"
        )
    return part, parts


def read_profile(out: Path) -> Profile:
    """The manifest, report and run records of `out` (results.csv is read by `load_results`)."""
    manifest = outdir.read_manifest(out)
    if not (out / outdir.RESULTS).is_file():
        raise AutoprofError(f"{out}: no {outdir.RESULTS}; run `autoprof aggregate {out}` first")
    report = read_report(out / outdir.REPORT) if (out / outdir.REPORT).is_file() else None
    if report is not None and not report.usable:
        raise AutoprofError(f"{out}: nothing to upload: {report.summary()}")
    records = []
    for folder in outdir.run_folders(out):
        try:
            records.append(outdir.read_run_record(folder).to_json())
        except (OSError, ValueError, TypeError, KeyError):
            continue  # a broken run.json is already listed in the report's broken_files
    part, parts = _part_of(manifest)
    try:
        naive_utc(manifest.created)
    except ValueError:
        raise AutoprofError(f"{out}: manifest 'created' is not an ISO 8601 time") from None
    kind = KIND_BENCH if (out / outdir.BENCH).is_file() else KIND_PROFILE
    return Profile(manifest, part, parts, report, records, kind)


def results_chunks(
    out: Path, check_cells: bool = True
) -> tuple[csvfile.ResultsChunks, Iterator[Any]]:
    """The chunks of `out`'s results.csv (`csvfile.read_chunks`, which says afterwards whether
    its cells are canonical text, if `check_cells`), checked as they are read; its header is
    checked now, a malformed line when its chunk is read (both: one line)."""
    path = out / outdir.RESULTS
    try:
        chunks = csvfile.read_chunks(path, check_cells=check_cells)
    except ValueError as err:
        raise AutoprofError(f"{path}: not a results file: {err}") from None

    def checked() -> Iterator[Any]:
        first_line = 2  # the header is line 1
        try:
            for chunk in chunks:
                _check_counts(path, chunk, first_line)
                first_line += chunk.num_rows
                yield chunk
        except ValueError as err:
            raise AutoprofError(f"{path}: not a results file: {err}") from None

    return chunks, checked()


def _check_counts(path: Path, chunk: Any, first_line: int) -> None:
    """Refuse a count that is not a finite number (inf, -inf), or one beyond 64 bits
    (99999999999999999999): perf never prints either (its counters are 64-bit), and every
    analysis of it would be meaningless (a missing count is an empty cell)."""
    import pyarrow.compute as pc

    column = chunk.column("SAMPLE_VALUE").combine_chunks()
    wrong = pc.or_(pc.is_inf(column), pc.greater(pc.abs(column), MAX_COUNT))
    row = pc.index(pc.fill_null(wrong, False), True).as_py()
    if row >= 0:
        value = float(column[row].as_py())
        rule = "a count is a finite number" if math.isinf(value) else "a count fits in 64 bits"
        raise AutoprofError(
            f"{path}: {chunk.column('EVENT_NAME')[row].as_py()} has a SAMPLE_VALUE of "
            f"{value!r} (line {first_line + row}): {rule}; nothing stored"
        )


def _values(count: int) -> str:
    return ", ".join(["%s"] * count)


def _insert(table: str, names: Iterable[str], conflict: str = "") -> str:
    """An INSERT of one row of `names` (and its ON CONFLICT clause)."""
    names = list(names)
    return f"INSERT INTO {table} ({', '.join(names)}) VALUES ({_values(len(names))}) {conflict}"


@contextlib.contextmanager
def _connected(database: driver.Database) -> Iterator[driver.Connection]:
    """A connection to the store, at this autoprof's schema revision: a store that is missing,
    empty, older or newer goes through `engine.open_store` first (Alembic creates it, or it is
    refused saying why), and only then is SQLAlchemy imported."""
    if database.postgresql or driver.sqlite_path(database.url).is_file():
        with database.connect() as conn:
            if conn.revision() == driver.HEAD_REVISION:
                yield conn
                return
    from autoprof.store import engine

    engine.open_store(database.text).engine.dispose()
    with database.connect() as conn:
        yield conn


def _machine_id(conn: driver.Connection, machine: MachineFacts) -> int:
    """The machine's row, created if new, in its own short transaction: concurrent uploads from
    one machine must not queue behind each other's long measurement transaction."""
    found = machine_columns(asdict(machine))
    fingerprint = machine_fingerprint(found)
    values = {**found, "counters": json.dumps(found["counters"])}
    with conn.transaction():
        conn.execute(
            _insert("machine", ["fingerprint", *values], "ON CONFLICT (fingerprint) DO NOTHING"),
            [fingerprint, *values.values()],
        )
        return conn.scalar("SELECT id FROM machine WHERE fingerprint = %s", [fingerprint])


def _span(records: list[dict[str, Any]]) -> tuple[dt.datetime | None, dt.datetime | None]:
    """First start and last end over the run records (records without valid times skipped)."""

    def times(key: str) -> list[dt.datetime]:
        found = []
        for record in records:
            with contextlib.suppress(ValueError, TypeError):
                if stamp := naive_utc(record.get(key)):
                    found.append(stamp)
        return found

    return min(times("start"), default=None), max(times("end"), default=None)


@dataclass
class Loaded:
    """What `load_part` stored: its rows, and the event names they hold (first seen first)."""

    rows: int
    events: list[str]


def load_part(
    conn: driver.Connection,
    part_id: int,
    chunks: Iterable[Any],
    kept: columns.Kept | None = None,
    between: Callable[[], None] = lambda: None,
) -> Loaded:
    """Store results `chunks` as the series and measurements of `part_id`, a chunk at a time
    through the driver's bulk path (`bulk.write_measurements`, which runs `between` now and
    then); their columns are `kept` too (the caller stores them) when given."""
    numbers = bulk.SeriesNumbers()
    rows = 0

    def measurements() -> Iterator[Any]:
        nonlocal rows
        # chunks are read and parsed in a thread of their own, ahead of the one that numbers
        # and encodes them for the driver: two steps of about a core each, overlapped
        for chunk in prefetched(iter(chunks), ahead=2):
            table = bulk.measurement_rows(part_id, rows, numbers.number(chunk), chunk)
            if kept is not None:
                kept.add(table)
            yield table
            rows += chunk.num_rows

    bulk.write_measurements(conn, part_id, measurements(), between)
    numbers.write(conn, part_id)
    names = dict.fromkeys(key[0] for key in numbers.numbers if key[0] is not None)
    return Loaded(rows, list(names))


def _stored_part(conn: driver.Connection, uuid: str, part: int) -> bool:
    found = conn.scalar(
        "SELECT run_part.id FROM run_part JOIN run ON run.id = run_part.run_id "
        "WHERE run.uuid = %s AND run_part.part = %s",
        [uuid, part],
    )
    return found is not None


@dataclass
class _Run:
    """The stored run a part joins."""

    id: int
    parts_expected: int
    started: dt.datetime | None
    ended: dt.datetime | None


def _claim_run(conn: driver.Connection, profile: Profile) -> _Run:
    """The run's row, inserted if absent, locked for the rest of the transaction (on SQLite
    the transaction holds the database's write lock already)."""
    manifest = profile.manifest
    values = {
        "uuid": manifest.id,
        "kind": profile.kind,
        "command": json.dumps(manifest.command),
        "command_line": shlex.join(manifest.command),
        "created": conn.time(naive_utc(manifest.created) or naive_now()),
        "started": None,
        "ended": None,
        "autoprof_version": manifest.autoprof_version,
        "parts_expected": profile.parts,
        "status": RUN_INCOMPLETE,
        "rows": 0,
        "uploaded": conn.time(naive_now()),
    }
    conn.execute(_insert("run", values, "ON CONFLICT (uuid) DO NOTHING"), [*values.values()])
    lock = " FOR UPDATE" if conn.postgresql else ""
    found = conn.execute(
        f"SELECT id, parts_expected, started, ended FROM run WHERE uuid = %s{lock}", [manifest.id]
    ).fetchone()
    run = _Run(found[0], found[1], conn.read_time(found[2]), conn.read_time(found[3]))
    if run.parts_expected != profile.parts:
        raise AutoprofError(
            f"run {manifest.id} is stored as {run.parts_expected} part(s), "
            f"but this folder says part {profile.part} of {profile.parts}"
        )
    return run


def _differences(stored: dict[str, Any], manifest: outdir.Manifest) -> list[str]:
    """What makes `manifest` another profile than the stored part's manifest `stored`: its
    command, its event plan, or the options that change what the numbers mean."""
    found = [k for k in ("command", "plan") if stored.get(k) != getattr(manifest, k)]
    theirs = ProfileOptions.from_json(stored.get("options", {})).to_json()
    ours = manifest.options.to_json()
    keys = (set(theirs) | set(ours)) - {"part"}
    return found + sorted(f"options.{k}" for k in keys if theirs.get(k) != ours.get(k))


def _check_same_profile(conn: driver.Connection, run_id: int, profile: Profile) -> None:
    """Refuse a part whose plan (or command, or options) differs from the parts already stored:
    its rows would not add up with theirs to one machine's profile."""
    found = conn.scalar("SELECT manifest FROM run_part WHERE run_id = %s LIMIT 1", [run_id])
    stored = conn.read_json(found)
    differ = _differences(stored, profile.manifest) if stored is not None else []
    if differ:
        raise AutoprofError(
            f"run {profile.manifest.id}: part {profile.part} of {profile.parts} differs from the "
            f"parts already stored in {', '.join(differ)}; split a profile only over identical "
            "machines"
        )


def _check_planned(out: Path, profile: Profile, events: list[str]) -> None:
    """Refuse results whose events the manifest's plan does not name (an edited results.csv:
    the store and its exports would hand the names on), and a report that flagged some."""
    planned = profile.manifest.event_names()
    unknown = []
    if planned is not None:
        unknown = [n for n in events if n not in planned]
    if not unknown and profile.report is not None:
        unknown = profile.report.unknown_events
    if unknown:
        raise AutoprofError(f"{out}: {not_planned([str(n) for n in unknown])}; nothing stored")


def upload(database: driver.Database, out: Path, tags: dict[str, str] | None = None) -> Uploaded:
    """Store the profile in `out` (one part of a run), unless that part is already stored."""
    profile = read_profile(out)
    uuid, part, parts = profile.manifest.id, profile.part, profile.parts
    with _connected(database) as conn:
        if _stored_part(conn, uuid, part):
            return Uploaded(uuid, part, parts, 0, stored=False, complete=False, seconds=0.0)
        # a file `aggregate` wrote says so by its digest: its cells need no check (confirmed once
        # every byte was read, by the same digest; a file edited since keeps no text)
        written = profile.report.results_sha256 if profile.report else ""
        reading, chunks = results_chunks(out, check_cells=not written)
        functions = load_functions(out)
        machine_id = _machine_id(conn, profile.manifest.machine)
        began = time.perf_counter()
        started, ended = _span(profile.records)
        with (
            conn.transaction(),
            text.Compressed(out / outdir.RESULTS) as compressed,
            columns.Kept() as kept,
        ):
            run = _claim_run(conn, profile)
            if _stored_part(conn, uuid, part):  # another uploader got here first
                return Uploaded(uuid, part, parts, 0, stored=False, complete=False, seconds=0.0)
            _check_same_profile(conn, run.id, profile)
            part_values = {
                "run_id": run.id,
                "part": part,
                "machine_id": machine_id,
                "manifest": json.dumps(profile.manifest.to_json()),
                "report": json.dumps(profile.report.to_json() if profile.report else None),
                "records": json.dumps(profile.records),
                "rows": 0,
                "uploaded": conn.time(naive_now()),
            }
            part_id = conn.scalar(
                _insert("run_part", part_values, "RETURNING id"), [*part_values.values()]
            )
            # a split run's summary reads its parts' rows merged: columns kept for one part only
            keeping = kept if parts == 1 else None

            def made_so_far() -> None:  # stored while the rows go in (`write_measurements`)
                compressed.store_made(conn, part_id)
                if keeping is not None:
                    keeping.store_made(conn, part_id)

            loaded = load_part(conn, part_id, chunks, keeping, made_so_far)
            _check_planned(out, profile, loaded.events)  # raised: the transaction stores nothing
            rows = loaded.rows
            if compressed.canonical(rows, reading.cells_canonical, written):
                compressed.keep(conn, part_id)
            else:
                compressed.drop(conn, part_id)
            if keeping is not None:
                keeping.keep(conn, part_id)
            conn.execute("UPDATE run_part SET rows = %s WHERE id = %s", [rows, part_id])
            insert_functions(conn, part_id, functions)
            if tags:
                conn.executemany(
                    _insert("run_tag", ["run_id", "key", "value"], "ON CONFLICT DO NOTHING"),
                    [(run.id, k, v) for k, v in tags.items()],
                )
            stored_parts = conn.scalar("SELECT count(*) FROM run_part WHERE run_id = %s", [run.id])
            complete = stored_parts == run.parts_expected
            conn.execute(
                "UPDATE run SET rows = rows + %s, status = %s, started = %s, ended = %s, "
                "uploaded = %s WHERE id = %s",
                [
                    rows,
                    RUN_COMPLETE if complete else RUN_INCOMPLETE,
                    conn.time(min((d for d in (run.started, started) if d), default=None)),
                    conn.time(max((d for d in (run.ended, ended) if d), default=None)),
                    conn.time(naive_now()),
                    run.id,
                ],
            )
    return Uploaded(uuid, part, parts, rows, True, complete, time.perf_counter() - began)
