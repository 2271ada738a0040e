"""Large runs (#30): the store streams rows in and out in chunks (byte-identical whatever the
chunk sizes), the web download streams from the store and is kept for the next one, and a
run's page reads a summary computed once and kept in the store, rebuilt when it is old.

Speed and memory targets are in bench/store.py; these tests make chunks tiny instead, so that a
few thousand rows cross many chunk and window boundaries.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
import uuid

import numpy as np
import pandas as pd
import psycopg
import pyarrow as pa
import pytest
from psycopg import sql as sql_id
from sqlalchemy import text as sql
from starlette.testclient import TestClient

from autoprof.analysis import correlation, data, stats
from autoprof.analysis.downsample import lttb, lttb_many
from autoprof.errors import AutoprofError
from autoprof.results import csvfile
from autoprof.run import outdir
from autoprof.store import bulk, columns, engine, export, summary, text
from autoprof.store.queries import find_run
from autoprof.testing.cli import invoke
from autoprof.testing.synthetic_out import make_out
from autoprof.web import files, views
from autoprof.web.app import create_app
from autoprof.web.state import Settings
from tests.conftest import SECRET


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("pg_url")


@pytest.fixture
def tiny_chunks(monkeypatch):
    """Chunks of a few hundred rows in, a few chunks per COPY statement (the kept text and
    columns stored between them), windows and batches of 1,000 out."""
    monkeypatch.setattr(csvfile, "CHUNK_BYTES", 1 << 14)
    monkeypatch.setattr(bulk, "COPY_BYTES", 1 << 15)
    monkeypatch.setattr(bulk, "WINDOW", 1000)
    monkeypatch.setattr(bulk, "BATCH", 1000)
    monkeypatch.setattr(text, "PIECE_BYTES", 1 << 12)


def uploaded(url: str, out) -> str:
    done = invoke("upload", out, "--store", url)
    assert done.returncode == 0, done.output
    return outdir.read_manifest(out).id


@pytest.mark.parametrize("check_cells", [True, False])
def test_results_chunks_are_the_file(tmp_path, monkeypatch, check_cells):
    """Read as text and checked, or as numbers at once: the file's values either way."""
    out = make_out(tmp_path / "out", runs=3, repeats=2, intervals=40)
    monkeypatch.setattr(csvfile, "CHUNK_BYTES", 1 << 12)
    chunks = list(csvfile.read_chunks(out / outdir.RESULTS, check_cells=check_cells))
    assert len(chunks) > 10
    import pyarrow as pa

    whole = csvfile.normalize(pa.concat_tables(chunks).to_pandas())
    pd.testing.assert_frame_equal(whole, csvfile.read_csv(out / outdir.RESULTS))


def test_upload_and_export_in_small_chunks_are_byte_identical(store_url, tmp_path, tiny_chunks):
    """Exported from the kept text (`store.text`), then from the rows alone: the same bytes."""
    out = make_out(tmp_path / "out", runs=4, repeats=2, intervals=60)
    run_id = uploaded(store_url, out)
    store = engine.open_store(store_url, create=False)
    rows = len(csvfile.read_csv(out / outdir.RESULTS))
    for source in ("kept text", "rows"):
        with store.write() as conn:
            kept = conn.execute(sql("SELECT count(*) FROM part_text")).scalar_one()
            assert (kept > 0) == (source == "kept text")
            pieces = list(export.csv_chunks(conn, run_id))
            series = conn.execute(sql("SELECT count(*) FROM series")).scalar_one()
            conn.execute(sql("DELETE FROM part_text"))
        assert len(pieces) >= rows // 1000  # streamed: a window (or piece) at a time
        assert b"".join(pieces) == (out / outdir.RESULTS).read_bytes()
    frame = csvfile.read_csv(out / outdir.RESULTS)
    keys = ["EVENT_NAME", "SOCKET", "CORE", "CPU", "NODE", "UNIT", "RUN", "REPEAT", "PMU"]
    keys += ["VALUE_UNIT"]
    assert series == len(frame[keys].drop_duplicates())  # numbered once across chunks
    exported = tmp_path / "e.csv"
    assert invoke("runs", "export", run_id, "-o", exported, "--store", store_url).returncode == 0
    assert exported.read_bytes() == (out / outdir.RESULTS).read_bytes()


