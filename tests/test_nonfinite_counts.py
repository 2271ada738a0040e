"""Issue #29, security item 11: a count that is not a finite number (inf, -inf) in a run; issue
#38, item 15: a count beyond 64 bits (99999999999999999999). `upload` refuses both; a run stored
with one anyway (by an older autoprof, or written to a shared store directly) is served without
a warning or a traceback in the server's log, and its JSON stays JSON (no Infinity, no NaN:
browsers refuse those)."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest

from autoprof.run import outdir
from autoprof.store import driver, engine, upload
from autoprof.testing.synthetic_out import make_out
from tests.helpers import Served, start_serve, stop


def with_values(out: Path, event: str, every: int, value: str) -> int:
    """Set every `every`-th SAMPLE_VALUE of `event` in out/results.csv to `value`; the line
    number of the first one set."""
    path = out / outdir.RESULTS
    rows = list(csv.reader(path.open()))
    column = rows[0].index("SAMPLE_VALUE")
    lines = []
    for number, row in enumerate(rows[1:], 1):
        if row[0] == event and number % every == 0:
            row[column] = value
            lines.append(number + 1)
    with path.open("w", newline="") as file:
        csv.writer(file).writerows(rows)
    return lines[0]


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity", "1e999"])
def test_upload_refuses_a_count_that_is_not_finite(tmp_path, cli_run, value):
    out = make_out(tmp_path / "out", seed=1)
    line = with_values(out, "page-faults", 3, value)
    run = cli_run("upload", out, "--store", f"sqlite:///{tmp_path}/r.db")
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"autoprof: error: {out / outdir.RESULTS}: page-faults has a SAMPLE_VALUE of "
        f"{float(value)!r} (line {line}): a count is a finite number; nothing stored"
    ]
    with engine.open_store(f"sqlite:///{tmp_path}/r.db").read() as conn:
        from autoprof.store.queries import RunFilter, list_runs

        assert list_runs(conn, RunFilter()) == []


def strict_json(text: str):
    """JSON as a browser reads it: NaN and Infinity are no JSON."""

    def refuse(constant: str):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("value", ["99999999999999999999", "-1e20", "18446744073709600000"])
def test_upload_refuses_a_count_beyond_64_bits(tmp_path, cli_run, value):
    out = make_out(tmp_path / "out", seed=1)
    line = with_values(out, "INST_RETIRED.ANY", 1, value)
    run = cli_run("upload", out, "--store", f"sqlite:///{tmp_path}/r.db")
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"autoprof: error: {out / outdir.RESULTS}: INST_RETIRED.ANY has a SAMPLE_VALUE of "
        f"{float(value)!r} (line {line}): a count fits in 64 bits; nothing stored"
    ]


def test_upload_takes_the_largest_64_bit_count(tmp_path, cli_run):
    out = make_out(tmp_path / "out", seed=1)
    with_values(out, "INST_RETIRED.ANY", 1, str(2**64 - 1))
    run = cli_run("upload", out, "--store", f"sqlite:///{tmp_path}/r.db")
    assert run.returncode == 0, run.stderr


@pytest.mark.slow  # a real server process
def test_a_stored_run_with_infinite_counts_is_served_quietly(tmp_path):
    db = tmp_path / "r.db"
    run_id = upload.upload(driver.Database.of(f"sqlite:///{db}"), make_out(tmp_path / "o")).uuid
    with sqlite3.connect(db) as conn:  # as a store written some other way may hold them
        conn.execute("UPDATE measurement SET sample_value = 9e999 WHERE seq % 7 = 0")
        conn.execute("UPDATE measurement SET sample_value = -9e999 WHERE seq % 11 = 0")
    assert_served_quietly(tmp_path, run_id)


@pytest.mark.slow  # a real server process
@pytest.mark.parametrize("value", ["1e20", "1e19", "-1e17"])
def test_a_stored_run_whose_counts_are_all_one_huge_value_is_served(tmp_path, value):
    """Every count of the run one value of 1e17 or more (beyond 64 bits, or within them as
    1e19): the histogram of an event found no width for its bins, and the run's analysis,
    page and series answered 500."""
    db = tmp_path / "r.db"
    run_id = upload.upload(driver.Database.of(f"sqlite:///{db}"), make_out(tmp_path / "o")).uuid
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE measurement SET sample_value = {value}")
    assert_served_quietly(tmp_path, run_id)


def assert_served_quietly(tmp_path: Path, run_id: str) -> None:
    """Every page and JSON answer of the run is 200 (the JSON strict JSON), three times over,
    and the server's log holds no warning and no traceback."""
    proc, port, log = start_serve(tmp_path)
    server = Served(port, proc, log, run_id, "")
    try:
        events = [e["event"] for e in strict_json(server.request("GET", f"/api/runs/{run_id}")[2])
                  ["events"]]  # fmt: skip
        assert events
        paths = [f"/runs/{run_id}", f"/api/runs/{run_id}/analysis",
                 f"/api/compare?a={run_id}&b={run_id}", f"/runs/{run_id}/results.csv",
                 *(f"/api/runs/{run_id}/series?event={e}" for e in events)]  # fmt: skip
        for _ in range(3):  # again and again: still nothing in the log
            for path in paths:
                status, _, body = server.request("GET", path)
                assert status == 200, (path, body[:300])
                if path.startswith("/api/"):
                    strict_json(body.decode())
    finally:
        stop(proc)
    text = log.read_text()
    assert "Warning" not in text and "Traceback" not in text, text
