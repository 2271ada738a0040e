"""`autoprof serve` through its ASGI app (Starlette's test client), on a real SQLite store filled
by `upload`: the JSON API, the pages' escaping, downloads and the refusals.

The browser tests (test_web_browser.py) drive the same pages in Chromium with real perf jobs.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from starlette.testclient import TestClient

from autoprof.analysis.downsample import lttb
from autoprof.perf.command import stat_argv
from autoprof.queue.spec import compile_allow
from autoprof.results.live import Tail
from autoprof.store import driver, engine, export, queries, upload
from autoprof.testing.cli import one_error_line
from autoprof.testing.synthetic_out import EVENTS, PLANNED, make_out
from autoprof.web import views
from autoprof.web.app import create_app
from autoprof.web.state import TOKEN_HEADER, Settings
from tests.helpers import TOKEN, web_client

XSS = "<script>window.pwned=1</script>"


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[str, list[str]]:
    """A store with three runs: two of one command (one tagged with a script), one of another."""
    root = tmp_path_factory.mktemp("web")
    url = f"sqlite:///{root / 'results.db'}"
    store = engine.open_store(url)
    ids = []
    for seed, (host, command, tags) in enumerate(
        [
            ("node7", ("./w", "1000"), {"who": XSS}),
            ("node7", ("./w", "2000"), {"suite": "a"}),
            ("node9", ("./other",), {"suite": "b"}),
        ]
    ):
        out = make_out(root / f"out{seed}", seed=seed, hostname=host, command=command)
        ids.append(upload.upload(store.database, out, tags).uuid)
    store.engine.dispose()
    return url, ids


@pytest.fixture
def web(stored, tmp_path):
    with web_client(stored[0], tmp_path, ["./w [0-9]+"]) as c:
        yield c


def test_runs_list_filters_and_pages(web, stored):
    _, ids = stored
    every = web.get("/api/runs").json()
    assert every["total"] == 3
    assert [r["uuid"] for r in every["runs"]] == ids[::-1]  # newest first
    assert {r["uuid"] for r in web.get("/api/runs?machine=node9").json()["runs"]} == {ids[2]}
    assert {r["uuid"] for r in web.get("/api/runs?tag=suite=a").json()["runs"]} == {ids[1]}
    assert {r["uuid"] for r in web.get("/api/runs?text=2000").json()["runs"]} == {ids[1]}
    assert web.get("/api/runs?since=2030-01-01").json()["total"] == 0
    with engine.open_store(stored[0]).read() as conn:
        paged = [r.uuid for r in queries.list_runs(conn, newest_first=True, offset=1, limit=1)]
    assert paged == [ids[1]]
    assert every["runs"][0]["sanity"] == {}  # make_out's report lists nothing wrong
    report = {"events": {"multiplexed": [{"event": "a"}], "not_counted": []},
              "runs": {"failed": [{"run": 1, "repeat": 1}], "missing": []}}  # fmt: skip
    assert views._sanity_flags(report) == {"multiplexed": 1, "runs failed": 1}


def test_run_api_event_table_and_series(web, stored):
    _, ids = stored
    run = web.get(f"/api/runs/{ids[0][:8]}").json()
    assert run["id"] == ids[0]
    names = {e["event"] for e in run["events"]}
    assert {e[0] for e in EVENTS} <= names
    series = web.get(f"/api/runs/{ids[0]}/series", params={"event": "task-clock"}).json()
    assert len(series["lines"]) == 3 * 2  # runs x repeats of make_out
    assert all(len(line["x"]) == line["intervals"] == 20 for line in series["lines"])
    assert sum(series["histogram"]["counts"]) == 3 * 2 * 20
    # a per-CPU event: each point is the sum over CPUs of that interval, as in the export
    per_cpu = web.get(f"/api/runs/{ids[0]}/series", params={"event": "context-switches"}).json()
    with engine.open_store(stored[0]).read() as conn:
        frame = export.frame(conn, ids[0])
    rows = frame[(frame["EVENT_NAME"] == "context-switches") & (frame["RUN"] == 2)]
    expected = rows[rows["REPEAT"] == 1].groupby("INDEX")["SAMPLE_VALUE"].sum(min_count=1)
    line = next(x for x in per_cpu["lines"] if x["name"] == "run 2 repeat 1")
    assert line["y"] == pytest.approx(expected.dropna().tolist())
    small = web.get(f"/api/runs/{ids[0]}/series", params={"event": "task-clock", "points": 10})
    assert all(len(line["x"]) == 10 for line in small.json()["lines"])


def test_analysis_and_compare(web, stored):
    _, ids = stored
    analysis = web.get(f"/api/runs/{ids[0]}/analysis").json()
    matrix = analysis["correlation"]["matrix"]
    assert len(matrix) == len(analysis["correlation"]["events"]) >= 2
    assert all(row[i] == pytest.approx(1.0) for i, row in enumerate(matrix))
    compared = web.get(f"/api/compare?a={ids[0]}&b={ids[1]}").json()
    assert {r["event"] for r in compared["rows"]} >= {"task-clock", "page-faults"}


def test_csv_download_is_runs_export(web, stored, tmp_path):
    url, ids = stored
    got = web.get(f"/runs/{ids[1]}/results.csv")
    assert got.status_code == 200
    from autoprof.results import csvfile

    with engine.open_store(url).read() as conn:
        frame = export.frame(conn, ids[1])
    csvfile.write_csv(frame, tmp_path / "export.csv")
    assert got.content == (tmp_path / "export.csv").read_bytes()
    parquet = web.get(f"/runs/{ids[1]}/results.parquet")
    assert parquet.content[:4] == b"PAR1"
    pd.testing.assert_frame_equal(pd.read_parquet(io.BytesIO(parquet.content)), frame)


def test_user_text_is_escaped(web, stored):
    page = web.get("/").text
    assert XSS not in page and "&lt;script&gt;window.pwned=1&lt;/script&gt;" in page
    run_page = web.get(f"/runs/{stored[1][0]}").text
    assert XSS not in run_page


def test_the_run_page_shows_options_as_their_flags(web, stored):
    """Issue #41: the page showed Python's reprs ("system_wide=False cpu_list=None")."""
    page = web.get(f"/runs/{stored[1][0]}").text
    assert "<code>--interval 100 --repeat " in page
    assert "system_wide" not in page and "=None" not in page and "=False" not in page
    assert "Total per execution" in page and "total x executions = mean x intervals" in page


