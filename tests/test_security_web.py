"""Issue #23, the web server's and the queue's refusals: each test fails on a server without the
rule. Web tests talk HTTP to a real `autoprof serve` process (one per module, on a store with
one run whose out/ folder is a job's of this server), with raw sockets where a client library
would fix the request up (Host, Origin, half-open connections)."""

from __future__ import annotations

import gzip
import json
import os
import socket
import time
import urllib.parse

import pytest

from autoprof.run import outdir
from autoprof.store import driver, engine, upload
from autoprof.testing.cli import process
from autoprof.testing.synthetic_out import make_out
from autoprof.web.guard import host_name, host_names, refusal
from autoprof.web.state import TOKEN_HEADER
from tests.helpers import TOKEN, Served, start_serve, stop

JOB = {"tool": "stat", "command": "true", "events": ["task-clock"]}

WORKLOAD_FILES = {
    "report.html": "<script src='r.js'></script>",
    "r.js": "fetch('/api/jobs', {method: 'POST'})",
    "img.svg": "<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'/>",
    "sub/manifest.json": "{}",
    'odd"\\ñame.html': "<script>alert(1)</script>",
    "flame.svg": "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A server (--allow true, --allow-host stats.example) whose data folder holds a finished
    job: its out/ is the stored run's, with a workload stdout, a symlink and a hard link."""
    root = tmp_path_factory.mktemp("secweb")
    job = root / "data" / "job000000001"
    out = make_out(job / "out", seed=3)
    run_id = upload.upload(driver.Database.of(f"sqlite:///{root}/r.db"), out).uuid
    (job / "request.json").write_text(json.dumps(JOB))
    (job / "result.json").write_text(json.dumps({"state": "failed", "error": "x"}))
    (out / outdir.RUNS / "run0003-rep2" / outdir.STDOUT).write_text(
        "the workload's secret output\n"
    )
    (job / "task.log").write_text("the job's log\n")
    for name, text in WORKLOAD_FILES.items():  # what a workload may leave in its folder
        (out / name).parent.mkdir(exist_ok=True)
        (out / name).write_text(text)
    (root / "elsewhere.txt").write_text("not the run's\n")
    os.link(root / "elsewhere.txt", out / "hard.txt")
    proc, port, log = start_serve(root, "--allow", "true", "--allow-host", "stats.example")
    yield Served(port, proc, log, run_id, job.name)
    stop(proc)


# item 2: `record` of a command with a PID checks the PID too
@pytest.mark.slow  # a real server process
def test_record_with_a_command_checks_its_pid_against_allow(served):
    status, _, body = served.post_job(dict(JOB, tool="record", pid=1))
    assert status == 400
    assert json.loads(body)["error"] == (
        "refused: command '-p 1' does not match this server's --allow"
    )


# item 3b: what a workload printed is for token holders only
@pytest.mark.slow  # a real server process
def test_job_output_needs_the_token(served):
    path = f"/api/jobs/{served.job_id}"
    _, _, public = served.request("GET", path)
    assert {k: json.loads(public)[k] for k in ("stdout", "stderr", "log")} == dict.fromkeys(
        ("stdout", "stderr", "log")
    )
    _, _, private = served.request("GET", path, headers={TOKEN_HEADER: TOKEN})
    assert "secret output" in json.loads(private)["stdout"]
    assert "the job's log" in json.loads(private)["log"]
    stdout = f"/runs/{served.run_id}/files/runs/run0003-rep2/{outdir.STDOUT}"
    assert served.request("GET", stdout)[0] == 403
    status, _, body = served.request("GET", stdout, headers={TOKEN_HEADER: TOKEN})
    assert status == 200 and b"secret output" in body
    status, _, tar = served.request("GET", f"/runs/{served.run_id}/out.tar.gz")
    assert status == 200 and b"secret output" not in gzip.decompress(tar)
    assert b"report.json" in gzip.decompress(tar)  # the rest of out/ is still there


# item 4: DNS rebinding, cross-site requests, framing
@pytest.mark.slow  # a real server process
@pytest.mark.parametrize(
    ("host", "status"),
    [("evil.example", 400), ("evil.example:80", 400), ("127.0.0.1.evil.example", 400),
     ("localhost", 200), ("[::1]:8000", 200), ("STATS.example", 200), (None, 400)],
)  # fmt: skip
def test_only_this_servers_host_names_are_answered(served, host, status):
    answer, headers, body = served.request("GET", "/api/runs", headers={"Host": host})
    assert answer == status
    if host is None:  # HTTP/1.1 needs a Host: h11 refuses it before the app
        return
    if status == 400:
        assert json.loads(body)["error"].endswith("(serve --allow-host NAME adds one)")
    assert headers["x-frame-options"] == "DENY"


@pytest.mark.slow  # a real server process
def test_a_page_from_a_rebound_name_is_one_line(served):
    status, _, body = served.request("GET", "/", headers={"Host": "evil.example"})
    assert status == 400
    assert body.decode().splitlines() == [
        "Host 'evil.example' is not a name of this server (serve --allow-host NAME adds one)"
    ]


@pytest.mark.slow  # a real server process
def test_state_changing_requests_come_from_this_origin(served):
    own = f"http://127.0.0.1:{served.port}"
    status, _, body = served.post_job(JOB, Origin="http://evil.example")
    assert status == 403 and "Origin 'http://evil.example'" in json.loads(body)["error"]
    assert served.post_job(JOB, Origin="null")[0] == 403
    cookie = {"Cookie": f"autoprof_token={TOKEN}", TOKEN_HEADER: None}
    status, _, body = served.post_job(JOB, **cookie)  # the cookie, no Origin
    assert status == 403 and "must send its Origin" in json.loads(body)["error"]
    assert served.post_job(JOB, Origin=own, **cookie)[0] == 202


@pytest.mark.slow  # a real server process
@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_json_endpoints_refuse_other_bodies(served, content_type):
    status, _, body = served.post_job(JOB, content_type=content_type)
    assert status == 415
    assert json.loads(body)["error"] == f"send the body as application/json, not {content_type}"


@pytest.mark.slow  # a real server process
def test_login_stores_only_the_right_token(served):
    status, headers, _ = served.request("GET", "/login?token=guess")
    assert status == 403 and "set-cookie" not in headers
    status, headers, _ = served.request("GET", f"/login?token={TOKEN}")
    assert status == 303 and headers["set-cookie"].startswith(f"autoprof_token={TOKEN};")


@pytest.mark.slow  # a real server process
def test_every_answer_forbids_framing_and_sniffing(served):
    for path in ("/", f"/runs/{served.run_id}", "/api/runs", "/static/app.js", "/nowhere"):
        _, headers, _ = served.request("GET", path)
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
        assert "default-src 'self'" in headers["content-security-policy"]
        assert "frame-ancestors 'none'" in headers["content-security-policy"]


# item 8: malformed requests are 400 with one line, never a 500
@pytest.mark.slow  # a real server process
@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "expected a JSON object"),
        (b"[1,2]", "expected a JSON object, not list"),
        (b'"str"', "expected a JSON object, not str"),
        (b"null", "expected a JSON object, not NoneType"),
        (json.dumps(dict(JOB, repeat=1e999)).encode(), "repeat inf is not a whole number"),
        (b'{"tool":"stat","command":"true","events":["task-clock"],"repeat":1e999}',
         "repeat inf is not a whole number"),
        (json.dumps(dict(JOB, events="task-clock")).encode(), "events: expected a list"),
        (json.dumps(dict(JOB, command=7)).encode(), "command: expected a shell line"),
        (json.dumps(dict(JOB, tool="record", pid="x")).encode(), "pid 'x' is not a whole"),
    ],
)  # fmt: skip
def test_malformed_jobs_are_400_with_one_line(served, body, says):
    status, _, answer = served.post_job(body)
    assert status == 400
    error = json.loads(answer)["error"]
    assert error.startswith(says) and "\n" not in error