def test_a_part_read_in_any_order_is_its_rows_by_seq(store_url, tmp_path, tiny_chunks):
    """`bulk.read_part` (the run summary's read): every row once, each with its place, only the
    columns asked for; put in seq order, the rows `read_rows` reads in order."""
    out = make_out(tmp_path / "out", runs=3, repeats=2, intervals=40, cpus=2)
    run_id = uploaded(store_url, out)
    columns = ["INDEX", "SAMPLE_VALUE", "PERCENT_RUNNING"]
    with engine.open_store(store_url, create=False).read() as conn:
        run = find_run(conn, run_id)
        part = bulk.Part(conn.execute(sql("SELECT id FROM run_part")).scalar_one(), run.rows)
        tables = list(bulk.read_part(conn, part, columns))
        ordered = pa.concat_tables(bulk.read_rows(conn, [part]))
    found = pa.concat_tables(tables)
    assert found.column_names == ["series", *columns, "seq"]
    seq = found.column("seq").to_numpy()
    assert sorted(seq) == list(range(run.rows))
    by_seq = found.take(pa.array(np.argsort(seq))).drop_columns(["seq"])
    assert by_seq.equals(ordered.select(["series", *columns]))


def _partitions(conn) -> dict[str, list[str]]:
    """measurement's partitions on PostgreSQL: name -> its indexes' definitions."""
    names = conn.execute(
        sql("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'measurement'::regclass ORDER BY 1")
    ).scalars().all()  # fmt: skip
    return {
        name: conn.execute(sql("SELECT indexdef FROM pg_indexes WHERE tablename = :t"), {"t": name})
        .scalars()
        .all()
        for name in names
    }


def test_each_part_is_a_partition_with_a_whole_brin_index(pg_url, tmp_path, tiny_chunks):
    """On PostgreSQL a part's rows are a table of their own (a partition of measurement) whose
    BRIN index on seq was built over all of them (nothing left to summarize): read by windows,
    they come back in order; its run deleted, the table is gone."""
    first = uploaded(pg_url, make_out(tmp_path / "a", runs=3, repeats=2, intervals=400, cpus=2))
    other = make_out(tmp_path / "b", runs=3, repeats=2, intervals=400, cpus=2, seed=3)
    second = uploaded(pg_url, other)
    store = engine.open_store(pg_url, create=False)
    with store.read() as conn:
        ids = conn.execute(sql("SELECT id FROM run_part ORDER BY id")).scalars().all()
        found = _partitions(conn)
        assert list(found) == sorted(f"measurement_{i}" for i in ids) and len(ids) == 2
        for name, indexes in found.items():
            assert len(indexes) == 1 and "USING brin (seq)" in indexes[0]
            summarize = sql(f"SELECT brin_summarize_new_values('{name}_seq')")
            assert conn.execute(summarize).scalar_one() == 0
        run = find_run(conn, second)
        part = bulk.Part(ids[1], run.rows)
        tables = list(bulk.read_rows(conn, [part]))
    assert len(tables) > 1 and run.rows > bulk.WINDOW
    exported = b"".join(csvfile.encode(t) for t in export.chunks(store.engine.connect(), second))
    assert csvfile.HEADER + exported == (other / outdir.RESULTS).read_bytes()
    assert invoke("runs", "delete", first, "--yes", "--store", pg_url).returncode == 0
    with store.read() as conn:
        assert list(_partitions(conn)) == [f"measurement_{ids[1]}"]
        assert conn.execute(sql("SELECT count(*) FROM measurement")).scalar_one() == run.rows
    store.engine.dispose()


