"""Distributed profiling on real Redis and PostgreSQL, with workers as real processes.

Each module run claims an empty Redis database index (atomically: a claim key set only while the
database is empty) and flushes it at the end; it skips when no Redis answers at
$AUTOPROF_TEST_REDIS (default redis://127.0.0.1:6379). Workers are `python -m autoprof worker`
subprocesses with short heartbeats, so a killed worker's job is handled in seconds. Workloads
are the example program under hardware breakpoints: every count is known in advance.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest
import redis
from rq import Queue
from rq.job import Job
from rq.serializers import JSONSerializer

from autoprof.catalog import machine
from autoprof.errors import AutoprofError
from autoprof.examples import expected_writes, slot_addresses
from autoprof.queue import connection, jobs
from autoprof.queue.spec import JobSpec, Refused, allowed, compile_allow
from autoprof.queue.worker import wait_until_quiet
from autoprof.results import aggregate, csvfile
from autoprof.run import outdir
from autoprof.testing.cli import invoke, process
from autoprof.testing.synthetic_out import make_out
from autoprof.testing.workers import WorkerProcess, wait_ready
from tests.conftest import SECRET

TERMINAL = {"finished", "failed", "stopped", "canceled"}
pytestmark = pytest.mark.slow  # real workers, real profiles


# --- pure parts: no server needed ------------------------------------------------------------


def test_parts_partition_the_plan():
    for runs in range(1, 6):
        for repeat in range(1, 4):
            everything = list(outdir.planned(runs, repeat))
            assert everything == [(r, k) for r in range(1, runs + 1) for k in range(1, repeat + 1)]
            for parts in range(1, 5):
                shares = [list(outdir.planned(runs, repeat, p, parts)) for p in range(1, parts + 1)]
                merged = sorted(pair for share in shares for pair in share)
                assert merged == sorted(everything)  # every pair once, in exactly one part
                sizes = [len(s) for s in shares]
                assert sizes == [
                    outdir.planned_count(runs, repeat, p, parts) for p in range(1, parts + 1)
                ]
                assert max(sizes) - min(sizes) <= 1


def test_wait_until_quiet_polls_then_gives_up():
    loads, slept = iter([5.0, 3.0, 0.5]), []
    load, waited = wait_until_quiet(lambda: next(loads), 1.0, 60, 2, slept.append)
    assert (load, waited, slept) == (0.5, 4.0, [2, 2])
    with pytest.raises(
        AutoprofError, match=r"busy: load average 9.00 > --max-load 1 after waiting 5 s"
    ):
        wait_until_quiet(lambda: 9.0, 1.0, 5, 2, lambda s: None)


GOOD = {"command": ["./w", "1"], "profile_id": str(uuid.uuid4())}


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (["./w"], "not a profile spec"),
        (GOOD | {"evil": 1}, "unknown spec fields: evil"),
        (GOOD | {"command": []}, "non-empty list of strings"),
        (GOOD | {"command": "rm -rf /"}, "non-empty list of strings"),
        (GOOD | {"options": {"repeat": True}}, "--repeat True is not a whole number"),
        (GOOD | {"options": {"repeat": 0}}, "--repeat 0 is not in the range 1<=x<=10000"),
        (GOOD | {"options": {"force": True}}, "unknown spec options field 'force'"),
        (GOOD | {"selection": {"cpu": "SKX"}}, "unknown spec selection field 'cpu'"),
        (GOOD | {"part": 3, "parts": 2}, "not a valid part"),
        (GOOD | {"profile_id": "x"}, "not a uuid"),
        (GOOD | {"tags": {"a": 1}}, "tags must map strings to strings"),
    ],
)
def test_untrusted_specs_are_refused(data, says):
    with pytest.raises(Refused, match=says) as caught:
        JobSpec.from_json(data)
    assert str(caught.value).startswith("refused: ")


def test_allow_list_matches_the_whole_shell_joined_command():
    patterns = compile_allow([r"/opt/bench/\S+ [0-9]+"])
    assert allowed(["/opt/bench/writes", "200"], patterns)
    assert not allowed(["/opt/bench/writes", "200", ";", "rm"], patterns)
    assert not allowed(["/opt/bench/writes", "200; rm -rf /"], patterns)  # quoted by shlex.join
    assert not allowed(["/bin/sh", "-c", "/opt/bench/writes 1"], patterns)
    with pytest.raises(AutoprofError, match="not a regular expression"):
        compile_allow(["("])


def test_redis_urls(monkeypatch):
    monkeypatch.delenv(connection.ENV_VAR, raising=False)
    with pytest.raises(AutoprofError, match="give --redis URL or set"):
        connection.resolve(None)
    monkeypatch.setenv(connection.ENV_VAR, "redis://q:6379/2")
    assert connection.resolve(None) == "redis://q:6379/2"
    client = redis.Redis.from_url(f"rediss://bob:{SECRET}@q:6380/0")  # what connect() builds
    assert client.connection_pool.connection_class is redis.SSLConnection
    assert client.connection_pool.connection_kwargs["username"] == "bob"
    with pytest.raises(AutoprofError) as caught:
        connection.connect(f"redis://bob:{SECRET}@127.0.0.1:1/0")  # nothing listens on port 1
    assert SECRET not in str(caught.value) and "bob:***@" in str(caught.value)


def test_part_report_expects_only_its_share(tmp_path):
    out = make_out(tmp_path / "p2", runs=5, repeats=2, part=2, parts=2)
    manifest = outdir.read_manifest(out)
    finished = set(outdir.planned(5, 2, 2, 2))
    runs = aggregate.runs_summary(manifest, finished)
    assert runs.expected == 5 and runs.missing == []


def test_store_refuses_a_part_with_another_plan(tmp_path):
    store = f"sqlite:///{tmp_path / 'r.db'}"
    first = make_out(tmp_path / "p1", runs=4, part=1, parts=2, hostname="n1")
    run_id = outdir.read_manifest(first).id
    second = make_out(tmp_path / "p2", runs=4, part=2, parts=2, profile_id=run_id)
    manifest = outdir.read_manifest(second)
    manifest.plan["runs"] = manifest.plan["runs"][:3]  # another machine packed the events apart
    outdir.write_manifest(second, manifest)
    assert invoke("upload", first, "--store", store).returncode == 0
    refused = invoke("upload", second, "--store", store)
    assert refused.returncode == 2
    assert "differs from the parts already stored in plan" in refused.output
    assert "1/2" in invoke("runs", "list", "--store", store).output


# --- real Redis, PostgreSQL, perf --------------------------------------------------------------


@pytest.fixture
def acl_url(redis_url):
    """The same database through an ACL user with a password (removed afterwards)."""
    admin = redis.Redis.from_url(redis_url)
    user = f"autoprof-test-{uuid.uuid4().hex[:8]}"
    admin.acl_setuser(
        user, enabled=True, passwords=[f"+{SECRET}"], keys=["*"], channels=["*"], commands=["+@all"]
    )
    yield redis_url.replace("redis://", f"redis://{user}:{SECRET}@")
    admin.acl_deluser(user)


@pytest.fixture
def workers(tmp_path):
    started: list[WorkerProcess] = []

    def start(redis_text: str, store: str, hostname: str, allow: str) -> WorkerProcess:
        started.append(WorkerProcess(tmp_path, redis_text, store, hostname, allow))
        return started[-1]

    yield start
    for worker in started:
        worker.stop()


def wait_jobs(conn: redis.Redis, ids: list[str], until=TERMINAL, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = {j.id: j for j in jobs.list_jobs(conn) if j.id in ids}
        if len(found) == len(ids) and all(j.status in until for j in found.values()):
            return found
        time.sleep(0.2)
    raise AssertionError(f"jobs not {until} in {timeout} s: {found}")


def submit(redis_text: str, *args) -> list[str]:
    done = invoke("submit", "--redis", redis_text, *args)
    assert done.returncode == 0, done.output
    return [line.split()[1] for line in done.output.splitlines() if line.startswith("  job ")]


def watch(binary: Path) -> list[str]:
    """The example's watchpoints, each run retried should it fail: a VM now and then leaves a
    debug register armed, and the workload dies of a SIGTRAP perf did not claim."""
    return [arg for a in slot_addresses(binary) for arg in ("-e", f"mem:{a}:w")] + [
        "--retries",
        "2",
    ]


def export(store: str, run_id: str, path: Path) -> pd.DataFrame:
    done = invoke("runs", "export", run_id, "--store", store, "-o", path, "--force")
    assert done.returncode == 0, done.output
    return csvfile.read_csv(path)


def counts(frame: pd.DataFrame) -> dict[tuple[str, int, int], float]:
    """Per (event, run, repeat) totals of the breakpoint events (exact, whatever the timing)."""
    bp = frame[frame["PMU"] == "breakpoint"]
    return bp.groupby(["EVENT_NAME", "RUN", "REPEAT"])["SAMPLE_VALUE"].sum().to_dict()


def test_routing_split_refusals_and_secrets(writes, acl_url, pg_url, workers, tmp_path):
    conn = connection.connect(acl_url)
    tag = uuid.uuid4().hex[:6]
    a, b = f"a-{tag}", f"b-{tag}"
    allow = f"{shutil.which(str(writes)) or writes} [0-9]+"
    wa, wb = (workers(acl_url, pg_url, name, allow) for name in (a, b))
    wait_ready(conn, [a, b])
    cpu = machine.cpu_id()
    # both workers idle: the two parts go one to each
    parts = submit(acl_url, "--cpu", cpu, "--split", "2", "--repeat", "2", *watch(writes), "--",
                   writes, "300")  # fmt: skip
    only_a = submit(acl_url, "--host", a, *watch(writes), "--", writes, "100")
    only_b = submit(acl_url, "--host", b, *watch(writes), "--", writes, "100")
    refused = submit(acl_url, "--host", a, "-e", "task-clock", "--", "/bin/touch", tmp_path / "x")
    marker = tmp_path / "pwned"
    foreign = Queue(f"host:{a}", connection=conn, serializer=JSONSerializer)
    json_job = foreign.enqueue("os.system", f"touch {marker}")
    pickle_job = Queue(f"host:{a}", connection=conn).enqueue(os.system, f"touch {marker}")

    single = tmp_path / "single"  # the same plan on one machine, meanwhile
    local = process("profile", "--repeat", "2", *watch(writes), "-o", single, "--", writes, "300")
    assert local.returncode == 0, local.stderr
    aggregate.write(single, aggregate.aggregate(single))

    done = wait_jobs(conn, parts + only_a + only_b + refused)
    for job_id in parts + only_a + only_b:
        assert done[job_id].status == "finished", done[job_id]
    assert done[only_a[0]].host == a and done[only_b[0]].host == b  # routed by host
    assert {done[p].host for p in parts} == {a, b}  # the split ran on both machines
    assert done[refused[0]].error.startswith("refused: command '/bin/touch ")
    assert not (tmp_path / "x").exists()
    shown = invoke("jobs", "show", refused[0][:8], "--redis", acl_url)
    assert "refused: command" in shown.output

    for job in (json_job, pickle_job):  # not autoprof's function, or not JSON: never run
        deadline = time.monotonic() + 30
        while job.get_status() not in ("failed", "finished") and time.monotonic() < deadline:
            time.sleep(0.2)
        fetched = Job.fetch(job.id, connection=conn, serializer=JSONSerializer)
        assert job.get_status() == "failed" and jobs.info(fetched).error.startswith("refused: ")
    assert not marker.exists()
    assert wa.proc.poll() is None and wb.proc.poll() is None

    seen = outdir.read_manifest(wa.workdir / only_a[0]).job  # the load check is recorded
    assert seen["id"] == only_a[0]
    assert seen["load1"] == pytest.approx(done[only_a[0]].load, abs=0.01)

    for job_id in only_a:  # routed jobs count exactly
        run_id = done[job_id].result.run_id
        frame = export(pg_url, run_id, tmp_path / f"{job_id}.csv")
        want = dict(zip(slot_addresses(writes), expected_writes(100), strict=True))
        got = {k[0]: v for k, v in counts(frame).items()}
        assert got == {f"mem:{addr}:w": n for addr, n in want.items()}

    run_id = done[parts[0]].result.run_id
    assert done[parts[1]].result.run_id == run_id
    assert "complete 2/2" in invoke("runs", "list", "--store", pg_url).output
    exported_path = tmp_path / "split.csv"
    split = export(pg_url, run_id, exported_path)
    whole = csvfile.read_csv(single / outdir.RESULTS)
    assert counts(split) == counts(whole) and len(counts(whole)) == 12 * 2
    key = ["EVENT_NAME", "RUN", "REPEAT"]
    assert sorted(map(tuple, split[key].drop_duplicates().values)) == sorted(
        map(tuple, whole[key].drop_duplicates().values)
    )
    # byte for byte: what one machine's aggregate writes for the parts' very data
    merged = tmp_path / "merged"
    for job_id in parts:
        folder = next(w for w in (wa, wb) if w.hostname == done[job_id].host).workdir / job_id
        shutil.copytree(folder / outdir.RUNS, merged / outdir.RUNS, dirs_exist_ok=True)
    manifest = outdir.read_manifest(folder)
    manifest.options = dataclasses.replace(manifest.options, part=1, parts=1)
    outdir.write_manifest(merged, manifest)
    aggregate.write(merged, aggregate.aggregate(merged))
    assert exported_path.read_bytes() == (merged / outdir.RESULTS).read_bytes()

    listed = invoke("jobs", "list", "--redis", acl_url)
    assert listed.returncode == 0 and a in listed.output and "refused:" in listed.output
    outputs = [listed.output, shown.output, wa.log.read_text(), wb.log.read_text()]
    assert all(SECRET not in text for text in outputs)
    wrong = acl_url.replace(SECRET, "wr0ng-pw")
    denied = invoke("jobs", "list", "--redis", wrong)
    assert denied.returncode == 2 and "wr0ng-pw" not in denied.output
    assert denied.output.count("\n") == 1 and "***@" in denied.output


def test_killed_worker_fails_its_job_and_stores_nothing(writes, redis_url, pg_url, workers):
    conn = connection.connect(redis_url)
    tag = uuid.uuid4().hex[:6]
    c, d = f"c-{tag}", f"d-{tag}"
    allow = f"{writes} [0-9]+"
    wc, wd = (workers(redis_url, pg_url, name, allow) for name in (c, d))
    wait_ready(conn, [c, d])
    [doomed] = submit(redis_url, "--host", c, *watch(writes), "--", writes, "2000")
    [survivor] = submit(redis_url, "--host", d, *watch(writes), "--", writes, "2000")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # kill it while perf runs, after a run has finished
        journal = wc.workdir / doomed / outdir.JOURNAL
        if journal.exists() and journal.read_text().strip():
            break
        time.sleep(0.05)
    wc.kill()
    killed_at = time.monotonic()

    done = wait_jobs(conn, [survivor])  # the other worker keeps going
    survived = done[survivor]
    assert survived.status == "finished" and survived.host == d, (survived, wd.log.read_text())
    failed = wait_jobs(conn, [doomed], timeout=30)[doomed]
    assert failed.status == "failed", failed
    assert failed.error.startswith(f"abandoned: worker {c}.") and "nothing stored" in failed.error
    print(f"abandoned job failed {time.monotonic() - killed_at:.1f} s after the kill")
    listing = invoke("runs", "list", "--store", pg_url).output
    assert survived.result.run_id in listing
    assert failed.profile_id not in listing  # no partial run


def test_submit_checks_and_cancel(redis_url):
    nobody = f"nobody-{uuid.uuid4().hex[:6]}"
    for args, says in [
        ([], "exactly one of --host NAME, --cpu ID, --queue NAME"),
        (["--host", "x", "--queue", "y"], "exactly one of"),
        (["--host", "x", "--split", "2"], "--split needs several machines"),
    ]:
        done = invoke("submit", "--redis", redis_url, *args, "--", "true")
        assert done.returncode == 2 and says in done.output
    [queued] = submit(redis_url, "--host", nobody, "-e", "task-clock", "--", "true")
    listed = invoke("jobs", "list", "--redis", redis_url, "--status", "queued").output
    assert queued in listed and f"host:{nobody}" in listed
    assert invoke("jobs", "cancel", queued[:6], "--redis", redis_url).output.endswith("canceled\n")
    again = invoke("jobs", "cancel", queued, "--redis", redis_url)
    assert again.returncode == 2 and "already ended (canceled)" in again.output
    assert "canceled before it ran" in invoke("jobs", "show", queued, "--redis", redis_url).output
    missing = invoke("jobs", "show", "ffffffff", "--redis", redis_url)
    assert missing.returncode == 2 and "no job ffffffff" in missing.output


def perf_pids(out: Path) -> list[int]:
    """perf pids the profiles under `out` note as running whose process still runs perf."""
    found = []
    for running in outdir.left_running(out):
        pid = running.perf_pid
        comm = Path(f"/proc/{pid}/comm")
        if pid and comm.exists() and comm.read_text().strip() == "perf":
            found.append(pid)
    return found


def test_stopping_a_started_job_stops_its_perf_too(writes, redis_url, pg_url, workers):
    """RQ kills the job's process group; perf leads its own, so the worker stops it as well:
    nothing keeps counting (and loading the machine) after `jobs cancel`."""
    conn = connection.connect(redis_url)
    name = f"e-{uuid.uuid4().hex[:6]}"
    worker = workers(redis_url, pg_url, name, f"{writes} [0-9]+")
    wait_ready(conn, [name])
    [job] = submit(redis_url, "--host", name, *watch(writes)[:8], "--", writes, "4000000")
    deadline = time.monotonic() + 60
    while not perf_pids(worker.workdir) and time.monotonic() < deadline:
        time.sleep(0.05)
    [pid] = perf_pids(worker.workdir)
    assert invoke("jobs", "cancel", job, "--redis", redis_url).returncode == 0
    stopped = wait_jobs(conn, [job], timeout=30)[job]
    assert stopped.status in ("stopped", "failed")
    deadline = time.monotonic() + 30  # the workload alone would write for ~50 s more
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists(), "perf still runs after its job was stopped"
    assert worker.proc.poll() is None  # the worker itself goes on
    assert stopped.profile_id not in invoke("runs", "list", "--store", pg_url).output


def test_worker_without_redis_creates_no_store(tmp_path):
    """The default store is created by a worker's first upload, never by one that cannot even
    reach its queue (a real process: nothing listens on port 1)."""
    env = os.environ | {"XDG_DATA_HOME": str(tmp_path / "data")}
    env.pop("AUTOPROF_STORE", None)
    argv = [sys.executable, "-m", "autoprof", "worker", "--redis", "redis://127.0.0.1:1/0"]
    done = subprocess.run(
        [*argv, "--allow", ".*"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("autoprof: error: Redis redis://127.0.0.1:1/0: ")
    assert done.stderr.count("\n") == 1
    assert not (tmp_path / "data").exists()


def test_jobs_list_and_show_while_a_job_runs_and_after_it_is_stopped(redis_url, workers, tmp_path):
    """RQ 3 gives aware start times: listing a started or stopped job used to crash, and kept
    crashing after one `jobs cancel`. Refused and failed jobs are one line in the worker's log."""
    conn = connection.connect(redis_url)
    name = f"f-{uuid.uuid4().hex[:6]}"
    worker = workers(redis_url, str(tmp_path / "store.db"), name, r"sleep [0-9]+|true")
    wait_ready(conn, [name])
    [unknown] = submit(redis_url, "--host", name, "-e", "NO_SUCH_EVENT.ANY", "--", "true")
    [refused] = submit(redis_url, "--host", name, "-e", "task-clock", "--", "ls")
    [long] = submit(redis_url, "--host", name, "-e", "task-clock", "--", "sleep", "60")
    wait_jobs(conn, [unknown, refused])
    wait_jobs(conn, [long], until={"started"}, timeout=60)
    for args in (("list",), ("show", long)):
        shown = invoke("jobs", *args, "--redis", redis_url)
        assert shown.returncode == 0 and "started" in shown.output
    assert invoke("jobs", "cancel", long, "--redis", redis_url).returncode == 0
    stopped = wait_jobs(conn, [long], timeout=30)[long]
    assert stopped.status == "stopped" and stopped.ended is not None
    assert 0 < stopped.seconds < 60  # it ended when stopped: the time does not keep growing
    for _ in range(2):
        listed = invoke("jobs", "list", "--redis", redis_url)
        assert listed.returncode == 0 and "stopped (jobs cancel)" in listed.output
    shown = invoke("jobs", "show", long, "--redis", redis_url)
    assert shown.returncode == 0 and "stopped (jobs cancel)" in shown.output
    worker.stop()
    log = worker.log.read_text()
    assert "Traceback" not in log
    [failed] = [line for line in log.splitlines() if unknown in line and "failed" in line]
    assert "failed: unknown event 'NO_SUCH_EVENT.ANY'" in failed
    [refusal] = [line for line in log.splitlines() if refused in line and "failed" in line]
    assert refusal.endswith("failed: refused: command 'ls' does not match this worker's --allow")