def test_refusals(web, stored, tmp_path):
    _, ids = stored
    assert web.delete(f"/api/runs/{ids[2]}").status_code == 403  # no token
    job = {"tool": "stat", "command": "./w 5", "events": ["task-clock"]}
    assert web.post("/api/jobs", json=job).status_code == 403
    outside = web.post(
        "/api/jobs", json=dict(job, command="rm -rf /"), headers={TOKEN_HEADER: TOKEN}
    )
    assert outside.status_code == 400
    assert "does not match this server's --allow" in outside.json()["error"]
    # the client keeps %2e%2e: the server decodes it into ../ inside the path
    for path in ("/runs/%s/files/%%2e%%2e/%%2e%%2e/etc/passwd", "/runs/%s/out.tar.gz"):
        assert web.get(path % ids[0]).status_code == 404
    assert web.get("/runs/ffffffff").status_code == 404
    assert web.get("/api/runs?page=abc").status_code == 400
    with web_client(stored[0], tmp_path / "ro") as read_only:
        assert read_only.get("/new").status_code == 404
        answer = read_only.delete(f"/api/runs/{ids[2]}", headers={TOKEN_HEADER: TOKEN})
        assert answer.status_code == 403 and "read-only" in answer.json()["error"]


def test_delete_with_token(tmp_path):
    url = f"sqlite:///{tmp_path / 'delete.db'}"
    out = make_out(tmp_path / "out", seed=42)
    uuid = upload.upload(driver.Database.of(url), out).uuid
    with web_client(url, tmp_path / "d", ["x"]) as web:
        answer = web.delete(f"/api/runs/{uuid}", headers={TOKEN_HEADER: TOKEN})
        assert answer.status_code == 200 and answer.json()["deleted"] == uuid
        assert web.get(f"/api/runs/{uuid}").status_code == 404