def test_a_read_only_role_reads_a_part_by_windows(pg_url, tmp_path, tiny_chunks):
    """A role granted SELECT on the store's tables (before the run's partition was made) reads
    a part's rows through measurement, by windows, all of them."""
    role = f"autoprof_reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url.replace(SECRET, ""), autocommit=True) as admin:
        admin.execute(sql_id.SQL("CREATE ROLE {} LOGIN").format(sql_id.Identifier(role)))
    try:
        engine.migrate(pg_url)
        with psycopg.connect(pg_url.replace(SECRET, ""), autocommit=True) as admin:
            admin.execute(sql_id.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(
                sql_id.Identifier(role)))  # fmt: skip
        out = make_out(tmp_path / "out", runs=3, repeats=2, intervals=400, cpus=2)
        run_id = uploaded(pg_url, out)
        reader = engine.open_store(pg_url.replace("postgres:", f"{role}:", 1), create=False)
        with reader.read() as conn:
            run = find_run(conn, run_id)
            part = bulk.Part(conn.execute(sql("SELECT id FROM run_part")).scalar_one(), run.rows)
            tables = list(bulk.read_rows(conn, [part]))
        assert sum(t.num_rows for t in tables) == run.rows > bulk.WINDOW
        reader.engine.dispose()
    finally:
        with psycopg.connect(pg_url.replace(SECRET, ""), autocommit=True) as admin:
            admin.execute(sql_id.SQL("DROP OWNED BY {}").format(sql_id.Identifier(role)))
            admin.execute(sql_id.SQL("DROP ROLE {}").format(sql_id.Identifier(role)))


def _forget_digest(out) -> None:
    """`out`'s report as one made before `aggregate` recorded its file's digest (or by a tool
    that does not): an upload then checks every cell."""
    report = json.loads((out / outdir.REPORT).read_text())
    del report["results_sha256"]
    (out / outdir.REPORT).write_text(json.dumps(report))


@pytest.mark.parametrize("digest", ["recorded", "none"])
def test_a_canonical_file_is_kept_with_or_without_its_digest(store_url, tmp_path, digest):
    """`aggregate`'s file is kept as the run's text whether its digest vouches for its cells or
    each cell is checked (and read as text to be)."""
    out = make_out(tmp_path / "out", runs=2, repeats=2, intervals=30)
    if digest == "none":
        _forget_digest(out)
    run_id = uploaded(store_url, out)
    with engine.open_store(store_url, create=False).read() as conn:
        assert conn.execute(sql("SELECT count(*) FROM part_text")).scalar_one() > 0
        assert b"".join(export.csv_chunks(conn, run_id)) == (out / outdir.RESULTS).read_bytes()


@pytest.mark.parametrize("digest", ["recorded", "none"])
@pytest.mark.parametrize(
    "edit",
    [
        (b",100,ok,\n", b",100.0,ok,\n"),  # a whole percent written as a float
        (b",100,ok,\n", b",1e2,ok,\n"),  # or with an exponent
        (b"\n", b"\r\n"),  # Windows line ends
        (b",software,", b',"software",'),  # a quoted field
        (b",1,1,", b",01,1,"),  # a RUN with a leading zero
        ("TIME", "{}0"),  # the first row's TIME with a trailing zero
        ("SAMPLE_VALUE", "0{}"),  # its count with a leading zero
    ],
)
def test_a_file_not_in_canonical_form_exports_in_it(store_url, tmp_path, edit, digest, tiny_chunks):
    """An edited results.csv keeps no text (what was stored of it while the rows went in is
    deleted): its export is the canonical text of its values. With the digest `aggregate`
    recorded, the file no longer has it; without one, its cells are checked."""
    out = make_out(tmp_path / "out", runs=2, repeats=1, intervals=20)
    if digest == "none":
        _forget_digest(out)
    canonical = (out / outdir.RESULTS).read_bytes()
    header, body = canonical.split(b"\n", 1)
    if isinstance(edit[0], bytes):
        edited = body.replace(*edit)
    else:  # one cell of the first row, its value the same
        first, rest = body.split(b"\n", 1)
        cells = first.decode().split(",")
        at = csvfile.COLUMNS.index(edit[0])
        cells[at] = edit[1].format(cells[at])
        edited = ",".join(cells).encode() + b"\n" + rest
    assert edited != body
    (out / outdir.RESULTS).write_bytes(header + b"\n" + edited)
    run_id = uploaded(store_url, out)
    with engine.open_store(store_url, create=False).read() as conn:
        assert conn.execute(sql("SELECT count(*) FROM part_text")).scalar_one() == 0
        assert b"".join(export.csv_chunks(conn, run_id)) == canonical
        assert export.csv_length(conn, run_id) is None  # written from rows: known once written