# issue #38, item 4: a file a workload wrote is no page or script of this origin
@pytest.mark.slow  # a real server process
@pytest.mark.parametrize("route", ["runs", "records"])
def test_a_workloads_files_are_attachments_in_a_sandbox(served, route):
    ident = served.run_id if route == "runs" else served.job_id
    names = [n for n in WORKLOAD_FILES if route == "runs" or n != "flame.svg"]
    for name in names:
        quoted = urllib.parse.quote(name)
        status, headers, body = served.request(
            "GET", f"/{route}/{ident}/files/{quoted}", headers={TOKEN_HEADER: TOKEN}
        )
        assert status == 200 and body == WORKLOAD_FILES[name].encode(), name
        assert headers["content-type"] == "application/octet-stream", name
        assert headers["content-disposition"].startswith("attachment; filename="), name
        assert headers["content-disposition"].count('"') == 2, name
        assert headers["content-security-policy"].startswith("sandbox;"), name
        assert headers["x-content-type-options"] == "nosniff"


@pytest.mark.slow  # a real server process
def test_the_files_autoprof_renders_are_shown_inline(served):
    for name in (outdir.MANIFEST, outdir.REPORT):
        status, headers, _ = served.request("GET", f"/runs/{served.run_id}/files/{name}")
        assert status == 200 and headers["content-type"] == "application/json", name
        assert "content-disposition" not in headers, name
    # the flame graph: an SVG of its own, whose scripts run in a sandbox with no origin
    status, headers, _ = served.request("GET", f"/records/{served.job_id}/files/flame.svg")
    assert status == 200 and headers["content-type"] == "image/svg+xml"
    assert headers["content-security-policy"].startswith("sandbox allow-scripts;")
    assert "allow-same-origin" not in headers["content-security-policy"]


