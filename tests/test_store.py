"""The results store on real databases: SQLite files and PostgreSQL databases made per test.

PostgreSQL tests create a randomly named database through the `postgres` maintenance database
and drop it afterwards; they skip, saying why, when no server answers at $AUTOPROF_TEST_PG
(default postgresql://postgres@127.0.0.1:5432/postgres).
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from autoprof.examples import expected_writes, slot_addresses
from autoprof.results import csvfile
from autoprof.run import outdir
from autoprof.store import engine
from autoprof.store.models import Base, Machine
from autoprof.store.tables import MACHINE_COLUMNS, machine_columns, machine_fingerprint
from autoprof.testing.cli import invoke, one_error_line, process
from autoprof.testing.synthetic_out import machine as synthetic_machine
from autoprof.testing.synthetic_out import make_out
from autoprof.util.records import read_json, write_json
from tests.conftest import SECRET, admin_connection, count
from tests.helpers import PROFILE


def run_ids(url: str) -> list[str]:
    listing = invoke("runs", "list", "--store", url)
    assert listing.returncode == 0, listing.output
    return [line.split()[0] for line in listing.stdout.splitlines()[1:]]


def test_migrations_create_exactly_the_models(store_url):
    store = engine.open_store(store_url)

    def of_this_dialect(item, name, kind, reflected, compare_to) -> bool:
        """What the models make for one dialect only (`ddl_if`) is not expected elsewhere."""
        rule = getattr(item, "_ddl_if", None)
        return rule is None or rule.dialect in (None, store.dialect)

    with store.read() as conn:
        opts = {"version_table": engine.VERSION_TABLE, "include_object": of_this_dialect}
        context = MigrationContext.configure(conn, opts=opts)
        assert compare_metadata(context, Base.metadata) == []
        assert engine.current_revision(conn) == engine.head_revision()


def test_machine_columns_are_the_models():
    """The upload writes the machine row by `tables.MACHINE_COLUMNS`, SQLAlchemy's model
    creates it: one set of columns."""
    assert {*MACHINE_COLUMNS, "id", "fingerprint"} == set(Machine.__table__.c.keys())


def test_head_revision_is_the_newest_migration():
    from alembic.script import ScriptDirectory

    assert ScriptDirectory(str(engine.MIGRATIONS)).get_current_head() == engine.HEAD_REVISION


def test_round_trip_export_is_byte_identical(store_url, tmp_path):
    out = make_out(tmp_path / "out", runs=3, repeats=2, intervals=30)
    up = invoke("upload", out, "--tag", "kernel=6.1", "--store", store_url)
    assert up.returncode == 0, up.output
    assert "stored run" in up.stdout
    [run_id] = run_ids(store_url)
    assert run_id == outdir.read_manifest(out).id
    exported = tmp_path / "exported.csv"
    ex = invoke("runs", "export", run_id[:8], "-o", exported, "--store", store_url)
    assert ex.returncode == 0, ex.output
    assert exported.read_bytes() == (out / outdir.RESULTS).read_bytes()
    shown = invoke("runs", "show", run_id, "--store", store_url)
    assert "node7" in shown.stdout and "kernel=6.1" in shown.stdout


@pytest.fixture(scope="module")
def real_out(writes, tmp_path_factory) -> Path:
    """A real profile of the example (breakpoints, software events, a tracepoint; 3 runs x 2
    repeats in 20 ms intervals), aggregated: what a user uploads."""
    out = tmp_path_factory.mktemp("real") / "out"
    events = [f"mem:{a}:w" for a in slot_addresses(writes)]
    events += ["task-clock", "page-faults", "syscalls:sys_enter_write"]
    argv = [sys.executable, "-m", "autoprof", "profile", "--interval", "20", "--repeat", "2"]
    argv += ["--retries", "2"]  # an unclaimed SIGTRAP now and then on this VM (docs/REFERENCE.md)
    argv += [arg for e in events for arg in ("-e", e)]
    for step in ([*argv, "-o", str(out), "--", str(writes), "5000"],
                 [sys.executable, "-m", "autoprof", "aggregate", str(out)]):  # fmt: skip
        proc = subprocess.run(step, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.slow
def test_real_profile_round_trip_is_byte_identical(real_out, writes, store_url, tmp_path):
    """profile -> aggregate -> upload -> export on real perf output gives the same bytes, and
    the store's copy still holds the exact breakpoint counts."""
    up = invoke("upload", real_out, "--store", store_url)
    assert up.returncode == 0, up.output
    run_id = outdir.read_manifest(real_out).id
    exported = tmp_path / "exported.csv"
    ex = invoke("runs", "export", run_id, "-o", exported, "--store", store_url)
    assert ex.returncode == 0, ex.output
    assert exported.read_bytes() == (real_out / outdir.RESULTS).read_bytes()
    frame = csvfile.read_csv(exported)
    assert set(frame["RUN"]) == {1, 2, 3} and set(frame["REPEAT"]) == {1, 2}
    totals = frame.groupby("EVENT_NAME")["SAMPLE_VALUE"].sum()
    for address, want in zip(slot_addresses(writes), expected_writes(5000), strict=True):
        assert totals[f"mem:{address}:w"] == 2 * want  # two repeats
    writes_per_repeat = frame[frame["EVENT_NAME"] == "syscalls:sys_enter_write"].groupby("REPEAT")
    assert (writes_per_repeat["SAMPLE_VALUE"].sum() >= 1).all()  # the example prints a line