def test_split_run_exports_in_run_order_from_small_windows(store_url, tmp_path, tiny_chunks):
    """Parts (each its plan runs) come out as one `aggregate` would have written them: stably
    sorted by (RUN, REPEAT), part after part."""
    profile_id = outdir.read_manifest(make_out(tmp_path / "id", seed=4)).id
    parts = {}
    for k in (2, 1, 3):  # parts arrive in any order
        parts[k] = make_out(tmp_path / f"p{k}", runs=5, repeats=2, intervals=30, seed=4,
                            profile_id=profile_id, part=k, parts=3)  # fmt: skip
        uploaded(store_url, parts[k])
    frames = [csvfile.read_csv(parts[k] / outdir.RESULTS) for k in (1, 2, 3)]
    merged = pd.concat(frames, ignore_index=True)
    merged = merged.sort_values(["RUN", "REPEAT"], kind="stable", ignore_index=True)
    csvfile.write_csv(merged, tmp_path / "want.csv")
    exported = tmp_path / "e.csv"
    assert (
        invoke("runs", "export", profile_id, "-o", exported, "--store", store_url).returncode == 0
    )
    assert exported.read_bytes() == (tmp_path / "want.csv").read_bytes()
    with engine.open_store(store_url, create=False).read() as conn:
        assert export.csv_length(conn, profile_id) is None  # several parts: written from rows


@pytest.fixture
def served(store_url, tmp_path):
    out = make_out(tmp_path / "out", runs=3, repeats=2, intervals=50, cpus=3)
    run_id = uploaded(store_url, out)
    store = engine.open_store(store_url, create=False)
    settings = Settings(store, tmp_path / "data", "t" * 24)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        yield client, store, run_id, out, tmp_path / "data"


def test_download_streams_from_the_store_then_from_the_kept_file(served):
    """A run whose text the store keeps streams it, its length known (no chunked encoding),
    each time, and no copy is kept; one written from its rows is kept as it goes out, and the
    next download sends that file."""
    client, store, run_id, out, data_dir = served
    want = (out / outdir.RESULTS).read_bytes()
    for _ in range(2):
        with client.stream("GET", f"/runs/{run_id}/results.csv") as answer:
            assert answer.status_code == 200
            pieces = list(answer.iter_raw())
        assert len(pieces) > 1 and b"".join(pieces) == want
        assert answer.headers["content-length"] == str(len(want))
        assert list((data_dir / "exports").glob("*.csv")) == []
    with store.write() as conn:
        conn.execute(sql("DELETE FROM part_text"))
    with client.stream("GET", f"/runs/{run_id}/results.csv") as answer:
        pieces = list(answer.iter_raw())
    assert b"".join(pieces) == want and "content-length" not in answer.headers
    kept = list((data_dir / "exports").glob("*.csv"))
    assert [p.name for p in kept] == [f"{run_id}-{len(csvfile.read_csv(out / 'results.csv'))}.csv"]
    again = client.get(f"/runs/{run_id}/results.csv")
    assert again.content == want
    assert again.headers["content-length"] == str(kept[0].stat().st_size)  # a file, sent whole


