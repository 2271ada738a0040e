"""Issue #38, points 1-4: autoprof runs as root on machines other users share. Each test plays
the other user (`nobody`, or a file planted where autoprof looks) and fails on the code before
the issue."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoprof.errors import AutoprofError
from autoprof.perf import process
from autoprof.run import outdir
from autoprof.run.runner import stop_leftovers
from autoprof.store import bulk
from autoprof.testing import cli
from autoprof.testing.cli import one_error_line
from autoprof.web.form import JobRequest
from autoprof.web.localqueue import LocalQueue

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
    monkeypatch.chdir(plant(tmp_path / "shared", marker, "shlex"))  # autoprof.web.form imports it
    # relative: the server's folder; a store of the test's own (the user's default one may be
    # at another schema, made by another autoprof)
    queue = LocalQueue(Path("data"), f"sqlite:///{tmp_path / 's.db'}")
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


# --- 2: a folder another user can write is refused, and links in it are never followed -----

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="plays another user: needs root")


def nobodys(folder: Path) -> Path:
    """A folder of the user `nobody` (the attacker), world-readable."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    os.chown(folder, NOBODY, NOBODY)
    return folder


@pytest.fixture
def victim(tmp_path) -> Path:
    path = tmp_path / "victim"
    path.write_text("precious\n")
    return path


def test_an_out_folder_of_another_user_is_refused_and_its_links_never_followed(tmp_path, victim):
    """`ln -s VICTIM atk_out/.lock` by nobody, then `autoprof profile -o atk_out` as root
    truncated VICTIM (and run.json, perf.csv, stdout, the journal were opened by name too)."""
    if os.geteuid() != 0:
        pytest.skip("plays another user: needs root")
    out = nobodys(tmp_path / "atk_out")
    for name in (".lock", "journal.jsonl", "results.csv.partial"):
        os.symlink(victim, out / name)
        os.lchown(out / name, NOBODY, NOBODY)
    result = cli.invoke("profile", "-e", "task-clock", "-o", out, "--", "true")
    one_error_line(result, str(out), "owned by nobody")
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("where", ["group", "others", "parent", "link"])
def test_a_folder_others_can_change_is_refused(tmp_path, where):
    """Writable by a group or by everyone, or inside another user's folder (who could rename it
    away and put a link in its place): refused before any file is opened in it."""
    if where in ("parent", "link"):
        if os.geteuid() != 0:
            pytest.skip("plays another user: needs root")
        out = nobodys(tmp_path / "atk") / "out"
        says = "owned by nobody"
        if where == "link":  # nobody's link to a folder of root's: nobody chose where it goes
            (tmp_path / "mine").mkdir(mode=0o755)
            out = tmp_path / "link"
            os.symlink(tmp_path / "mine", out)
            os.lchown(out, NOBODY, NOBODY)
            says = "symbolic link of nobody"
    else:
        out = tmp_path / "out"
        out.mkdir()
        out.chmod(0o775 if where == "group" else 0o757)
        if where == "group" and os.geteuid() == 0:
            os.chown(out, -1, NOBODY)  # a group of others (a user's own group is let be)
        says = "writable by"
    result = cli.invoke("profile", "-e", "task-clock", "-o", out, "--", "true")
    one_error_line(result, says)
    assert not (out / outdir.MANIFEST).exists()


def test_a_new_out_folder_is_made_private_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        out = tmp_path / "out"  # its parent must exist: a typo'd one is refused
        result = cli.invoke("profile", "-e", "task-clock", "-o", out, "--", "true")
    finally:
        os.umask(old)
    assert result.returncode == 0, result.stderr
    for folder in (out, out / outdir.RUNS, *(out / outdir.RUNS).iterdir()):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755, folder


@as_root
def test_aggregate_refuses_a_profile_folder_of_another_user(tmp_path, victim):
    """aggregate writes results.csv by name in the folder: a link there took the victim."""
    out = tmp_path / "out"
    assert cli.invoke("profile", "-e", "task-clock", "-o", out, "--", "true").returncode == 0
    os.symlink(victim, out / "results.csv.partial")
    nobodys(out)
    one_error_line(cli.invoke("aggregate", out), "owned by nobody")
    assert victim.read_text() == "precious\n"


@as_root
def test_a_server_and_a_worker_refuse_a_folder_of_another_user(tmp_path, cli_run):
    data = nobodys(tmp_path / "data")
    one_error_line(
        cli_run("serve", "--data", data, "--port", "0", "--store", f"sqlite:///{tmp_path}/s.db"),
        "owned by nobody",
    )
    from autoprof.queue import worker
    from autoprof.queue.spec import compile_allow

    settings = worker.Settings(
        store=f"sqlite:///{tmp_path}/s.db",
        allow=compile_allow(["true"]),
        hostname="h",
        workdir=nobodys(tmp_path / "work"),
    )
    with pytest.raises(AutoprofError, match="owned by nobody"):
        worker.work(None, "redis://127.0.0.1:1", settings, [], burst=True)  # type: ignore[arg-type]


# --- 3: a planted run.json kills nothing ------------------------------------------------------


def fake_perf(tmp_path: Path, user: int | None = None) -> subprocess.Popen:
    """A process named perf (a copy of sleep), in a group of its own, run as `user`."""
    perf = tmp_path / "bin" / "perf"
    perf.parent.mkdir(exist_ok=True)
    shutil.copy(shutil.which("sleep") or "/bin/sleep", perf)
    perf.parent.chmod(0o755)
    return subprocess.Popen([perf, "60"], process_group=0, user=user)


def planted(folder: Path, perf: subprocess.Popen, workload: subprocess.Popen) -> Path:
    record = outdir.RunRecord(
        run=1,
        repeat=1,
        events=[],
        perf_argv=["perf"],
        perf_pid=perf.pid,
        workload_pid=workload.pid,
        workload_start=process.start_time(workload.pid),
        perf_nonce="0" * 32,
    )
    run = outdir.run_dir(folder, 1, 1)
    run.mkdir(parents=True)
    outdir.write_run_record(run, record)
    return run


def still_alive(*procs: subprocess.Popen) -> bool:
    return all(p.poll() is None for p in procs)


@as_root
def test_a_run_record_planted_by_another_user_kills_nothing(tmp_path):
    """nobody writes runs/run0001-rep1/run.json naming root's processes (a perf, and a
    workload with its start time read from /proc) in a folder root's server or worker scans:
    nothing is killed."""
    perf = fake_perf(tmp_path)
    workload = subprocess.Popen(["sleep", "60"], process_group=0)
    try:
        atk = nobodys(tmp_path / "data" / "job1")
        run = planted(atk, perf, workload)
        for path in (atk / outdir.RUNS, run, run / outdir.RUN_RECORD):
            os.chown(path, NOBODY, NOBODY)
        assert stop_leftovers(tmp_path / "data") == []
        assert stop_leftovers(atk) == []
        assert still_alive(perf, workload)
    finally:
        for p in (perf, workload):
            p.kill()
            p.wait()


@as_root
def test_a_record_of_this_user_kills_only_its_own_perf_and_workload(tmp_path):
    """Even in this user's own folder, a record naming another user's process, or a perf
    without the run's nonce, kills nothing (a pid may be reused; a record may be copied)."""
    perf = fake_perf(tmp_path)  # root's, but without the nonce
    workload = subprocess.Popen(["sleep", "60"], process_group=0, user=NOBODY)
    try:
        planted(tmp_path / "out", perf, workload)
        assert stop_leftovers(tmp_path / "out") == []
        assert still_alive(perf, workload)
    finally:
        for p in (perf, workload):
            p.kill()
            p.wait()