def test_values_survive_losslessly(store_url, tmp_path):
    """Awkward values: NaN-free floats at full precision, huge counts, negative and empty."""
    out = make_out(tmp_path / "out", runs=1, repeats=1, intervals=3)
    frame = csvfile.read_csv(out / outdir.RESULTS)
    frame.loc[0, "SAMPLE_VALUE"] = 0.1 + 0.2  # 0.30000000000000004
    frame.loc[1, "SAMPLE_VALUE"] = 2.0**60 + 2.0**8  # whole, beyond 2**53: written as repr
    frame.loc[2, "TIME"] = 1e-300
    frame.loc[3, "SAMPLE_VALUE"] = -5.0
    frame.loc[4, "CPU"] = 2**40
    frame.loc[5, "UNIT"] = 'naïve, "quoted" unit'
    csvfile.write_csv(frame, out / outdir.RESULTS)
    assert invoke("upload", out, "--store", store_url).returncode == 0
    exported = tmp_path / "exported.csv"
    export = invoke("runs", "export", run_ids(store_url)[0], "-o", exported, "--store", store_url)
    assert export.returncode == 0, export.output
    assert exported.read_bytes() == (out / outdir.RESULTS).read_bytes()


def test_rows_written_by_the_driver_read_back_through_the_models(store_url, tmp_path):
    """The upload writes without SQLAlchemy (`store.driver`); the readers read through its
    models: times (SQLite's text with microseconds), JSON and the run's span read back as the
    values uploaded."""
    from sqlalchemy import select

    from autoprof.store.models import Run, RunPart, Tag
    from autoprof.util.clock import naive_utc

    out = make_out(tmp_path / "out", runs=2, repeats=1, intervals=3)
    manifest = outdir.read_manifest(out)
    records = [outdir.read_run_record(f).to_json() for f in outdir.run_folders(out)]
    assert invoke("upload", out, "--tag", "k=v", "--store", store_url).returncode == 0
    store = engine.open_store(store_url, create=False)
    with store.read() as conn:
        run = conn.execute(select(Run)).one()
        part = conn.execute(select(RunPart)).one()
        tags = conn.execute(select(Tag.key, Tag.value)).all()
        # as stored, not only as read: SQLite compares times as text (`runs list --since`)
        raw = conn.exec_driver_sql("SELECT created, uploaded FROM run").one()
        kind = Run.__table__.c.created.type.dialect_impl(conn.dialect)
        written = kind.bind_processor(conn.dialect) or (lambda value: value)
    store.engine.dispose()
    assert list(raw) == [written(run.created), written(run.uploaded)]
    assert run.uuid == manifest.id and run.command == manifest.command
    assert run.created == naive_utc(manifest.created)
    assert run.started == min(naive_utc(r["start"]) for r in records)
    assert run.ended == max(naive_utc(r["end"]) for r in records)
    assert run.status == "complete" and run.rows == part.rows > 0
    assert part.manifest == manifest.to_json() and part.records == records
    assert [tuple(t) for t in tags] == [("k", "v")]