def _expected_analysis(store, run_id: str) -> dict:
    """What `autoprof analyze stats` and `correlation` say over the run's whole frame."""
    with store.read() as conn:
        frame = data.prepare(export.frame(conn, run_id))
    table = stats.event_table(frame)
    found = correlation.analyse(frame, top=summary.HEATMAP_EVENTS)
    return {
        "stats": summary.records(table.reset_index()),
        "events": [str(e) for e in found.matrix.index],
        "matrix": found.matrix.to_numpy(),
    }


def _summary_rows(store, run_id: str) -> list[tuple]:
    with store.read() as conn:
        run = find_run(conn, run_id)
        return conn.execute(
            sql("SELECT name, version, rows FROM run_summary WHERE run_id = :r ORDER BY name"),
            {"r": run.id},
        ).all()


def test_a_download_cut_short_or_failing_keeps_nothing(tmp_path):
    """The kept copy is written in a thread while chunks go out: whole when every chunk went
    out, nothing (no file, no .partial) when the reader left or the store failed midway."""
    pieces = [bytes([65 + k]) * 100_000 for k in range(5)]
    path = tmp_path / "exports" / "run-5.csv"
    assert b"".join(files._kept(path, iter(pieces))) == b"".join(pieces)
    assert path.read_bytes() == b"".join(pieces)
    path.unlink()

    left = files._kept(path, iter(pieces))
    next(left), next(left)
    left.close()  # the reader went away
    assert list(path.parent.iterdir()) == []

    def failing():
        yield pieces[0]
        raise OSError("the store went away")

    with pytest.raises(OSError, match="store went away"):
        list(files._kept(path, failing()))
    assert list(path.parent.iterdir()) == []


def test_run_page_reads_a_summary_made_once(served):
    client, store, run_id, _, _ = served
    assert _summary_rows(store, run_id) == []
    first = client.get(f"/api/runs/{run_id}/analysis").json()
    want = _expected_analysis(store, run_id)
    assert json.loads(json.dumps(want["stats"], default=str)) == first["stats"]
    assert first["correlation"]["events"] == want["events"]
    got = np.array(first["correlation"]["matrix"], dtype=float)
    assert np.allclose(got, want["matrix"], atol=1e-4, equal_nan=True)
    stored = _summary_rows(store, run_id)
    assert {name for name, _, _ in stored} >= {"analysis", "timeline:task-clock"}
    assert {version for _, version, _ in stored} == {summary.VERSION}
    # the summary is what later opens read: the rows themselves are no longer needed
    with store.write() as conn:
        conn.execute(sql("DELETE FROM measurement"))
    assert client.get(f"/api/runs/{run_id}/analysis").json() == first
    series = client.get(f"/api/runs/{run_id}/series", params={"event": "task-clock"})
    assert series.status_code == 200 and len(series.json()["lines"]) == 3 * 2
    missing = client.get(f"/api/runs/{run_id}/series", params={"event": "no-such-event"})
    assert missing.status_code == 400


_FREED_HEAP = """
import numpy as np
from autoprof.util.heap import release_free_memory
def resident():
    line = next(l for l in open("/proc/self/status") if l.startswith("RssAnon:"))
    return int(line.split()[1]) // 1024
blocks = [np.ones(8192) for _ in range(3000)]  # 64 KiB each, below malloc's mmap threshold
kept = np.ones(8192)  # above them in the heap: freeing them leaves a hole, not a free top
base = resident()
del blocks
freed = resident()
release_free_memory()
print(base, freed, resident())
"""


def test_a_servers_freed_heap_goes_back_to_the_system():
    """What the server does after building a summary: 190 MiB of freed 64 KiB blocks stay
    resident under glibc's malloc until they are trimmed."""
    out = subprocess.run(
        [sys.executable, "-c", _FREED_HEAP], capture_output=True, text=True, check=True
    )
    base, freed, trimmed = map(int, out.stdout.split())
    if freed < base - 40:
        pytest.skip(
            f"this C library's malloc gave the blocks back by itself ({base} -> {freed} MiB)"
        )
    assert trimmed < base - 150, (base, freed, trimmed)


