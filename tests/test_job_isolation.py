"""Issue #29, security items 1, 2, 3, 5, 6 and 8: what a job (of the web, of a worker) may do
to the machine and to autoprof itself, and what others see of it. Each test fails on the code
before the issue."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from autoprof.queue import worker
from autoprof.queue.spec import JobSpec, Refused, compile_allow
from autoprof.store import engine
from autoprof.testing.cli import process
from autoprof.web.app import create_app
from autoprof.web.state import TOKEN_HEADER, Settings
from tests.helpers import TOKEN as SERVED_TOKEN
from tests.helpers import Served, start_serve, stop

TOKEN = "t" * 24
AUTH = {TOKEN_HEADER: TOKEN}
JOB = {"tool": "stat", "command": "true", "events": ["task-clock"]}


def web_client(tmp_path: Path, **settings) -> TestClient:
    """The web app in this process (Starlette's TestClient), allowing `true`."""
    store = engine.open_store(f"sqlite:///{tmp_path / 'results.db'}")
    app = create_app(Settings(store, tmp_path / "data", TOKEN, compile_allow(["true"]), **settings))
    return TestClient(app, base_url="http://127.0.0.1")


def worker_settings(tmp_path: Path, **values) -> worker.Settings:
    return worker.Settings(
        store=f"sqlite:///{tmp_path}/r.db",
        allow=compile_allow(["true"]),
        hostname="h",
        workdir=tmp_path / "w",
        **values,
    )


def spec(**options) -> JobSpec:
    return JobSpec.from_json(
        {"command": ["true"], "options": options, "profile_id": str(uuid.uuid4())}
    )


# item 3: --cpu-list counts every process on those CPUs, as -a does on all of them
@pytest.mark.parametrize("options", [{"system_wide": True}, {"cpu_list": "0"}])
def test_a_worker_runs_jobs_that_count_other_processes_only_when_allowed(tmp_path, options):
    with pytest.raises(Refused, match=r"needs a worker started with --allow-system-wide"):
        worker.check_spec(spec(**options), worker_settings(tmp_path))
    worker.check_spec(spec(**options), worker_settings(tmp_path, allow_system_wide=True))
    worker.check_spec(spec(), worker_settings(tmp_path))  # the command's own processes only


# item 1: every tool checks every event the one way (host.resolve_events), and perf gets only
# what they resolve to: never a second event after a comma, nor a file perf loads as BPF
SMUGGLED = [
    "/tmp/x.o",  # perf built with BPF support loads it as a program
    "msr/tsc/,/tmp/x.o,msr/tsc/",  # three events in one, the middle one a BPF object
    "msr/tsc,name=x.o/",  # a term perf's lexer reads as a BPF object's file name
]


@pytest.mark.parametrize("event", SMUGGLED)
def test_a_profile_refuses_what_is_not_one_event_of_this_machine(event):
    from autoprof.errors import AutoprofError
    from autoprof.run import planning
    from autoprof.run.request import Request

    with pytest.raises(AutoprofError, match=r"^(refused event: |unknown event )"):
        planning.plan(Request(["true"], [event]))  # the CLI's, a worker's, the web's


@pytest.mark.parametrize("event", SMUGGLED)
def test_record_refuses_what_is_not_one_event_before_perf_runs(tmp_path, cli_run, event):
    run = cli_run("record", "-e", event, "-o", tmp_path / "rec", "--", "true")
    assert run.returncode == 2
    [line] = run.stderr.strip().splitlines()
    assert line.startswith(("autoprof: error: refused event: ", "autoprof: error: unknown event"))
    assert not (tmp_path / "rec").exists()  # perf never ran: no record.json, no perf.data


@pytest.mark.parametrize("tool", ["stat", "profile", "record"])
def test_the_web_refuses_a_job_whose_events_are_not_events_here(tmp_path, tool):
    with web_client(tmp_path) as web:
        for event in SMUGGLED:
            answer = web.post("/api/jobs", json=dict(JOB, tool=tool, events=[event]), headers=AUTH)
            assert answer.status_code == 400, (event, answer.text)
            assert answer.json()["error"].startswith(("refused event: ", "unknown event "))
        assert web.get("/api/jobs").json() == []  # nothing was queued


# items 2 and 6: a job's environment reaches its workload only; the store's password (in
# AUTOPROF_STORE) reaches no process whose environment or memory the workload could read


def unprivileged() -> tuple[str, ...]:
    """A prefix that runs a command as this user without privileges: as root, every capability
    dropped (root without CAP_SYS_PTRACE reads /proc/PID/environ as any user reads their own
    processes'); skips when perf cannot count task-clock so."""
    if shutil.which("perf") is None:
        pytest.skip("needs perf")
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root, and no setpriv to drop root's capabilities")
        prefix = ("setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all",
                  "--no-new-privs", "--")  # fmt: skip
    probe = subprocess.run([*prefix, "perf", "stat", "-e", "task-clock", "true"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    if probe.returncode != 0:
        pytest.skip(f"perf cannot count unprivileged here: {probe.stderr.strip()[-200:]}")
    return prefix


# every environment and command line the workload can read, then its own job variable
SCAN = [
    "sh",
    "-c",
    "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\000' '\\n' < \"$f\"; done"
    ' 2>/dev/null; echo "own OMP_NUM_THREADS=$OMP_NUM_THREADS"',
]


def wait_for_job(server, job_id: str, deadline_s: float = 180) -> dict:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        _, _, body = server.request(
            "GET", f"/api/jobs/{job_id}", headers={TOKEN_HEADER: SERVED_TOKEN}
        )
        job = json.loads(body)
        if job["state"] in ("done", "failed", "stopped"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not end in {deadline_s} s: {job}")


@pytest.mark.slow  # a real server, a real job
def test_no_process_a_web_job_can_read_holds_the_store_password(tmp_path):
    auth = {TOKEN_HEADER: SERVED_TOKEN, "Content-Type": "application/json"}
    prefix = unprivileged()
    secret = f"secret-{uuid.uuid4().hex}"
    env = {**os.environ, "AUTOPROF_STORE": f"sqlite:///{tmp_path}/{secret}.db"}
    proc, port, log = start_serve(tmp_path, "--allow", ".*", "--allow-env", "OMP_NUM_THREADS",
                                  env=env, prefix=prefix, store=False)  # fmt: skip
    server = Served(port, proc, log, "", "")
    try:
        job = dict(JOB, command=SCAN, env="OMP_NUM_THREADS=3")
        status, _, body = server.request("POST", "/api/jobs", json.dumps(job).encode(),
                                         auth)  # fmt: skip
        assert status == 202, body
        ended = wait_for_job(server, json.loads(body)["id"])
        assert ended["state"] == "done", (ended, log.read_text())
    finally:
        stop(proc)
    [printed] = [p.read_text() for p in (tmp_path / "data").glob("*/out/runs/*/stdout.txt")]
    assert "own OMP_NUM_THREADS=3" in printed  # the job's variable reached its workload
    assert "LC_ALL=C" in printed  # the workload read environments (its own at least)
    assert secret not in printed


@pytest.mark.slow  # a real worker and a real job
def test_no_process_a_worker_job_can_read_holds_the_store_password(tmp_path, redis_url):
    prefix = unprivileged()
    secret = f"secret-{uuid.uuid4().hex}"
    host = f"iso-{os.getpid()}"
    submitted = process(
        "submit", "--redis", redis_url, "--host", host, "-e", "task-clock", "--", *SCAN, timeout=60
    )
    assert submitted.returncode == 0, submitted.stderr
    env = {**os.environ, "AUTOPROF_STORE": f"sqlite:///{tmp_path}/{secret}.db"}
    worker_run = subprocess.run(
        [*prefix, sys.executable, "-m", "autoprof", "worker", "--redis", redis_url,
         "--allow", ".*", "--hostname", host, "--burst", "--keep", "--max-load", "1000",
         "--workdir", str(tmp_path / "w")],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert worker_run.returncode == 0, worker_run.stderr
    [printed] = [p.read_text() for p in (tmp_path / "w").glob("*/runs/*/stdout.txt")]
    assert "LC_ALL=C" in printed
    assert secret not in printed


@pytest.mark.slow  # a real job process and perf
def test_a_jobs_variables_change_its_workload_never_autoprof_itself(tmp_path):
    """Before, the job's process applied the job's variables to itself: with XDG_CACHE_HOME
    (or HOME) it read autoprof's cached catalog from a folder the job chose."""
    chosen, own = tmp_path / "chosen-cache", tmp_path / "own-cache"
    folder = tmp_path / "job"
    folder.mkdir()
    request = {"tool": "stat", "command": ["sh", "-c", "echo cache=$XDG_CACHE_HOME"],
               "events": ["task-clock"], "env": {"XDG_CACHE_HOME": str(chosen)}}  # fmt: skip
    (folder / "request.json").write_text(json.dumps(request))
    store = f"sqlite:///{tmp_path}/r.db"
    env = {**os.environ, "XDG_CACHE_HOME": str(own), "AUTOPROF_STORE": store}
    task = subprocess.run([sys.executable, "-m", "autoprof.web.task", str(folder)],
                          input=store + "\n", capture_output=True, text=True, env=env,
                          timeout=180)  # fmt: skip
    assert task.returncode == 0, task.stdout + task.stderr
    result = json.loads((folder / "result.json").read_text())
    assert result["state"] == "done", result
    [printed] = [p.read_text() for p in folder.glob("out/runs/*/stdout.txt")]
    assert printed == f"cache={chosen}\n"  # the workload has the job's variable
    assert not chosen.exists()  # autoprof kept to its own cache


# item 2: an allow-list of harmless variables, not a deny-list of dangerous ones
CHOOSE_FILES = ["HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "TMPDIR", "OPENSSL_CONF",
                "JAVA_TOOL_OPTIONS", "PERLLIB", "LUA_INIT", "PGPASSFILE", "PGHOST"]  # fmt: skip


@pytest.mark.parametrize("name", CHOOSE_FILES)
def test_a_job_may_set_only_harmless_variables_whatever_the_operator_lists(tmp_path, name):
    with web_client(tmp_path, allow_env=frozenset(CHOOSE_FILES)) as web:
        answer = web.post("/api/jobs", json=dict(JOB, env=f"{name}=/tmp/x"), headers=AUTH)
    assert answer.status_code == 400
    assert answer.json()["error"].startswith(f"refused: a job may not set {name} (only these")


@pytest.mark.parametrize("name", ["HOME", "PGHOST"])
def test_serve_does_not_start_allowing_a_variable_that_is_not_harmless(
    tmp_path, cli_run, monkeypatch, name
):
    def served(*_):  # the server's start, reached only when the options were taken
        raise AssertionError(f"serve started with --allow-env {name}")

    monkeypatch.setattr("autoprof.web.server.serve", served)
    run = cli_run("serve", "--allow", "true", "--allow-env", name, "--store", tmp_path / "r.db")
    assert run.returncode == 2
    [line] = run.stderr.strip().splitlines()
    assert line.startswith(f"autoprof: error: --allow-env {name}: no job may set it (only these")
    assert "OMP_NUM_THREADS" in line


# items 5 and 8: what anyone sees of a job (no token): not the values of its environment, not
# the server's paths in its messages


@pytest.fixture
def past_job(tmp_path) -> tuple[Path, str]:
    """A failed record job of an earlier run of the server, in its data folder."""
    folder = tmp_path / "data" / "job00000000a"
    (folder / "out").mkdir(parents=True)
    request = {"tool": "record", "command": ["true"], "env": {"OMP_NUM_THREADS": "s3cret-7"}}
    (folder / "request.json").write_text(json.dumps(request))
    error = f"perf record failed: bad (see {folder}/out/stderr.txt)"
    warning = f"no symbols for /home/alice/private/bin/x (see {folder}/task.log)"
    result = {"state": "failed", "error": error, "warnings": [warning]}
    (folder / "result.json").write_text(json.dumps(result))
    return tmp_path / "data", folder.name


def test_anyone_sees_a_jobs_variables_by_name_only(tmp_path, past_job):
    _, job_id = past_job
    with web_client(tmp_path) as web:
        public = [web.get(p) for p in ("/api/jobs", f"/api/jobs/{job_id}", f"/new?job={job_id}")]
        assert all(answer.status_code == 200 for answer in public)
        assert not [a.url for a in public if "s3cret-7" in a.text]
        assert web.get("/api/jobs").json()[0]["request"]["env"] == {"OMP_NUM_THREADS": None}
        private = [web.get(f"/api/jobs/{job_id}", headers=AUTH), web.get(f"/new?job={job_id}",
                                                                      headers=AUTH)]  # fmt: skip
        assert all("s3cret-7" in answer.text for answer in private)


def test_anyone_sees_a_jobs_messages_without_the_servers_paths(tmp_path, past_job):
    data, job_id = past_job
    with web_client(tmp_path) as web:
        pages = ["/api/jobs", f"/api/jobs/{job_id}", f"/jobs/{job_id}", "/new"]
        public = {p: web.get(p).text for p in pages}
        assert not [p for p, text in public.items() if str(tmp_path) in text or "alice" in text]
        job = web.get(f"/api/jobs/{job_id}").json()
        assert job["error"] == "perf record failed: bad (see out/stderr.txt)"
        assert job["result"]["warnings"] == ["no symbols for .../x (see task.log)"]
        whole = web.get(f"/api/jobs/{job_id}", headers=AUTH).json()
        assert whole["error"] == f"perf record failed: bad (see {data / job_id}/out/stderr.txt)"
