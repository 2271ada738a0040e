"""Issue #38, points 1-4: autoprof runs as root on machines other users share. Each test plays
the other user (`nobody`, or a file planted where autoprof looks) and fails on the code before
the issue."""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

from autoprof.store import bulk
from autoprof.web.jobs import JobRequest, LocalQueue

PLANTED = "import pathlib; pathlib.Path({marker!r}).write_text('ran')\n"


def plant(folder: Path, marker: Path, *modules: str) -> Path:
    """A folder another user wrote: modules of these names that, imported, leave `marker`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in modules:
        (folder / f"{name}.py").write_text(PLANTED.format(marker=str(marker)))
    return folder


def spy_python(tmp_path: Path, monkeypatch) -> Path:
    """sys.executable becomes a script that notes its arguments, folder and environment, then
    runs the real interpreter: what autoprof's Python children start with."""
    seen = tmp_path / "seen"
    spy = tmp_path / "python"
    spy.write_text(
        f'#!/bin/sh\n{{ echo "argv $*"; echo "cwd $(pwd)"; env; }} >> {seen}\n'
        f'exec {sys.executable} "$@"\n'
    )
    spy.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(spy))
    return seen


# --- 1: Python children import nothing of the folder they start from ------------------------


def test_the_sqlite_reader_imports_nothing_of_the_working_folder(tmp_path, monkeypatch):
    database = tmp_path / "store.db"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
        conn.execute("INSERT INTO t VALUES (7)")
    marker = tmp_path / "pwned"
    monkeypatch.chdir(
        plant(tmp_path / "shared", marker, "adbc_driver_sqlite", "adbc_driver_manager")
    )
    monkeypatch.setenv("AUTOPROF_STORE", "postgresql://u:secret@db/x")
    seen = spy_python(tmp_path, monkeypatch)
    batches = list(bulk._sqlite(str(database), "SELECT x FROM t"))
    assert [b.to_pylist() for b in batches] == [[{"x": 7}]]
    assert not marker.exists()
    said = seen.read_text()
    assert "argv -I -m autoprof.store.sqlite_arrow" in said
    assert "cwd /\n" in said and "secret" not in said and "AUTOPROF_" not in said


def test_a_web_job_imports_nothing_of_the_servers_folder(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    monkeypatch.chdir(plant(tmp_path / "shared", marker, "shlex"))  # autoprof.web.jobs imports it
    queue = LocalQueue(Path("data"), None)  # relative: the server's folder
    try:
        job = queue.submit(JobRequest("stat", ["true"], ["task-clock"]))
        deadline = time.monotonic() + 120
        while not job.finished and time.monotonic() < deadline:
            time.sleep(0.05)
        assert job.finished, job.state
    finally:
        queue.close()
    assert not marker.exists()
    assert job.error is None, job.error