@pytest.mark.slow  # a real server process
def test_a_nul_in_a_file_path_is_400(served):
    status, _, body = served.request("GET", f"/runs/{served.run_id}/files/%00")
    assert status == 400 and b"NUL byte" in body


# item 15: a run's out/ serves its own files only
@pytest.mark.slow  # a real server process
def test_hard_links_in_out_are_not_served(served):
    files = f"/runs/{served.run_id}/files"
    assert served.request("GET", f"{files}/report.json")[0] == 200
    assert served.request("GET", f"{files}/hard.txt", headers={TOKEN_HEADER: TOKEN})[0] == 404
    _, _, tar = served.request("GET", f"/runs/{served.run_id}/out.tar.gz")
    assert b"not the run's" not in gzip.decompress(tar)


@pytest.mark.slow  # a real server process
def test_an_out_folder_that_is_a_symlink_is_not_served(tmp_path):
    job = tmp_path / "data" / "job000000002"
    real = make_out(tmp_path / "real", seed=4)
    run_id = upload.upload(driver.Database.of(f"sqlite:///{tmp_path}/r.db"), real).uuid
    job.mkdir(parents=True)
    (job / "out").symlink_to(real)  # a link to anywhere: /etc, another user's folder
    proc, port, _ = start_serve(tmp_path)
    try:
        server = Served(port, proc, tmp_path / "log", run_id, job.name)
        assert served_status(server, f"/runs/{run_id}/files/report.json") == 404
        assert served_status(server, f"/runs/{run_id}/out.tar.gz") == 404
    finally:
        stop(proc)


def served_status(server: Served, path: str) -> int:
    return server.request("GET", path, headers={TOKEN_HEADER: TOKEN})[0]


def test_a_machine_filter_matches_percent_and_underscore_literally(tmp_path):
    store = engine.open_store(f"sqlite:///{tmp_path}/r.db")
    for seed, host in enumerate(["node_7", "node17"]):
        upload.upload(store.database, make_out(tmp_path / f"o{seed}", seed=seed, hostname=host))
    with store.read() as conn:
        hosts = {
            text: [h for r in views_of(conn, text) for h in r.hosts]
            for text in ("%", "_", "e_7", "E_7")
        }
    assert hosts == {"%": [], "_": ["node_7"], "e_7": ["node_7"], "E_7": ["node_7"]}


def views_of(conn, machine: str):
    from autoprof.store.queries import RunFilter, list_runs

    return list_runs(conn, RunFilter(machine=machine))


# the guard's rules, without a server
def test_host_names_and_their_spellings():
    names = host_names("::1", ["Stats.Example"])
    assert names == {"127.0.0.1", "localhost", "[::1]", "stats.example"}
    assert [host_name(h) for h in ("a:80", "[::1]:8000", "[::1]", "LOCALHOST")] == [
        "a", "[::1]", "[::1]", "localhost"
    ]  # fmt: skip


def test_the_guard_lets_this_servers_pages_through():
    hosts = host_names("127.0.0.1")
    page = {"host": "127.0.0.1:8000", "origin": "http://127.0.0.1:8000",
            "content-type": "application/json", "content-length": "9",
            "cookie": f"autoprof_token={TOKEN}"}  # fmt: skip
    assert refusal("POST", "/api/jobs", "http", page, hosts) is None
    assert refusal("GET", "/", "http", {"host": "localhost"}, hosts) is None
    curl = {"host": "127.0.0.1:8000", TOKEN_HEADER: TOKEN}  # a script: no cookie, no body
    assert refusal("DELETE", "/api/runs/abcd", "http", curl, hosts) is None
    untyped = dict(curl, **{"content-length": "2"})
    assert refusal("POST", "/api/jobs", "http", untyped, hosts).status == 415