def test_reupload_is_stored_once(store_url, tmp_path):
    out = make_out(tmp_path / "out", runs=2, repeats=1, intervals=10)
    rows = len(csvfile.read_csv(out / outdir.RESULTS))
    first = invoke("upload", out, "--store", store_url)
    again = invoke("upload", out, "--tag", "x=y", "--store", store_url)
    assert first.returncode == again.returncode == 0
    assert "already stored" in again.stdout
    assert len(run_ids(store_url)) == 1
    assert count(store_url, "measurement") == rows


@pytest.mark.slow
def test_split_run_is_complete_when_every_part_is_stored(store_url, tmp_path):
    whole = make_out(tmp_path / "whole", runs=5, repeats=2, intervals=8, seed=3)
    profile_id = outdir.read_manifest(whole).id
    parts = [
        make_out(tmp_path / f"part{k}", runs=5, repeats=2, intervals=8, seed=3,
                 profile_id=profile_id, part=k, parts=2, hostname=f"node{k}")
        for k in (1, 2)
    ]  # fmt: skip
    # the same seed gives the same values only per run list; rebuild "whole" from the parts' rows
    frames = [csvfile.read_csv(p / outdir.RESULTS) for p in parts]
    merged = csvfile.normalize(
        pd.concat(frames, ignore_index=True).sort_values(
            ["RUN", "REPEAT"], kind="stable", ignore_index=True
        )
    )
    csvfile.write_csv(merged, whole / outdir.RESULTS)

    assert "run incomplete" in invoke("upload", parts[1], "--store", store_url).stdout
    exported = tmp_path / "exported.csv"
    refused = invoke("runs", "export", profile_id, "-o", exported, "--store", store_url)
    assert refused.returncode == 2 and "1 of 2 parts" in refused.output
    partial = invoke(
        "runs", "export", profile_id, "--partial", "-o", exported, "--store", store_url
    )
    assert partial.returncode == 0
    assert exported.read_bytes() == (parts[1] / outdir.RESULTS).read_bytes()

    assert invoke("upload", parts[0], "--store", store_url).returncode == 0
    assert "already stored" in invoke("upload", parts[0], "--store", store_url).stdout
    listing = invoke("runs", "list", "--store", store_url).stdout
    assert "complete 2/2" in listing and "node1,node2" in listing
    done = invoke("runs", "export", profile_id, "-o", exported, "--force", "--store", store_url)
    assert done.returncode == 0
    assert exported.read_bytes() == (whole / outdir.RESULTS).read_bytes()