def test_openapi_lists_the_api(web):
    schema = web.get("/api/schema").json()
    assert {"/api/runs", "/api/runs/{run_id}/series", "/api/jobs"} <= set(schema["paths"])
    assert set(schema["paths"]["/api/jobs"]) == {"get", "post"}


def test_plotly_is_served_from_the_package(web):
    js = web.get("/static/plotly.min.js")
    assert js.status_code == 200 and re.search(rb"plotly\.js v\d", js.content[:2000])


def test_lttb_keeps_ends_and_spikes():
    x = np.arange(10_000, dtype=float)
    y = np.sin(x / 500)
    y[7_777] = 50.0
    keep = lttb(x, y, 500)
    assert len(keep) == 500 and keep[0] == 0 and keep[-1] == 9_999
    assert 7_777 in keep and np.all(np.diff(keep) > 0)
    assert list(lttb(x[:100], y[:100], 500)) == list(range(100))
    y[5] = np.nan
    assert 5 not in lttb(x[:100], y[:100], 500)


@pytest.mark.slow  # real perf stat, read while it writes
def test_live_tail_sees_intervals_within_a_second(tmp_path):
    """perf stat -I writes each interval as it ends: the live view's Tail reads it well within
    the second the page promises (the page polls every 0.2 s on top)."""
    if shutil.which("perf") is None:
        pytest.skip("needs perf")
    folder = tmp_path / "out" / "runs" / "run0001-rep1"
    folder.mkdir(parents=True)
    busy = ["timeout", "2", "sh", "-c", "while :; do :; done"]  # 2 s on the CPU: ~20 intervals
    argv = stat_argv(["task-clock"], busy, str(folder / "perf.csv"), interval_ms=100)
    tail = Tail(tmp_path / "out")
    began = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lags = []
    while proc.poll() is None:
        time.sleep(0.05)
        if tail.poll() or tail.points:
            lags.append(time.monotonic() - began - max(p["t"] for p in tail.points))
    tail.poll()
    assert len(tail.points) >= 5, "the workload ran too short to see intervals"
    # a loaded machine may stall one read past the second; the typical one keeps the promise
    assert sorted(lags)[len(lags) // 2] < 1.0, lags
    assert {p["event"] for p in tail.points} == {"task-clock"}


@pytest.mark.slow  # a real RQ worker runs the job
def test_jobs_go_to_rq_when_redis_is_set(stored, tmp_path, redis_url):
    from autoprof.queue import connection
    from autoprof.testing.workers import WorkerProcess, wait_ready

    if shutil.which("perf") is None:
        pytest.skip("needs perf")
    conn = connection.connect(redis_url)
    url, _ = stored
    host = socket.gethostname()
    worker = WorkerProcess(tmp_path, redis_url, url, host, "dd .*")
    try:
        wait_ready(conn, [host])
        settings = Settings(engine.open_store(url), tmp_path, TOKEN, compile_allow(["dd .*"]))
        settings.redis_url = redis_url
        settings.allow_env = frozenset({"OMP_NUM_THREADS"})  # allowed: the queue's own rule answers
        with TestClient(create_app(settings), base_url="http://127.0.0.1") as web:
            auth = {TOKEN_HEADER: TOKEN}
            job = {"tool": "profile", "command": "dd if=/dev/zero of=/dev/null count=2000",
                   "events": ["task-clock"], "tags": "via=rq"}  # fmt: skip
            refused = web.post("/api/jobs", json=dict(job, env="OMP_NUM_THREADS=1"), headers=auth)
            assert refused.status_code == 400 and "profiles only" in refused.json()["error"]
            answer = web.post("/api/jobs", json=job, headers=auth)
            assert answer.status_code == 202
            job_id = answer.json()["id"]
            for _ in range(240):
                state = web.get(f"/api/jobs/{job_id}").json()
                if state["state"] in ("done", "failed", "stopped"):
                    break
                time.sleep(0.5)
            assert state["state"] == "done", state["error"]
            run = web.get(f"/api/runs/{state['run_id']}").json()
            assert run["tags"] == {"via": "rq"} and run["command"][0] == "dd"
    finally:
        worker.stop()
        conn.flushdb()


def test_metrics_in_the_report_are_shown(tmp_path):
    url = f"sqlite:///{tmp_path / 'metrics.db'}"
    out = make_out(tmp_path / "out", seed=7)
    report = json.loads((out / "report.json").read_text())
    report["metrics"] = {"IPC": 1.25, "<b>bold</b>": 2}
    (out / "report.json").write_text(json.dumps(report))
    uuid = upload.upload(driver.Database.of(url), out).uuid
    with web_client(url, tmp_path / "m") as web:
        page = web.get(f"/runs/{uuid}").text
    assert "<h2>Metrics" in page and "<td>IPC</td>" in page and "1.25" in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page


def test_new_form_takes_a_past_runs_settings(web, stored):
    _, ids = stored
    page = web.get(f"/new?run={ids[1]}").text
    assert 'value="./w 2000"' in page
    data = json.loads(re.search(r'id="page-data"[^>]*>(.*?)</script>', page, re.S).group(1))
    assert set(data["events"]) == {e[0] for e in PLANNED}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--allow", "("], "--allow '(' is not a regular expression"),
        (["--token-file", "/nonexistent/token"], "cannot read a token from it"),
    ],
)
def test_serve_bad_options_are_one_line(args, says, tmp_path, cli_run):
    proc = cli_run("serve", "--store", tmp_path / "s.db", *args)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("autoprof: error: ") and says in proc.stderr