# item 5: slowloris
@pytest.mark.slow  # a real server process, a 2 s header deadline
def test_half_open_connections_are_closed_and_the_log_stays_short(tmp_path):
    proc, port, log = start_serve(tmp_path, "--max-connections", "50", "--header-timeout", "2")
    sockets = []
    try:
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: ")  # never ends
            sockets.append(s)
        server = Served(port, proc, log, "", "")
        assert server.request("GET", "/api/runs")[0] == 200  # evicts the oldest idle one
        closed = 0
        deadline = time.monotonic() + 60  # the 2 s header deadline, on a loaded machine
        for s in sockets:  # each read waits for its close, up to the deadline
            s.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                closed += s.recv(1) == b""
            except ConnectionResetError:
                closed += 1
            except TimeoutError:
                pass  # still open: the assert below says how many
        assert closed == 200
        assert server.request("GET", "/api/runs")[0] == 200
    finally:
        for s in sockets:
            s.close()
        stop(proc)
    text = log.read_text()
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if line.startswith("autoprof serve: ")]
    kinds = {"over 50 connections", "no complete request in 2 s"}
    assert {k for k in kinds for line in lines if k in line} == kinds
    assert len(lines) <= 3  # one line per kind, not one per connection


# item 6: listening beyond this machine
@pytest.mark.slow  # starts serve
def test_listening_beyond_loopback_needs_a_token_file(tmp_path, cli_run):
    refused = cli_run("serve", "--host", "0.0.0.0", "--store", f"sqlite:///{tmp_path}/r.db")
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines() == [
        "autoprof: error: --host 0.0.0.0 listens beyond this machine: give a --token-file "
        "(a token printed to a terminal is not one to share)"
    ]
    proc, port, log = start_serve(tmp_path, "--host", "0.0.0.0", "--allow", "true")
    try:
        assert Served(port, proc, log, "", "").request("GET", "/api/runs")[0] == 200
    finally:
        stop(proc)
    assert (
        "autoprof: warning: listening on 0.0.0.0: whoever reaches port "
        f"{port} reads the store, and starts measurements with the token"
    ) in log.read_text()


# item 16: the queue (a Redis database index of the tests' own: conftest's redis_url)


@pytest.fixture
def rq_conn(redis_url):
    import redis

    return redis.Redis.from_url(redis_url)


def test_a_job_that_inflates_past_the_cap_is_refused_unread(rq_conn):
    import tracemalloc
    import zlib

    from rq import Queue
    from rq.serializers import JSONSerializer

    from autoprof.queue.capped import MAX_JOB_DATA
    from autoprof.queue.spec import JOB_FUNCTION
    from autoprof.queue.worker import ProfileJob

    queue = Queue(f"secweb-test-{os.getpid()}", connection=rq_conn, serializer=JSONSerializer)
    job = queue.enqueue(JOB_FUNCTION, {"command": ["true"]})
    packer = zlib.compressobj(9)
    bomb = b"".join(packer.compress(bytes(1 << 20)) for _ in range(16)) + packer.flush()
    assert len(bomb) < 40_000  # 16 MiB of zeros in Redis as some 16 KB
    rq_conn.hset(job.key, "data", bomb)
    try:
        tracemalloc.start()
        fetched = ProfileJob.fetch(job.id, connection=rq_conn, serializer=JSONSerializer)
        with pytest.raises(Exception, match=f"refused: job data expands past {MAX_JOB_DATA}"):
            fetched.func_name  # noqa: B018 - what the worker reads first
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    finally:
        job.delete()
    assert peak < 4 * MAX_JOB_DATA  # never the 16 MiB


@pytest.mark.slow  # a real worker and submit
def test_a_worker_runs_system_wide_jobs_only_when_allowed(redis_url, tmp_path):
    host = f"secweb-{os.getpid()}"
    store = f"sqlite:///{tmp_path}/r.db"
    common = ["--redis", redis_url]
    submitted = process(
        "submit", *common, "--host", host, "-a", "-e", "task-clock", "--", "true", timeout=60
    )
    assert submitted.returncode == 0, submitted.stderr
    worker = process(
        "worker", *common, "--store", store, "--allow", "true", "--hostname", host, "--burst",
        "--workdir", str(tmp_path / "w"), timeout=120,
    )  # fmt: skip
    assert worker.returncode == 0, worker.stderr
    refused = [line for line in worker.stderr.splitlines() if "refused" in line]
    assert len(refused) == 1 and refused[0].endswith(
        "refused: a system-wide job (-a or --cpu-list: it counts every process on those CPUs) "
        "needs a worker started with --allow-system-wide"
    )
    assert "Traceback" not in worker.stderr
