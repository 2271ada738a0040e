"""Issue #38, points 6-16: what fails (a Redis restart, a full disk, a truncated file, a frozen
database, a crowd of clients) loses nothing and says so in one line. Each test fails on the code
before the issue."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autoprof.run import outdir
from autoprof.testing.cli import invoke
from autoprof.testing.synthetic_out import make_out


def one_line(result, *says: str) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autoprof: error: "), result.stderr
    for text in says:
        assert text in lines[0], lines[0]
    return lines[0]


# --- 8: a SQLite store is its one file once a write returns -----------------------------------


def test_the_store_file_alone_holds_an_upload(tmp_path):
    """After `upload` returned, the run sat in store.db-wal: a copy of store.db was empty."""
    store = tmp_path / "store.db"
    out = make_out(tmp_path / "out", runs=2, repeats=1, intervals=5)
    assert invoke("upload", out, "--store", f"sqlite:///{store}").returncode == 0
    copy = tmp_path / "copy" / "store.db"
    copy.parent.mkdir()
    shutil.copy(store, copy)  # the file alone, as a backup script copies it
    listed = invoke("runs", "list", "--store", f"sqlite:///{copy}")
    assert listed.returncode == 0, listed.stderr
    assert outdir.read_manifest(out).id in listed.stdout


def test_store_backup_copies_a_sqlite_store_whole(tmp_path):
    store = f"sqlite:///{tmp_path / 'store.db'}"
    out = make_out(tmp_path / "out", runs=2, repeats=1, intervals=5)
    assert invoke("upload", out, "--store", store).returncode == 0
    backup = tmp_path / "b" / "backup.db"
    backup.parent.mkdir()
    done = invoke("store", "backup", backup, "--store", store)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in backup.parent.iterdir()) == ["backup.db"]
    exported = tmp_path / "exported.csv"
    run_id = outdir.read_manifest(out).id
    got = invoke("runs", "export", run_id, "-o", exported, "--store", f"sqlite:///{backup}")
    assert got.returncode == 0, got.stderr
    assert exported.read_bytes() == (out / outdir.RESULTS).read_bytes()
    one_line(invoke("store", "backup", backup, "--store", store), "exists")


# --- 9: a results.csv cut short is refused by every reader alike ---------------------------


@pytest.mark.parametrize("line_end", [b"", b"\n"], ids=["cut", "cut-with-line-end"])
def test_a_truncated_results_file_is_refused_by_every_reader(tmp_path, line_end):
    """The last row cut at 9 of its 15 fields: `analyze stats` printed a wrong value and exited
    0, while `upload` refused it."""
    out = make_out(tmp_path / "out", runs=2, repeats=1, intervals=5)
    path = out / outdir.RESULTS
    lines = path.read_bytes().splitlines()
    path.write_bytes(b"\n".join([*lines[:-1], b",".join(lines[-1].split(b",")[:9])]) + line_end)
    store = f"sqlite:///{tmp_path / 's.db'}"
    for command in (["analyze", "stats", out], ["upload", out, "--store", store]):
        one_line(invoke(*command), str(path), "truncated")


# --- 10: one worker per work folder ------------------------------------------------------


def test_a_second_worker_of_one_hostname_is_refused(tmp_path, redis_url):
    """Two workers with one --hostname share its work folder: the second took the first's
    running perf for a dead worker's leftover and killed it."""
    from redis import Redis

    from autoprof.testing.workers import WorkerProcess, wait_ready

    first = WorkerProcess(tmp_path, redis_url, f"sqlite:///{tmp_path / 's.db'}", "h1", "true")
    try:
        wait_ready(Redis.from_url(redis_url), ["h1"])
        second = subprocess.run(
            [sys.executable, "-m", "autoprof", "worker", "--redis", redis_url,
             "--store", f"sqlite:///{tmp_path / 's.db'}", "--hostname", "h1", "--allow", "true",
             "--workdir", first.workdir],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert second.returncode == 2, second.stderr
        assert (
            second.stderr.strip()
            .splitlines()[-1]
            .startswith("autoprof: error: another worker runs in")
        )
        assert first.proc.poll() is None
    finally:
        first.stop()


# --- 7: a full disk is one line -------------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["schedule", "--cpu", "SKX", "--json"], ["--version"]])
def test_standard_output_on_a_full_disk_is_one_line(args):
    """`schedule --json > /dev/full` printed a traceback (a write of click's, or the last flush)."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "autoprof", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr == "autoprof: error: No space left on device\n"
