"""Issue #38, points 6-16: what fails (a Redis restart, a full disk, a truncated file, a frozen
database, a crowd of clients) loses nothing and says so in one line. Each test fails on the code
before the issue."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from autoprof.run import outdir
from autoprof.testing.cli import CliResult, invoke, one_error_line
from autoprof.testing.synthetic_out import make_out
from tests.helpers import free_port, start_serve, stop

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
    one_error_line(invoke("store", "backup", backup, "--store", store), "exists")


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
        one_error_line(invoke(*command), str(path), "truncated")


# --- 10: one worker per work folder ------------------------------------------------------


def test_a_second_worker_of_one_hostname_is_refused(tmp_path, redis_url):
    """Two workers with one --hostname share its work folder: the second took the first's
    running perf for a dead worker's leftover and killed it."""
    from redis import Redis

    from autoprof.testing.workers import WorkerProcess, wait_ready

    first = WorkerProcess(tmp_path, redis_url, f"sqlite:///{tmp_path / 's.db'}", "h1", "true")
    try:
        wait_ready(Redis.from_url(redis_url), ["h1"])
        store = f"sqlite:///{tmp_path / 's.db'}"
        second = invoke("worker", "--redis", redis_url, "--store", store, "--hostname", "h1",
                        "--allow", "true", "--workdir", first.workdir)  # fmt: skip
        assert second.returncode == 2, second.stderr
        assert (
            second.stderr.strip()
            .splitlines()[-1]
            .startswith("autoprof: error: another worker runs in")
        )
        assert first.proc.poll() is None
    finally:
        first.stop()


# --- 6: the queue's Redis restarted mid-batch ----------------------------------------------