def test_an_old_summary_is_rebuilt(served):
    client, store, run_id, _, _ = served
    first = client.get(f"/api/runs/{run_id}/analysis").json()
    with store.write() as conn:
        conn.execute(
            sql("UPDATE run_summary SET version = :v, data = '{}'"), {"v": summary.VERSION - 1}
        )
    assert client.get(f"/api/runs/{run_id}/analysis").json() == first
    assert {version for _, version, _ in _summary_rows(store, run_id)} == {summary.VERSION}


def test_a_summary_is_rebuilt_when_the_run_gains_a_part(store_url, tmp_path):
    profile_id = None
    store = engine.open_store(store_url)
    settings = Settings(store, tmp_path / "data", "t" * 24)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        for k in (1, 2):
            part = make_out(tmp_path / f"p{k}", runs=4, repeats=1, intervals=20, seed=2,
                            profile_id=profile_id, part=k, parts=2)  # fmt: skip
            profile_id = uploaded(store_url, part)
            analysis = client.get(f"/api/runs/{profile_id}/analysis").json()
            runs = {row["event"]: row["runs"] for row in analysis["stats"]}
            assert runs["task-clock"] == 2 * k  # part k brings plan runs k and k + 2
    both = sum(len(csvfile.read_csv(tmp_path / f"p{k}" / outdir.RESULTS)) for k in (1, 2))
    assert {rows for _, _, rows in _summary_rows(store, profile_id)} == {both}


def test_a_summary_from_kept_columns_is_the_one_from_rows(
    store_url, tmp_path, tiny_chunks, monkeypatch
):
    """A one-part run's columns kept at upload (`store.columns`, in pieces) build its summary
    item for item as its rows do; a split run keeps none (its parts are read merged)."""
    monkeypatch.setattr(columns, "PIECE_ROWS", 700)
    out = make_out(tmp_path / "out", runs=3, repeats=2, intervals=200, cpus=2)
    run_id = uploaded(store_url, out)
    store = engine.open_store(store_url, create=False)
    rows = len(csvfile.read_csv(out / outdir.RESULTS))
    with store.read() as conn:
        run = find_run(conn, run_id)
        kept = conn.execute(sql("SELECT rows FROM part_columns ORDER BY piece")).scalars().all()
        assert len(kept) > 2 and sum(kept) == rows
        from_columns = summary.build(conn, run)
    with store.write() as conn:
        conn.execute(sql("DELETE FROM part_columns"))
    with store.read() as conn:
        assert summary.build(conn, run) == from_columns
    profile_id = None
    for k in (1, 2):
        part = make_out(tmp_path / f"p{k}", runs=4, repeats=1, intervals=20, seed=2,
                        profile_id=profile_id, part=k, parts=2)  # fmt: skip
        profile_id = uploaded(store_url, part)
    with store.read() as conn:
        assert conn.execute(sql("SELECT count(*) FROM part_columns")).scalar_one() == 0
    store.engine.dispose()


def test_kept_columns_another_wrote_are_checked_before_use(store_url, tmp_path):
    """A shared store may hold pieces this process did not write: a piece in another schema,
    or one whose buffers do not hold what its header says, stops the summary in one line."""
    import pyarrow as pa

    out = make_out(tmp_path / "out", runs=2, repeats=1, intervals=20, cpus=1)
    run_id = uploaded(store_url, out)
    store = engine.open_store(store_url, create=False)
    foreign = pa.BufferOutputStream()
    with pa.ipc.new_stream(foreign, pa.schema([("series", pa.string())])) as writer:
        writer.write_table(pa.table({"series": ["x"]}))
    for piece in (foreign.getvalue().to_pybytes(), b"\xff\xff\xff\xff not arrow"):
        with store.write() as conn:
            conn.execute(sql("UPDATE part_columns SET data = :d"), {"d": piece})
        with store.read() as conn, pytest.raises(AutoprofError, match="kept columns, piece 0"):
            summary.build(conn, find_run(conn, run_id))
    store.engine.dispose()


