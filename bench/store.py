"""Results store speed: bulk upload and export rows/s on SQLite and PostgreSQL (>= 1M rows).

Usage: python bench/store.py [--rows N] [--pg postgresql://postgres@127.0.0.1/postgres]

For each backend, in a fresh database (PostgreSQL: a randomly named database created through the
maintenance URL and dropped afterwards), it times:
  insert   the bulk path alone (COPY / executemany of a results frame, in one transaction)
  upload   `autoprof upload` of an out/ folder: read results.csv, then the same transaction
  export   rebuild the frame from the database and write results.csv (checked byte-identical)
Target (issue 5): PostgreSQL insert >= 200,000 rows/s on the 2-core development VM.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql
from sqlalchemy import select

from autoprof import results
from autoprof.run import outdir
from autoprof.store import engine, queries, upload
from autoprof.store.models import RunPart
from autoprof.testing.synthetic_out import EVENTS, make_out

PER_INTERVAL = sum(2 if e[3] else 1 for e in EVENTS)  # rows per interval with 2 CPUs


def bench(store_text: str, out: Path, work: Path) -> dict[str, float]:
    store = engine.open_store(store_text)
    frame = upload.load_results(out)
    # the bulk path alone, into a part of its own (a throwaway run)
    manifest = outdir.read_manifest(out)
    manifest.id = str(uuid.uuid4())
    scratch = work / "scratch"
    scratch.mkdir(exist_ok=True)
    outdir.write_manifest(scratch, manifest)
    (scratch / outdir.RESULTS).write_text(",".join(results.COLUMNS) + "\n")
    done = upload.upload(store, scratch)
    with store.write() as conn:
        run = queries.find_run(conn, done.uuid)
        part_id = conn.scalar(select(RunPart.id).where(RunPart.run_id == run.id))
        began = time.perf_counter()
        upload.insert_part(conn, part_id, frame)
    insert_s = time.perf_counter() - began

    began = time.perf_counter()
    stored = upload.upload(store, out)
    upload_s = time.perf_counter() - began
    assert stored.stored and stored.rows == len(frame)

    began = time.perf_counter()
    with store.read() as conn:
        exported = queries.export_frame(conn, stored.uuid)
    results.write_csv(exported, work / "export.csv")
    export_s = time.perf_counter() - began
    identical = (work / "export.csv").read_bytes() == (out / outdir.RESULTS).read_bytes()
    store.engine.dispose()
    return {
        "rows": len(frame),
        "insert": len(frame) / insert_s,
        "upload": len(frame) / upload_s,
        "export": len(frame) / export_s,
        "identical": identical,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    runs = 10
    intervals = -(-args.rows // (runs * PER_INTERVAL))
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        out = make_out(work / "out", runs=runs, repeats=1, intervals=intervals, cpus=2)
        table.append(("sqlite", bench(f"sqlite:///{work / 'bench.db'}", out, work)))
        name = f"autoprof_bench_{uuid.uuid4().hex[:12]}"
        admin = args.pg
        try:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.OperationalError as err:
            print(f"PostgreSQL skipped: {err}".splitlines()[0])
        else:
            try:
                target = args.pg.rsplit("/", 1)[0] + "/" + name
                table.append(("postgresql", bench(target, out, work)))
            finally:
                with psycopg.connect(admin, autocommit=True) as conn:
                    conn.execute(
                        sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name))
                    )
    print(
        f"{'backend':<11} {'rows':>10} {'insert rows/s':>14} {'upload rows/s':>14} "
        f"{'export rows/s':>14}  export identical"
    )
    for backend, r in table:
        print(
            f"{backend:<11} {r['rows']:>10,} {r['insert']:>14,.0f} {r['upload']:>14,.0f} "
            f"{r['export']:>14,.0f}  {'yes' if r['identical'] else 'NO'}"
        )


if __name__ == "__main__":
    main()