def test_series_of_a_split_run_come_from_every_part(tmp_path):
    url = f"sqlite:///{tmp_path / 'split.db'}"
    store = engine.open_store(url)
    run_id = "0c0ffee0-0000-4000-8000-000000000001"
    for part in (1, 2):
        out = make_out(tmp_path / f"p{part}", runs=3, profile_id=run_id, part=part, parts=2)
        upload.upload(store.database, out)
    with web_client(url, tmp_path / "d") as web:
        series = web.get(f"/api/runs/{run_id}/series", params={"event": "context-switches"})
    names = sorted(line["name"] for line in series.json()["lines"])
    assert names == [f"run {r} repeat {k}" for r in (1, 2, 3) for k in (1, 2)]
    assert all(line["intervals"] == 20 for line in series.json()["lines"])


@pytest.mark.slow
def test_a_profile_job_attaches_to_a_running_process(stored, tmp_path):
    """A stat/profile job given a PID watches that process for `duration` per group (profile
    -p); the process is left running."""
    if shutil.which("perf") is None:
        pytest.skip("needs perf")
    busy = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        with web_client(stored[0], tmp_path, ["-p [0-9]+"]) as web:
            auth = {TOKEN_HEADER: TOKEN}
            job = {"tool": "profile", "command": "", "pid": busy.pid, "duration": 0.3,
                   "events": ["task-clock", "context-switches"]}  # fmt: skip
            both = web.post("/api/jobs", json=dict(job, command="./w 1"), headers=auth)
            assert both.status_code == 400 and "not both" in both.json()["error"]
            answer = web.post("/api/jobs", json=job, headers=auth)
            assert answer.status_code == 202, answer.json()
            job_id = answer.json()["id"]
            deadline = time.monotonic() + 120
            while (state := web.get(f"/api/jobs/{job_id}").json())["state"] not in (
                "done", "failed", "stopped",
            ) and time.monotonic() < deadline:  # fmt: skip
                time.sleep(0.2)
            assert state["state"] == "done", state["error"]
            run = web.get(f"/api/runs/{state['run_id']}").json()
            assert run["parts"][0]["options"]["pids"] == str(busy.pid)
            assert run["parts"][0]["options"]["duration"] == 0.3
            series = web.get(f"/api/runs/{state['run_id']}/series", params={"event": "task-clock"})
            busy_ms = sum(sum(line["y"]) for line in series.json()["lines"])
            assert 30 < busy_ms < 1000  # a busy loop watched for 0.3 s (2 cores, shared)
        assert busy.poll() is None  # still running, unharmed
    finally:
        busy.kill()
        busy.wait()