def test_stored_timeline_is_the_live_one(served):
    """The timeline the summary keeps is the one summed in SQL for any other width."""
    client, store, run_id, _, _ = served
    for event in ("task-clock", "context-switches", "CPU_CLK_UNHALTED.THREAD"):
        stored = client.get(f"/api/runs/{run_id}/series", params={"event": event}).json()
        with store.read() as conn:
            live = views.event_series(conn, run_id, event, summary.CHART_POINTS)
        assert json.loads(json.dumps(live)) == stored


def test_an_event_no_interval_counted_has_an_empty_timeline(served):
    """Every event the run page lists can be plotted: one never counted (not supported) has a
    stored timeline with nothing to draw, not a 400."""
    client, _, run_id, out, _ = served
    frame = csvfile.read_csv(out / outdir.RESULTS)
    never = set(frame["EVENT_NAME"]) - set(frame.dropna(subset=["SAMPLE_VALUE"])["EVENT_NAME"])
    assert never  # OFFCORE_RESPONSE.ALL: not supported in every run
    for event in never:
        answer = client.get(f"/api/runs/{run_id}/series", params={"event": event})
        assert answer.status_code == 200, answer.text
        assert answer.json()["lines"] == [] and answer.json()["histogram"]["counts"] == []


def test_lttb_of_many_lines_is_lttb_of_each():
    rng = np.random.default_rng(5)
    xs, ys = [], []
    for k in range(40):
        n = int(rng.integers(1, 5000))
        xs.append(np.cumsum(rng.random(n)))
        y = rng.standard_normal(n)
        if k % 3 == 0:
            y[rng.integers(0, n, n // 5)] = np.nan
        ys.append(y)
    for points in (2, 3, 17, 1000):
        many = lttb_many(xs, ys, points)
        assert all(
            np.array_equal(m, lttb(x, y, points)) for m, x, y in zip(many, xs, ys, strict=True)
        )
        assert all(
            len(m) <= max(points, 2) or len(m) == len(x) for m, x in zip(many, xs, strict=True)
        )


def test_migration_0006_keeps_every_row_in_order(store_url):
    from alembic import command

    store = engine.connect(store_url)
    with store.write() as conn:
        command.upgrade(engine.alembic_config(conn), "0005")
        values = "(7, 2, 0, 0.5), (7, 0, 0, 0.25), (3, 0, 1, NULL), (7, 1, 0, 1e-300)"
        conn.execute(sql(f"INSERT INTO measurement (part_id, seq, series, time) VALUES {values}"))
    with store.write() as conn:
        command.upgrade(engine.alembic_config(conn), "0006")
    with store.read() as conn:
        rows = conn.execute(
            sql("SELECT part_id, seq, series, time FROM measurement ORDER BY part_id, seq")
        ).all()
        assert [tuple(r) for r in rows] == [
            (3, 0, 1, None), (7, 0, 0, 0.25), (7, 1, 0, 1e-300), (7, 2, 0, 0.5)
        ]  # fmt: skip
        if store.dialect == "sqlite":
            ddl = conn.execute(sql("SELECT sql FROM sqlite_master WHERE name = 'measurement'"))
            assert "WITHOUT ROWID" in ddl.scalar_one()
        else:
            kinds = (
                conn.execute(sql("SELECT indexdef FROM pg_indexes WHERE tablename = 'measurement'"))
                .scalars()
                .all()
            )
            assert len(kinds) == 1 and "brin" in kinds[0]
    store.engine.dispose()


def test_an_upload_imports_neither_pandas_nor_sqlalchemy(store_url, tmp_path):
    """pandas costs an upload 0.3-0.7 s to import and serves it nothing (the CLI keeps pyarrow
    from importing it, `commands.store`); SQLAlchemy costs it a third of its time on a loaded
    machine, and a store at the head revision is written without it (`store.driver`). The
    store is made by a first upload (through Alembic), in a process of its own."""
    first, second = (make_out(tmp_path / n, runs=2, repeats=1, intervals=20, seed=s)
                     for n, s in (("a", 1), ("b", 2)))  # fmt: skip
    for out in (first, second):
        argv = ["autoprof", "upload", str(out), "--store", store_url]
        code = (
            f"import runpy, sys\nsys.argv = {argv!r}\n"
            "try:\n    runpy.run_module('autoprof', run_name='__main__')\n"
            "except SystemExit as end:\n    assert not end.code, end.code\n"
            "print('imported:', [m for m in ('pandas', 'sqlalchemy') if m in sys.modules])"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert "stored run" in done.stdout
    assert done.stdout.strip().endswith("imported: []")


def test_the_sqlite_reader_imports_no_pandas(tmp_path):
    """The child process that reads a SQLite store (`sqlite_arrow`) starts on every read: pandas,
    which ADBC's DB-API module imports, cost it half a second of a run page's first open."""
    path = tmp_path / "r.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE t (x INTEGER, y REAL)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(2, None), (1, 0.5)])
        conn.commit()
    code = (
        "import sys\nfrom autoprof.store import sqlite_arrow\n"
        f"sqlite_arrow.main([{str(path)!r}, '1', 'SELECT x, y FROM t ORDER BY x'])\n"
        "print('pandas imported:', 'pandas' in sys.modules, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().strip() == "pandas imported: False"
    assert pa.ipc.open_stream(done.stdout).read_all().to_pydict() == {"x": [1, 2], "y": [0.5, None]}


def test_missing_cells_round_trip_through_the_rows(store_url, tmp_path):
    """Rows of every layout (a missing INDEX, TIME, count, percent or STATUS, several at once)
    come back from the rows, the kept text set aside, as they went in."""
    out = make_out(tmp_path / "out", runs=2, repeats=1, intervals=20)
    frame = csvfile.read_csv(out / outdir.RESULTS)
    columns = ["INDEX", "TIME", "SAMPLE_VALUE", "PERCENT_RUNNING", "STATUS"]
    for row in range(0, len(frame), 7):  # some rows lose one cell, some several
        for k, column in enumerate(columns):
            if (row // 7) & (1 << k):
                frame.loc[row, column] = pd.NA
    csvfile.write_csv(frame, out / outdir.RESULTS)
    run_id = uploaded(store_url, out)
    with engine.open_store(store_url, create=False).write() as conn:
        conn.execute(sql("DELETE FROM part_text"))
        assert b"".join(export.csv_chunks(conn, run_id)) == (out / outdir.RESULTS).read_bytes()


def test_migration_0009_moves_each_parts_rows_to_its_partition(pg_url, tmp_path, tiny_chunks):
    """A store of one measurement table (0008) migrated: each part's rows, in order, in a
    partition of their own with its BRIN index; exported from the rows, the same bytes."""
    from alembic import command

    outs = [make_out(tmp_path / f"o{k}", runs=2, repeats=2, intervals=60, seed=k) for k in (1, 2)]
    run_ids = [uploaded(pg_url, out) for out in outs]
    store = engine.connect(pg_url)
    with store.write() as conn:
        command.downgrade(engine.alembic_config(conn), "0008")
        assert _partitions(conn) == {}
        conn.execute(sql("DELETE FROM part_text"))  # exports come from the rows
    migrated = invoke("store", "migrate", "--store", pg_url)
    assert migrated.returncode == 0, migrated.output
    with store.read() as conn:
        ids = conn.execute(sql("SELECT id FROM run_part ORDER BY id")).scalars().all()
        assert {n: len(i) for n, i in _partitions(conn).items()} == {
            f"measurement_{i}": 1 for i in ids
        }
        for run_id, out in zip(run_ids, outs, strict=True):
            assert b"".join(export.csv_chunks(conn, run_id)) == (out / outdir.RESULTS).read_bytes()
    store.engine.dispose()