def redis_server(port: int, folder: Path) -> subprocess.Popen:
    """A redis-server of this test's own, on loopback, its data kept (appendfsync always), so
    that a restart loses none of the queue."""
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
            "--appendonly", "yes", "--appendfsync", "always", "--save", ""]  # fmt: skip
    with (folder / "redis.log").open("ab") as log:
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    import redis

    client = redis.Redis(port=port, socket_connect_timeout=1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            client.ping()
            return server
        except redis.RedisError:
            time.sleep(0.05)
    server.kill()
    raise AssertionError("redis-server did not start")


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_workers_ride_out_a_redis_restart(tmp_path, pg_url):
    """Redis killed for 5 s while two workers each run a job: every worker printed RQ's
    tracebacks and quit, and the jobs ended as RQ's AbandonedJobError. They go on now, a line
    per attempt, and every job is stored once. A job its heartbeats missed runs again (and
    resumes) after --retry-wait: 1 s, not the 30 s default this test does not need."""
    from redis import Redis

    from autoprof.queue import jobs
    from autoprof.testing.workers import WorkerProcess, wait_ready

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    server = redis_server(port, tmp_path)
    workers = [WorkerProcess(tmp_path, url, pg_url, f"h{i}", "sleep [0-9]+") for i in range(2)]
    try:
        wait_ready(Redis.from_url(url), ["h0", "h1"])
        ids = []
        for name in ("h0", "h1"):
            done = invoke("submit", "--redis", url, "--host", name, "-e", "task-clock",
                          "--retry", "1", "--retry-wait", "1", "--", "sleep", "4")  # fmt: skip
            assert done.returncode == 0, done.output
            ids += [line.split()[1] for line in done.output.splitlines() if "  job " in line]
        conn = Redis.from_url(url)
        deadline = time.monotonic() + 120
        while {j.status for j in jobs.list_jobs(conn)} != {"started"}:
            assert time.monotonic() < deadline, "the jobs did not start"
            time.sleep(0.1)
        server.kill()  # as a crash, or a restart, would
        server.wait()
        time.sleep(5)
        server = redis_server(port, tmp_path)
        deadline = time.monotonic() + 180
        while True:
            ended = {j.id: j for j in jobs.list_jobs(conn) if j.status in jobs.ENDED}
            if len(ended) == len(ids) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        alive = [w.proc.poll() is None for w in workers]
    finally:
        for worker in workers:
            worker.stop()
        server.kill()
        server.wait()
    logs = [w.log.read_text() for w in workers]
    assert alive == [True, True], logs
    assert all("Traceback" not in log for log in logs), logs
    assert all("does not answer" in log for log in logs), logs
    assert {j.status for j in ended.values()} == {"finished"}, ended
    listed = invoke("runs", "list", "--store", pg_url).output
    assert all(j.result.run_id in listed for j in ended.values()), listed


# --- 11: --retry waits before each try, longer each time -----------------------------------


def test_a_retried_job_waits_longer_before_each_try(tmp_path, redis_url):
    """`--retry 3` ran a failed job again at once: three tries in three seconds, all lost to a
    store that was restarting. Now `--retry-wait 1` waits 1 s, then 2 s: each failed try is
    scheduled that long after its end (RQ writes both in one transaction, read here in one),
    and the next try starts no sooner. Measured from RQ's own records, not from when a poll
    happened to see a start: on a loaded machine a poll misses some."""
    from redis import Redis
    from rq.registry import ScheduledJobRegistry
    from rq.utils import utcparse

    from autoprof.queue import jobs
    from autoprof.testing.workers import WorkerProcess, wait_ready

    conn = Redis.from_url(redis_url)
    worker = WorkerProcess(tmp_path, redis_url, f"sqlite:///{tmp_path / 's.db'}", "r1", "true")
    try:
        wait_ready(conn, ["r1"])
        done = invoke("submit", "--redis", redis_url, "--host", "r1", "-e", "NO_SUCH.EVENT",
                      "--retry", "2", "--retry-wait", "1", "--", "true")  # fmt: skip
        assert done.returncode == 0, done.output
        [job_id] = [line.split()[1] for line in done.output.splitlines() if "  job " in line]
        starts: set[float] = set()
        schedules: dict[float, float] = {}  # when a try is due -> when the one before ended
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            [job] = [j for j in jobs.list_jobs(conn) if j.id == job_id]
            if job.started is not None:
                starts.add(job.started.timestamp())
            with conn.pipeline() as pipe:  # MULTI: the schedule and the end it was made at
                pipe.zscore(ScheduledJobRegistry(name=job.queue, connection=conn).key, job_id)
                pipe.hget(f"rq:job:{job_id}", "ended_at")
                due, ended = pipe.execute()
            if due is not None and ended:
                schedules[due] = utcparse(ended.decode()).timestamp()
            if job.status == "failed" and job.retries_left == 0:
                break
            time.sleep(0.05)
    finally:
        worker.stop()
    assert job.status == "failed" and "NO_SUCH.EVENT" in (job.error or ""), job
    assert len(schedules) == 2, schedules  # two tries again, each scheduled
    waits = [due - ended for due, ended in sorted(schedules.items())]
    assert waits[0] >= 1 and waits[1] >= 2, waits
    for due, ended in schedules.items():
        later = [start for start in starts if start > ended]
        assert later and min(later) >= due, (due, sorted(starts))


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


# --- 7: a full disk is one line naming the file; nothing half written; resume completes -------


# `autoprof ARGS` for each JSON line on stdin, in this one process: a command's answer
# (returncode, stdout, stderr) on what was standard output, where nothing else writes
COMMANDS = """
import json, os, sys
answers = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
from autoprof.testing.cli import invoke
for line in sys.stdin:
    done = invoke(*json.loads(line))
    print(json.dumps([done.returncode, done.stdout, done.stderr]), file=answers, flush=True)
"""


@dataclass
class SmallDisk:
    """A tmpfs of `size` at `path`, mounted in a mount namespace of its own (held by a sleeping
    process, `pid`): commands run in it (`run`), autoprof's in one Python process there
    (`autoprof`: an interpreter's imports cost more than most commands), its files are read
    through /proc/PID/root."""

    path: Path
    pid: int
    commands: subprocess.Popen | None = None

    def run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        argv = ["nsenter", "-t", str(self.pid), "-m", "--", *map(str, args)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=300)

    def autoprof(self, *args: str | Path) -> CliResult:
        if self.commands is None:
            argv = ["nsenter", "-t", str(self.pid), "-m", "--", sys.executable, "-c", COMMANDS]
            self.commands = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
        assert self.commands.stdin is not None and self.commands.stdout is not None
        print(json.dumps([str(a) for a in args]), file=self.commands.stdin, flush=True)
        answer = self.commands.stdout.readline()
        assert answer, f"autoprof {args} ended its process (see its traceback above)"
        return CliResult(*json.loads(answer))

    def close(self) -> None:
        if self.commands is not None:
            self.commands.communicate(timeout=60)  # its stdin closed: it ends

    def seen(self, path: Path) -> Path:
        """`path` (inside the tmpfs) as this process sees it."""
        return Path(f"/proc/{self.pid}/root{path}")

    def fill(self, free_kib: int) -> None:
        """Leave about `free_kib` KiB free (a file of zeros takes the rest)."""
        self.run("rm", "-f", self.path / "fill")
        avail = int(self.run("df", "-k", "--output=avail", self.path).stdout.split()[-1])
        size = max(avail - free_kib, 0) * 1024
        self.run("sh", "-c", f"head -c {size} /dev/zero > {self.path / 'fill'}")

    def files(self, folder: Path) -> list[str]:
        return sorted(str(p.relative_to(self.seen(folder))) for p in self.seen(folder).rglob("*"))


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter"):
        pytest.skip("mounts a tmpfs in a mount namespace: needs root, unshare and nsenter")
    path = tmp_path / "disk"
    path.mkdir()
    script = f"mount -t tmpfs -o size=1m,mode=0755 tmpfs {path} && echo ready && exec sleep 600"
    holder = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        if holder.stdout is None or holder.stdout.readline().strip() != "ready":
            pytest.skip("cannot mount a tmpfs in a mount namespace here")
        disk = SmallDisk(path, holder.pid)
        yield disk
        disk.close()
    finally:
        holder.kill()
        holder.wait()


def no_space(result, disk: SmallDisk) -> str:
    """The one error line of a full disk, naming a file on it, and no traceback (a profile
    says what it profiles first)."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert [x for x in lines if x.startswith("autoprof: error: ")] == lines[-1:], lines
    assert "Traceback" not in result.stderr, result.stderr
    assert f" {disk.path}/" in lines[-1], lines[-1]
    assert lines[-1].endswith(": No space left on device"), lines[-1]
    return lines[-1]


def no_scratch(names: list[str]) -> None:
    assert not [n for n in names if n.endswith((".tmp", ".partial"))], names


PROFILE = ("profile", "-e", "task-clock", "-e", "page-faults", "--interval", "10",
           "--repeat", "3")  # fmt: skip


@pytest.mark.skipif(shutil.which("perf") is None, reason="needs perf")
def test_a_profile_on_a_full_disk_is_one_line_and_resumes(small_disk):
    """`profile -o` on a full tmpfs: `No space left on device`, naming no file (the run record,
    the journal, the lock file's note); a journal line cut short by the disk."""
    failed = 0
    for free in (0, 4, 8, 16):
        out = small_disk.path / f"out{free}"
        small_disk.fill(free)
        argv = [*PROFILE, "-o", out, "--", "sh", "-c", "seq 1 20000 | sort -n > /dev/null"]
        first = small_disk.autoprof(*argv)
        if first.returncode != 0:
            no_space(first, small_disk)
            failed += 1
        small_disk.run("rm", "-f", small_disk.path / "fill")
        if not small_disk.seen(out).is_dir():
            continue  # refused before it made the folder
        no_scratch(small_disk.files(out))
        resumed = small_disk.autoprof(*argv)
        assert resumed.returncode == 0, resumed.stderr
        journal = small_disk.seen(out / outdir.JOURNAL).read_text().splitlines()
        assert len(journal) == 3 and all(line.endswith("}") for line in journal), journal
        done = small_disk.autoprof("aggregate", out)
        assert done.returncode == 0, done.stderr
    assert failed >= 3


@pytest.mark.skipif(shutil.which("perf") is None, reason="needs perf")
def test_aggregate_on_a_nearly_full_disk_leaves_no_half_result(small_disk, tmp_path):
    """`aggregate` with a few KiB free: its results.csv was written and its report.json was
    not (or results.csv failed, naming no file)."""
    source = tmp_path / "src"
    workload = ["--", "sh", "-c", "seq 1 100000 | sort -n > /dev/null"]
    made = invoke(*PROFILE, "-o", source, *workload)
    assert made.returncode == 0, made.stderr
    failed = 0
    for free in (0, 2, 4, 6, 8, 12):
        out = small_disk.path / f"out{free}"
        assert small_disk.run("cp", "-a", source, out).returncode == 0
        small_disk.fill(free)
        first = small_disk.autoprof("aggregate", out)
        names = small_disk.files(out)
        no_scratch(names)
        if first.returncode != 0:
            no_space(first, small_disk)
            assert outdir.RESULTS not in names or outdir.REPORT in names, names
            failed += 1
        small_disk.run("rm", "-f", small_disk.path / "fill")
        again = small_disk.autoprof("aggregate", out)
        assert again.returncode == 0, again.stderr
        assert {outdir.RESULTS, outdir.REPORT} <= set(small_disk.files(out))
    assert failed >= 2


def test_exports_on_a_full_disk_name_their_file_and_leave_none(small_disk, tmp_path):
    store = f"sqlite:///{tmp_path / 's.db'}"
    out = make_out(tmp_path / "out", runs=2, repeats=2, intervals=400)
    assert invoke("upload", out, "--store", store).returncode == 0
    run_id = outdir.read_manifest(out).id
    small_disk.fill(16)
    target = small_disk.path / "x.csv"
    no_space(small_disk.autoprof("runs", "export", run_id, "-o", target, "--store", store),
             small_disk)  # fmt: skip
    small_disk.fill(0)
    analysis = small_disk.path / "stats.txt"
    no_space(small_disk.autoprof("analyze", "stats", out / outdir.RESULTS, "-o", analysis),
             small_disk)  # fmt: skip
    assert small_disk.files(small_disk.path) == ["fill"]


# --- 12: a frozen PostgreSQL ends an upload in one line ------------------------------------


def backend_of(admin, database: str, query: str, deadline_s: float = 60) -> tuple[int, str]:
    """The pid and wait event of the backend of `database` running a statement that starts
    with `query` (polled until `deadline_s`)."""
    until = time.monotonic() + deadline_s
    while time.monotonic() < until:
        row = admin.execute(
            "SELECT pid, coalesce(wait_event_type, '') FROM pg_stat_activity"
            " WHERE datname = %s AND query LIKE %s AND pid <> pg_backend_pid()",
            (database, query + "%"),
        ).fetchone()
        if row is not None:
            return row
        time.sleep(0.02)
    raise AssertionError(f"no backend ran {query!r} in {deadline_s} s")


@pytest.mark.skipif(os.geteuid() != 0, reason="stops a PostgreSQL backend: needs root")
def test_an_upload_to_a_frozen_postgresql_ends_in_one_line(tmp_path, pg_url):
    """The server frozen (its backend SIGSTOPped) in the middle of the COPY: its kernel still
    acknowledges, so the upload waited forever (a worker's until the job's timeout)."""
    import psycopg
    from sqlalchemy.engine import make_url

    assert invoke("upload", make_out(tmp_path / "first", seed=1), "--store", pg_url).returncode == 0
    out = make_out(tmp_path / "out", seed=2, intervals=4000)  # 24 MB: past the socket buffers
    database = make_url(pg_url).database
    env = {**os.environ, "AUTOPROF_STORE_TIMEOUT": "3"}
    argv = [sys.executable, "-m", "autoprof", "upload", str(out), "--store", pg_url]
    with (
        psycopg.connect(pg_url) as locker,
        psycopg.connect(pg_url, autocommit=True) as admin,  # out of a transaction: fresh stats
    ):
        locker.execute("LOCK TABLE measurement IN SHARE MODE")  # the COPY waits for it
        upload = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
        try:
            pid, _ = backend_of(admin, database, "COPY measurement")
            locker.rollback()
            while backend_of(admin, database, "COPY measurement")[1] == "Lock":
                time.sleep(0.01)  # the rows start to flow: freeze the server mid-COPY
            os.kill(pid, signal.SIGSTOP)
            try:
                _, stderr = upload.communicate(timeout=120)
            finally:
                os.kill(pid, signal.SIGCONT)
        finally:
            if upload.poll() is None:
                upload.kill()
                upload.wait()
    result = subprocess.CompletedProcess(argv, upload.returncode, "", stderr)
    one_error_line(result, "no answer from the server in 3 s")
    listed = invoke("runs", "list", "--store", pg_url)
    assert outdir.read_manifest(out).id not in listed.stdout  # nothing stored
    done = invoke("upload", out, "--store", pg_url)  # and the same upload, run again, stores it
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("value", ["abc", "-1", "inf"])
def test_a_store_timeout_that_is_no_number_of_seconds_is_one_line(pg_url, value):
    listed = invoke("runs", "list", "--store", pg_url, env={"AUTOPROF_STORE_TIMEOUT": value})
    one_error_line(listed, f"AUTOPROF_STORE_TIMEOUT={value!r} is not a number of seconds")


# --- 13 and 16: the server's connections, held to their promise --------------------------


def answer_from(
    port: int, source: str, path: str = "/api/runs", timeout: float = 30, close: bool = True
) -> str:
    """The status code (text) of one GET from client address `source`, or why none came; the
    connection closed after the status line (asked to close, or kept alive: then the client
    leaves first)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                      source_address=(source, 0)) as s:  # fmt: skip
            keep = "close" if close else "keep-alive"
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                      f"Connection: {keep}\r\n\r\n".encode())  # fmt: skip
            head = s.recv(64)
            return head.split()[1].decode() if head else "closed"
    except OSError as err:
        return type(err).__name__


def test_two_hundred_clients_at_once_are_all_answered(tmp_path):
    """200 clients (the promised number), each asking again and again: uvicorn's cap counted
    connections already closing, and a live one was closed (or a request met 503)."""
    proc, port, log = start_serve(tmp_path)
    try:
        with ThreadPoolExecutor(max_workers=200) as pool:
            codes = Counter(pool.map(
                lambda i: answer_from(port, f"127.0.1.{1 + i % 200}", close=i % 2 == 0),
                range(200 * 20),
            ))  # fmt: skip
    finally:
        stop(proc)
    assert codes == {"200": 4000}, codes
    said = log.read_text()
    assert "connections" not in said and "Exceeded" not in said, said


def test_slow_request_bodies_lock_no_one_out(tmp_path):
    """250 POSTs without the token that announce 100 KB and send one byte held every slot: a
    request from another client address got nothing. One client address holds at most 100
    connections now, and a body that has not arrived in time is cut."""
    proc, port, log = start_serve(tmp_path, "--header-timeout", "3")
    slow: list[socket.socket] = []
    head = (f"POST /api/jobs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: "
            "application/json\r\nContent-Length: 100000\r\n\r\n{").encode()  # fmt: skip
    try:
        for _ in range(250):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(head)
                slow.append(s)
            except OSError:
                continue  # the server's backlog is full: that connection never was
        assert answer_from(port, "127.0.0.2", timeout=10) == "200"
        deadline = time.monotonic() + 60  # every slow body is cut (3 s each, then some)
        for s in slow:
            s.settimeout(max(deadline - time.monotonic(), 0.1))
            try:
                while s.recv(65536):
                    pass  # a 4xx answer, then the end
            except ConnectionResetError:
                pass
    finally:
        for s in slow:
            s.close()
        stop(proc)
    said = log.read_text()
    assert "Traceback" not in said, said