def test_list_filters(sqlite_url, tmp_path):
    a = make_out(tmp_path / "a", seed=1, hostname="alpha", command=("./stream", "-n", "5"))
    b = make_out(tmp_path / "b", seed=2, hostname="beta", command=("./w", "1000"))
    assert invoke("upload", a, "--tag", "suite=spec", "--store", sqlite_url).returncode == 0
    assert invoke("upload", b, "--tag", "suite=micro", "--store", sqlite_url).returncode == 0
    id_a, id_b = outdir.read_manifest(a).id, outdir.read_manifest(b).id

    def ids(*args: str) -> set[str]:
        listing = invoke("runs", "list", *args, "--store", sqlite_url)
        assert listing.returncode == 0, listing.output
        return {line.split()[0] for line in listing.stdout.splitlines()[1:]}

    assert ids() == {id_a, id_b}
    assert ids("--machine", "ALPHA") == {id_a}
    assert ids("--machine", "GenuineIntel-6-55") == {id_a, id_b}
    assert ids("--command", "stream -n") == {id_a}
    assert ids("--tag", "suite=micro") == {id_b}
    assert ids("--tag", "suite=micro", "--machine", "alpha") == set()
    assert ids("--since", "2024-06-01") == {id_a, id_b}
    assert ids("--since", "2024-06-02") == set()
    assert ids("--since", "1d") == set()  # created 2024-06-01
    bad = invoke("runs", "list", "--since", "yesterday", "--store", sqlite_url)
    assert bad.returncode == 2 and "--since" in bad.output


def test_delete_removes_the_run_and_only_it(store_url, tmp_path):
    keep = make_out(tmp_path / "keep", seed=1)
    gone = make_out(tmp_path / "gone", seed=2)
    for out in (keep, gone):
        assert invoke("upload", out, "--store", store_url).returncode == 0
    kept_rows = len(csvfile.read_csv(keep / outdir.RESULTS))
    deleted = invoke("runs", "delete", outdir.read_manifest(gone).id, "--yes", "--store", store_url)
    assert deleted.returncode == 0, deleted.output
    assert run_ids(store_url) == [outdir.read_manifest(keep).id]
    assert count(store_url, "measurement") == kept_rows
    assert count(store_url, "run_part") == 1
    assert count(store_url, "part_text") == 1  # the kept run's text, one piece
    missing = invoke("runs", "show", outdir.read_manifest(gone).id, "--store", store_url)
    assert missing.returncode == 2 and "no run" in missing.output


