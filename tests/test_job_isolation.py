"""Issue #29, security items 1, 2, 3, 5, 6 and 8: what a job (of the web, of a worker) may do
to the machine and to autoprof itself, and what others see of it. Each test fails on the code
before the issue."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from starlette.testclient import TestClient

from autoprof.queue import worker
from autoprof.queue.spec import JobSpec, Refused, compile_allow
from autoprof.store import engine
from autoprof.web.app import TOKEN_HEADER, Settings, create_app

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
    from autoprof.pipeline import measure

    with pytest.raises(AutoprofError, match=r"^(refused event: |unknown event )"):
        measure.plan(measure.MeasureSpec(["true"], [event]))  # the CLI's, a worker's, the web's


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