def test_run_metrics_give_the_top_down_tree_of_the_recorded_cpu(tmp_path):
    """A zen4 run (synthetic counts of a PipelineL1/L2 plan, through `aggregate`): the API
    returns `analyze metrics`' tree by the CPU id the run recorded; an Intel run without
    topdown events has no tree rows but no error."""
    from autoprof.catalog import host
    from autoprof.metrics import catalog as metric_catalog
    from autoprof.metrics.plan import plan_metrics
    from autoprof.results import aggregate
    from autoprof.testing.synthetic_out import profile_from_plan

    catalog = host.build_catalog(cpu="zen4", deprecated=True)
    chosen = metric_catalog.for_machine(None, "zen4").select(["PipelineL1", "PipelineL2"])
    plan = plan_metrics(catalog, chosen, smt=True, consistent=True).plan
    counts = {
        e.name: 1000.0 * (i + 1) for i, e in enumerate(e for r in plan.runs for e in r.events)
    }
    counts["ls_not_halted_cyc"] = 1e6
    out = profile_from_plan(tmp_path / "zen4", plan, lambda e: counts[e.name])
    aggregate.aggregate_to(out)
    url = f"sqlite:///{tmp_path / 'm.db'}"
    store = engine.open_store(url)
    zen4 = upload.upload(store.database, out).uuid
    intel = upload.upload(store.database, make_out(tmp_path / "skx", seed=3)).uuid
    with web_client(url, tmp_path / "d") as web:
        tree = web.get(f"/api/runs/{zen4}/metrics").json()
        other = web.get(f"/api/runs/{intel}/metrics").json()
        page = web.get(f"/runs/{zen4}").text
    assert tree["cpu"] == "amdzen4"
    names = [(row["depth"], row["name"]) for row in tree["tree"]]
    assert names[:3] == [(0, "frontend_bound"), (1, "frontend_bound_latency"),
                         (1, "frontend_bound_bandwidth")]  # fmt: skip
    assert len(names) == 13 and sum(row["bottleneck"] for row in tree["tree"]) == 1
    assert tree["notes"][0].startswith("16 of 73 metrics computed")
    assert "error" not in other and other["cpu"] == "GenuineIntel-6-55-4"
    assert '<section id="topdown">' in page


def test_options_autoprof_would_not_have_written_show_as_their_json():
    assert views._flags({"repeat": "3; rm", "parts": "x"}) == '{"repeat": "3; rm", "parts": "x"}'
    assert views._flags(["not", "a", "dict"]) == '["not", "a", "dict"]'
    assert views._flags({"repeat": 2, "system_wide": True}) == (
        "--interval 100 --repeat 2 --system-wide"
    )


def test_the_top_down_tree_of_a_run_without_hardware_events_says_why_it_is_empty(tmp_path):
    """Issue #41: a PMU-less VM's run showed "0 of 13 metrics computed" and nothing else."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(Path(__file__).parent / "data" / "profile-ed64973", out)
    url = f"sqlite:///{tmp_path / 'm.db'}"
    run = upload.upload(driver.Database.of(url), out).uuid
    with web_client(url, tmp_path / "d") as web:
        metrics = web.get(f"/api/runs/{run}/metrics").json()
    assert metrics["notes"][0].startswith("these results count no hardware event")
    assert metrics["notes"][1].startswith("0 of ")


def test_serve_on_a_busy_port_is_one_line_before_any_banner(cli_run, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = cli_run("serve", "--port", str(port), "--store", tmp_path / "s.db")
    assert proc.returncode == 2 and proc.stdout == ""  # no banner first
    line = one_error_line(proc)
    assert f"cannot listen on 127.0.0.1 port {port}: Address already in use" in line
    assert "--port" in line


def test_served_pages_have_an_icon_and_no_token_field_once_logged_in(tmp_path):
    from tests.helpers import TOKEN, web_client

    with web_client(f"sqlite:///{tmp_path / 's.db'}", tmp_path / "data", ["true"]) as web:
        icon = web.get("/favicon.ico")
        assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
        assert icon.text.startswith("<svg") and 'rel="icon"' in web.get("/").text
        assert 'id="token"' in web.get("/new").text  # not logged in: the field asks for it
        web.get(f"/login?token={TOKEN}")  # sets the cookie
        assert 'id="token"' not in web.get("/new").text
