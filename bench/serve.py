"""`autoprof serve` speed: the runs list over 10,000 stored runs, and opening a 1 M-row run.

Usage: python bench/serve.py [--runs 10000] [--rows 1000000] [--store sqlite:///PATH]

In a fresh SQLite store (or the given one, which must be empty), through the ASGI app:
  runs list      GET / (the HTML page, newest 50 of N runs), /api/runs, a text filter, page 100
  run open       GET /runs/ID (facts, sanity report, the per-event table aggregated in SQL)
                 + GET /api/runs/ID/series (one event, LTTB to 1000 points per line): what the
                 page needs before it is usable
  run analysis   GET /api/runs/ID/analysis (stats + correlation over the whole frame; the page
                 loads it after opening)
Targets (issue 13): runs list < 300 ms, run open < 2 s. Median of 5 (the first, cold, apart).

The 10,000 runs are copies of one uploaded run (run, part and tag rows inserted in bulk, no
measurements: the list never reads them); the 1 M-row run is a real upload of a synthetic
out/ folder (autoprof/testing/synthetic_out.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import insert, select
from starlette.testclient import TestClient

from autoprof.store import engine, upload
from autoprof.store.models import Run, RunPart, Tag
from autoprof.testing.synthetic_out import EVENTS, make_out
from autoprof.web.app import create_app
from autoprof.web.state import Settings

CPUS = 4
PER_INTERVAL = sum(CPUS if e[3] else 1 for e in EVENTS)


def clone_runs(store: engine.Store, template: str, count: int) -> None:
    """`count` copies of run `template` (new uuids, spread over a year, varied commands)."""
    with store.write() as conn:
        run = conn.execute(select(Run.__table__).where(Run.uuid == template)).mappings().one()
        part = (
            conn.execute(select(RunPart.__table__).where(RunPart.run_id == run["id"]))
            .mappings()
            .one()
        )
        start = dt.datetime(2024, 1, 1)
        runs = []
        for i in range(count):
            values = {k: v for k, v in run.items() if k != "id"}
            values.update(
                uuid=str(uuid.uuid4()),
                created=start + dt.timedelta(minutes=53 * i),
                command_line=f"./bench/bin/prog{i % 97} {i}",
            )
            runs.append(values)
        conn.execute(insert(Run), runs)
        ids = dict(conn.execute(select(Run.uuid, Run.id)).all())
        parts, tags = [], []
        for values in runs:
            row = {k: v for k, v in part.items() if k != "id"}
            row["run_id"] = ids[values["uuid"]]
            parts.append(row)
            tags.append({"run_id": row["run_id"], "key": "suite", "value": f"s{len(tags) % 7}"})
        conn.execute(insert(RunPart), parts)
        conn.execute(insert(Tag), tags)


def timed(client: TestClient, urls: list[str], repeat: int = 5) -> tuple[float, float]:
    """(cold, median warm) seconds to GET every url in turn."""
    times = []
    for _ in range(repeat + 1):
        began = time.perf_counter()
        for url in urls:
            answer = client.get(url)
            assert answer.status_code == 200, (url, answer.status_code, answer.text[:300])
        times.append(time.perf_counter() - began)
    return times[0], statistics.median(times[1:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--store")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        url = args.store or f"sqlite:///{work / 'results.db'}"
        store = engine.open_store(url)
        small = upload.upload(
            store.database, make_out(work / "small", intervals=5), {"suite": "x"}
        ).uuid
        began = time.perf_counter()
        clone_runs(store, small, args.runs - 2)
        print(f"stored {args.runs - 2:,} copies in {time.perf_counter() - began:.1f} s")
        runs, repeats = 10, 1
        intervals = max(1, args.rows // (runs * repeats * PER_INTERVAL))
        out = make_out(
            work / "big", runs=runs, repeats=repeats, intervals=intervals, cpus=CPUS, seed=1
        )
        began = time.perf_counter()
        done = upload.upload(store.database, out)
        print(f"uploaded {done.rows:,} rows in {time.perf_counter() - began:.1f} s")
        settings = Settings(store, work / "data", "t" * 24)
        rows = []
        # the guard answers only its own host names (the test client says "testserver")
        with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
            series = f"/api/runs/{done.uuid}/series?event=context-switches"
            cases = [
                ("runs list: GET / (HTML)", ["/"], 0.3),
                ("runs list: GET /api/runs", ["/api/runs"], 0.3),
                ("runs list: text filter", ["/api/runs?text=prog42"], 0.3),
                ("runs list: page 100", ["/api/runs?page=100"], 0.3),
                (
                    f"run open ({done.rows:,} rows): page + series",
                    [f"/runs/{done.uuid}", series],
                    2.0,
                ),
                ("run analysis (loaded after opening)", [f"/api/runs/{done.uuid}/analysis"], None),
            ]
            for name, urls, target in cases:
                cold, warm = timed(client, urls, repeat=5 if target else 1)
                rows.append((name, cold, warm, target))
    print(f"\n{args.runs:,} runs stored; times in ms (cold = first request, then median of 5)")
    print(f"{'case':<46} {'cold':>9} {'median':>9} {'target':>8}  ok")
    for name, cold, warm, target in rows:
        goal = f"{target * 1000:>8.0f}" if target else f"{'-':>8}"
        ok = ("yes" if max(cold, warm) < target else "NO") if target else ""
        print(f"{name:<46} {cold * 1000:>9.1f} {warm * 1000:>9.1f} {goal}  {ok}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