def test_bad_input_is_one_clear_line(sqlite_url, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    no_manifest = invoke("upload", empty, "--store", sqlite_url)
    assert no_manifest.returncode == 2 and "no manifest.json" in no_manifest.output
    out = make_out(tmp_path / "out")
    (out / outdir.RESULTS).unlink()
    not_aggregated = invoke("upload", out, "--store", sqlite_url)
    assert "autoprof aggregate" in not_aggregated.output
    (out / outdir.RESULTS).write_text("EVENT_NAME,INDEX\ntask-clock,zero\n")
    garbled = invoke("upload", out, "--store", sqlite_url)
    assert garbled.returncode == 2 and "not a results file" in garbled.output
    # a count that is no number, in a file whose report still vouches for it by its digest
    # (its counts are read as numbers at once): the same one line
    typo = make_out(tmp_path / "typo")
    lines = (typo / outdir.RESULTS).read_bytes().split(b"\n")
    cells = lines[1].split(b",")
    cells[csvfile.COLUMNS.index("SAMPLE_VALUE")] = b"lots"
    lines[1] = b",".join(cells)
    (typo / outdir.RESULTS).write_bytes(b"\n".join(lines))
    bad_count = invoke("upload", typo, "--store", sqlite_url)
    assert bad_count.returncode == 2 and "not a results file" in bad_count.output
    assert len(bad_count.output.strip().splitlines()) == 1, bad_count.output
    manifest = read_json(out / outdir.MANIFEST)
    write_json(out / outdir.MANIFEST, manifest | {"created": "last tuesday"})
    bad_time = invoke("upload", out, "--store", sqlite_url)
    assert bad_time.returncode == 2 and "ISO 8601" in bad_time.output
    (out / outdir.MANIFEST).write_text("{not json")
    bad_json = invoke("upload", out, "--store", sqlite_url)
    assert bad_json.returncode == 2 and "unreadable manifest" in bad_json.output
    assert invoke("runs", "show", "ab", "--store", sqlite_url).returncode == 2
    existing = tmp_path / "results.csv"
    existing.write_text("precious\n")
    refused = invoke("runs", "export", "abcd", "-o", existing, "--store", sqlite_url)
    assert refused.returncode == 2 and "--force" in refused.output
    assert existing.read_text() == "precious\n"


def _upload_two_profiles_of_one_machine(url: str, tmp_path: Path) -> None:
    """Two profiles of node7, the second's manifest with facts the machine table does not hold
    (as a newer autoprof records them: topology, TSC frequency)."""
    first = make_out(tmp_path / "a", runs=1, repeats=1, intervals=2, seed=1)
    second = make_out(tmp_path / "b", runs=1, repeats=1, intervals=2, seed=2)
    manifest = json.loads((second / outdir.MANIFEST).read_text())
    manifest["machine"] |= {"tsc_hz": 2_400_000_000, "topology": [{"cpu": 0, "socket": 0}]}
    (second / outdir.MANIFEST).write_text(json.dumps(manifest))
    for out in (first, second):
        up = invoke("upload", out, "--store", url)
        assert up.returncode == 0, up.output


def test_a_machine_is_one_row_whatever_facts_beyond_its_columns(store_url, tmp_path):
    _upload_two_profiles_of_one_machine(store_url, tmp_path)
    assert count(store_url, "run") == 2 and count(store_url, "machine") == 1


def test_migration_merges_the_rows_of_one_machine(store_url, tmp_path):
    """A store filled by an autoprof that keyed machines by every fact holds one row per set of
    facts; migrating keys them by their columns and moves the parts to one row."""
    _upload_two_profiles_of_one_machine(store_url, tmp_path)
    store = engine.connect(store_url)
    with store.write() as conn:
        command.downgrade(engine.alembic_config(conn), "0004")
        conn.exec_driver_sql(
            "INSERT INTO machine (fingerprint, cpu_id, model_name, hostname, kernel, "
            "perf_version, smt, nmi_watchdog, perf_event_paranoid, counters) "
            "SELECT 'old-key-of-all-facts', cpu_id, model_name, hostname, kernel, perf_version, "
            "smt, nmi_watchdog, perf_event_paranoid, counters FROM machine"
        )
        first, second = conn.exec_driver_sql("SELECT id FROM machine ORDER BY id").scalars()
        last_part = conn.exec_driver_sql("SELECT max(id) FROM run_part").scalar_one()
        conn.exec_driver_sql(f"UPDATE machine SET fingerprint = 'old-key-2' WHERE id = {first}")
        conn.exec_driver_sql(f"UPDATE run_part SET machine_id = {second} WHERE id = {last_part}")
    assert count(store_url, "machine") == 2
    migrated = invoke("store", "migrate", "--store", store_url)
    assert migrated.returncode == 0, migrated.output
    with store.read() as conn:
        machines = conn.exec_driver_sql("SELECT id, fingerprint FROM machine").all()
        parts = conn.exec_driver_sql("SELECT machine_id FROM run_part").scalars().all()
    store.engine.dispose()
    columns = machine_columns(asdict(synthetic_machine()))
    assert machines == [(first, machine_fingerprint(columns))] and parts == [first, first]
    again = make_out(tmp_path / "c", runs=1, repeats=1, intervals=2, seed=3)
    assert invoke("upload", again, "--store", store_url).returncode == 0
    assert count(store_url, "machine") == 1


def test_schema_older_or_newer_is_refused_with_advice(store_url, tmp_path):
    """By every command, an upload too (it reads the revision without SQLAlchemy, then lets
    `engine` say why)."""
    out = make_out(tmp_path / "out", runs=1, repeats=1, intervals=2)
    store = engine.connect(store_url)
    with store.write() as conn:
        command.upgrade(engine.alembic_config(conn), "0001")
    for args in (("runs", "list"), ("upload", out)):
        old = invoke(*args, "--store", store_url)
        assert old.returncode == 2
        assert "older than this autoprof" in old.output and "autoprof store migrate" in old.output
    migrated = invoke("store", "migrate", "--store", store_url)
    assert migrated.returncode == 0
    assert f"from 0001 to {engine.head_revision()}" in migrated.output
    assert invoke("runs", "list", "--store", store_url).returncode == 0

    with store.write() as conn:
        conn.exec_driver_sql("UPDATE autoprof_schema SET version_num = '0099'")
    store.engine.dispose()
    for args in (("runs", "list"), ("store", "migrate"), ("upload", out)):
        newer = invoke(*args, "--store", store_url)
        assert newer.returncode == 2
        assert "newer than this autoprof" in newer.output and "upgrade autoprof" in newer.output


@pytest.mark.parametrize(
    "url, says",
    [
        (f"postgresql://postgres:{SECRET}@127.0.0.1:notaport/db", "malformed store URL"),
        (f"postgresql://postgres:{SECRET}@[::1/db", "malformed store URL"),
        (f"mysql://root:{SECRET}@127.0.0.1/db", "unsupported store URL scheme"),
        (f"postgresql://postgres:{SECRET}@127.0.0.1:5432", "names no database"),
        # nothing listens on port 1: the server's absence is the point of this case
        (f"postgresql://postgres:{SECRET}@127.0.0.1:1/db", "Connection refused"),
    ],
)
def test_bad_or_unreachable_store_is_one_masked_line(url, says, tmp_path):
    out = make_out(tmp_path / "out", runs=1, repeats=1, intervals=2)
    for args in (("upload", out), ("runs", "list"), ("store", "migrate")):
        result = invoke(*args, "--store", url)
        assert result.returncode == 2
        assert result.stderr.startswith("autoprof: error: ") and says in result.stderr
        assert SECRET not in result.output
        assert ":***@" in result.stderr


@pytest.mark.slow
def test_unreachable_store_in_a_real_process():
    """The installed entry point, not the test runner: one line on stderr, exit 2, no trace."""
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:1/db"  # nothing listens on port 1
    result = process("runs", "list", "--store", url, timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Connection refused" in result.stderr
    assert SECRET not in result.stdout + result.stderr


@pytest.mark.slow
def test_password_never_printed(pg_url, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOPROF_STORE", pg_url)
    out = make_out(tmp_path / "out")
    run_id = outdir.read_manifest(out).id
    exported = tmp_path / "e.csv"
    outputs = [
        invoke("upload", out),
        invoke("upload", out),
        invoke("upload", tmp_path / "nowhere"),
        invoke("runs", "list"),
        invoke("runs", "list", "--machine", "nothing-matches"),
        invoke("runs", "show", run_id),
        invoke("runs", "show", run_id, "--json"),
        invoke("runs", "export", run_id, "-o", exported),
        invoke("runs", "delete", run_id, "--yes"),
        invoke("store", "info"),
        invoke("store", "migrate"),
        invoke("runs", "list", "--help"),
        invoke("runs", "list", "--store", pg_url.replace("/autoprof_test_", "/no_such_db_")),
    ]
    text = "".join(o.output for o in outputs)
    assert SECRET not in text
    assert "postgres:***@127.0.0.1" in text


def _upload_child(args: tuple[str, str]) -> tuple[int, str]:
    out, url = args
    result = invoke("upload", out, "--store", url)
    return result.returncode, result.output


@pytest.mark.slow
@pytest.mark.parametrize("backend, n", [("postgresql", 16), ("sqlite", 6)])
def test_concurrent_uploads(backend, n, request, tmp_path):
    """n distinct runs and n copies of one more, uploaded by 2n processes at once (the issue's
    16 + 16 on PostgreSQL; fewer on SQLite, whose writers queue on one file lock). The store is
    empty at first, so the processes also race to create the schema."""
    url = request.getfixturevalue("pg_url" if backend == "postgresql" else "sqlite_url")
    distinct = [make_out(tmp_path / f"d{k}", seed=k, runs=2, intervals=100) for k in range(n)]
    twin = make_out(tmp_path / "twin", seed=99, runs=2, intervals=100)
    jobs = [(str(p), url) for p in distinct] + [(str(twin), url)] * n
    with multiprocessing.get_context("fork").Pool(len(jobs)) as pool:
        outcomes = pool.map(_upload_child, jobs, chunksize=1)
    assert [code for code, _ in outcomes] == [0] * 2 * n, outcomes
    lines = [line for _, text in outcomes for line in text.splitlines()]
    assert sum("stored run" in line for line in lines) == n + 1
    assert sum("already stored" in line for line in lines) == n - 1
    assert len(lines) == 2 * n  # nothing else: no error, no warning
    assert len(run_ids(url)) == n + 1
    expected = sum(len(csvfile.read_csv(p / outdir.RESULTS)) for p in [*distinct, twin])
    assert count(url, "measurement") == expected
    exported = tmp_path / "twin.csv"
    export = invoke("runs", "export", outdir.read_manifest(twin).id, "-o", exported, "--store", url)
    assert export.returncode == 0, export.output
    assert exported.read_bytes() == (twin / outdir.RESULTS).read_bytes()


def _pg_copying(url: str):
    """True while a backend of `url`'s database runs the measurement COPY."""
    name = url.rsplit("/", 1)[1]

    def copying() -> bool:
        with admin_connection() as admin:
            return (
                admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND state = 'active'"
                    " AND query LIKE 'COPY measurement%%'",
                    (name,),
                ).fetchone()[0]
                > 0
            )

    return copying


def _sqlite_inserting(url: str):
    """True while the upload's measurement transaction is open: another connection cannot take
    the write lock, the machine's row (committed in a short transaction of its own before) is
    there, and the run's row (written inside) is not yet. The rows themselves stay in the
    upload's page cache until its commit, so the WAL file's size says nothing: it grows at the
    commit, and again at the checkpoint when the upload closes the store (the write lock held
    then too, the run already committed)."""
    path = url.removeprefix("sqlite:///")

    def inserting() -> bool:
        probe = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            try:
                probe.execute("BEGIN IMMEDIATE")
                probe.execute("ROLLBACK")
                return False
            except sqlite3.OperationalError:  # database is locked: a transaction of the upload
                pass
            machines = probe.execute("SELECT count(*) FROM machine").fetchone()[0]
            runs = probe.execute("SELECT count(*) FROM run").fetchone()[0]
            return machines > 0 and runs == 0
        finally:
            probe.close()

    return inserting


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_killed_upload_leaves_nothing_and_retry_succeeds(backend, request, tmp_path):
    url = request.getfixturevalue("pg_url" if backend == "postgresql" else "sqlite_url")
    engine.open_store(url).engine.dispose()
    in_the_middle = (_pg_copying if backend == "postgresql" else _sqlite_inserting)(url)
    out = make_out(tmp_path / "big", runs=10, repeats=1, intervals=1500)
    upload = [sys.executable, "-m", "autoprof", "upload", str(out), "--store", url]
    proc = subprocess.Popen(upload, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # The upload is stopped while we look, so what we see (its transaction still open) is
    # still true when the kill lands; looking at a running upload raced its commit.
    deadline, caught = time.monotonic() + 120, False
    while proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(signal.SIGSTOP)
        if caught := in_the_middle():
            break
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.01)
    assert caught, "the upload finished before it could be killed; make the profile bigger"
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    for table in ("run", "run_part", "series", "measurement", "run_tag"):
        assert count(url, table) == 0, table

    retry = invoke("upload", out, "--store", url)
    assert retry.returncode == 0 and "stored run" in retry.stdout
    exported = tmp_path / "e.csv"
    export = invoke("runs", "export", outdir.read_manifest(out).id, "-o", exported, "--store", url)
    assert export.returncode == 0, export.output
    assert exported.read_bytes() == (out / outdir.RESULTS).read_bytes()


def test_failure_inside_the_bulk_copy_is_one_line_and_stores_nothing(store_url, tmp_path):
    """A row the database rejects mid-way (here: a constraint added behind autoprof's back)."""
    store = engine.open_store(store_url)
    with store.write() as conn:
        if store.dialect == "postgresql":
            conn.exec_driver_sql("ALTER TABLE measurement ADD CONSTRAINT few CHECK (seq < 50)")
        else:  # SQLite cannot add a CHECK to a table; a trigger rejects the row instead
            conn.exec_driver_sql(
                "CREATE TRIGGER few BEFORE INSERT ON measurement WHEN NEW.seq >= 50 "
                "BEGIN SELECT RAISE(ABORT, 'too many rows'); END"
            )
    store.engine.dispose()
    out = make_out(tmp_path / "out", runs=2, intervals=20)
    failed = invoke("upload", out, "--store", store_url)
    assert failed.returncode == 2
    assert failed.stderr.count("\n") == 1  # one folder: its one line
    assert SECRET not in failed.output
    for table in ("run", "run_part", "series", "measurement"):
        assert count(store_url, table) == 0, table


@pytest.mark.parametrize(
    "args",
    [
        ("runs", "list"),
        ("runs", "show", "abcd1234"),
        ("runs", "export", "abcd1234", "-o", "-"),
        ("runs", "delete", "abcd1234", "--yes"),
        ("store", "info"),
    ],
)
def test_read_only_commands_never_create_a_store(args, tmp_path):
    missing = tmp_path / "no" / "such" / "dir" / "x.db"
    result = invoke(*args, "--store", str(missing))
    assert result.returncode == 2
    assert result.stderr.startswith(f"autoprof: error: no store at {missing} ")
    assert not (tmp_path / "no").exists()


def test_read_only_commands_leave_an_empty_database_empty(store_url):
    if store_url.startswith("sqlite"):  # an empty SQLite file, as another program may leave
        path = Path(store_url.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    for args in (("runs", "list"), ("store", "info")):
        result = invoke(*args, "--store", store_url)
        assert result.returncode == 2 and "no store at" in result.stderr
        assert "the database is empty" in result.stderr
    store = engine.connect(store_url)
    with store.read() as conn:
        assert inspect(conn).get_table_names() == []
    store.engine.dispose()
    assert invoke("store", "migrate", "--store", store_url).returncode == 0  # this one creates it
    assert invoke("runs", "list", "--store", store_url).returncode == 0


def test_runs_delete_without_a_terminal_is_refused_in_one_line(cli_run, tmp_path):
    store = f"sqlite:///{tmp_path / 's.db'}"
    out = tmp_path / "out"
    shutil.copytree(PROFILE, out)
    assert cli_run("upload", out, "--store", store).returncode == 0
    run_id = json.loads((out / "manifest.json").read_text())["id"]
    proc = cli_run("runs", "delete", run_id, "--store", store)  # its input is no terminal
    assert proc.returncode == 2 and proc.stdout == ""
    line = one_error_line(proc)
    assert run_id in line and "no terminal" in line and "--yes" in line
    assert run_id in cli_run("runs", "list", "--store", store).stdout  # kept


def test_runs_show_quotes_the_command_as_list_and_web_do(cli_run, tmp_path):
    from autoprof.testing.synthetic_out import make_out

    store = f"sqlite:///{tmp_path / 's.db'}"
    out = make_out(tmp_path / "out", command=("sh", "-c", "echo hi there"))
    assert cli_run("upload", out, "--store", store).returncode == 0
    run_id = json.loads((out / "manifest.json").read_text())["id"]
    shown = cli_run("runs", "show", run_id, "--store", store).stdout
    assert "command    sh -c 'echo hi there'" in shown.splitlines()
    assert "sh -c 'echo hi there'" in cli_run("runs", "list", "--store", store).stdout
