"""Issue #23, items 1 and 3: a job's environment cannot run code past --allow, and no workload
(CLI, worker or web) sees autoprof's own AUTOPROF_* settings, such as the store's password."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from autoprof.perf.process import workload_env
from autoprof.queue.spec import compile_allow
from autoprof.run import outdir
from autoprof.store import engine
from autoprof.testing.cli import process
from autoprof.web.app import create_app
from autoprof.web.state import TOKEN_HEADER, Settings
from tests.helpers import free_port

TOKEN = "k" * 24
# Each runs code of the job's choosing: the loader, Python, bash, webbrowser, PATH, the store.
DANGEROUS = ["LD_PRELOAD", "ld_audit", "PYTHONWARNINGS", "PYTHONSTARTUP", "BASH_ENV", "ENV",
             "PATH", "BROWSER", "GCONV_PATH", "AUTOPROF_STORE"]  # fmt: skip
JOB = {"tool": "stat", "command": "true", "events": ["task-clock"]}


def web_client(tmp_path: Path, allow_env: set[str]) -> TestClient:
    store = engine.open_store(f"sqlite:///{tmp_path / 'results.db'}")
    settings = Settings(store, tmp_path / "data", TOKEN, compile_allow(["true"]))
    settings.allow_env = frozenset(allow_env)
    return TestClient(create_app(settings), base_url="http://127.0.0.1")


@pytest.mark.parametrize("name", DANGEROUS)
def test_a_job_may_never_set_a_variable_that_runs_code(tmp_path, name):
    with web_client(tmp_path, set(DANGEROUS)) as web:  # even when the operator listed it
        answer = web.post(
            "/api/jobs", json=dict(JOB, env=f"{name}=x"), headers={TOKEN_HEADER: TOKEN}
        )
    assert answer.status_code == 400
    assert f"may not set {name}" in answer.json()["error"]


def test_a_job_sets_only_the_variables_the_operator_listed(tmp_path):
    auth = {TOKEN_HEADER: TOKEN}
    with web_client(tmp_path, set()) as web:
        refused = web.post("/api/jobs", json=dict(JOB, env="OMP_NUM_THREADS=2"), headers=auth)
    assert refused.status_code == 400 and "--allow-env" in refused.json()["error"]
    with web_client(tmp_path, {"OMP_NUM_THREADS"}) as web:
        taken = web.post("/api/jobs", json=dict(JOB, env="OMP_NUM_THREADS=2"), headers=auth)
    assert taken.status_code == 202


def test_serve_refuses_to_allow_a_variable_that_runs_code(cli_run):
    proc = cli_run("serve", "--allow", "true", "--allow-env", "LD_PRELOAD")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(
        "autoprof: error: --allow-env LD_PRELOAD: no job may set it (only these can be allowed: "
    )


@pytest.mark.slow  # a real server process
def test_a_real_server_refuses_ld_preload_in_a_job(tmp_path):
    (tmp_path / "token").write_text(TOKEN + "\n")
    port = free_port()
    argv = [sys.executable, "-m", "autoprof", "serve", "--store", f"sqlite:///{tmp_path}/r.db",
            "--port", str(port), "--allow", "true", "--allow-env", "OMP_NUM_THREADS",
            "--token-file", str(tmp_path / "token"), "--data", str(tmp_path / "data")]  # fmt: skip
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(base + "/api/runs", timeout=2)
                break
            except OSError:
                time.sleep(0.25)
        body = json.dumps(dict(JOB, env="LD_PRELOAD=/tmp/evil.so")).encode()
        request = urllib.request.Request(
            base + "/api/jobs",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", TOKEN_HEADER: TOKEN},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 400
        assert "may not set LD_PRELOAD" in json.loads(refused.value.read())["error"]
        assert not list((tmp_path / "data").glob("*/request.json"))  # no job was made
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_workload_environment_has_none_of_autoprofs_settings():
    env = workload_env(
        {"AUTOPROF_STORE": "postgresql://u:pw@h/db", "autoprof_redis": "r", "HOME": "/h"}
    )
    assert env == {"HOME": "/h", "LC_ALL": "C"}


@pytest.mark.slow  # a real profile
def test_a_profiled_program_never_sees_the_store_password(tmp_path):
    out = tmp_path / "out"
    secret = "postgresql://postgres:s3cret@127.0.0.1/x"
    proc = process(
        "profile", "-e", "task-clock", "-o", str(out), "--", "sh", "-c", "env", timeout=120,
        env={**workload_env(), "AUTOPROF_STORE": secret, "AUTOPROF_REDIS": "redis://x"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [printed] = [p.read_text() for p in out.glob(f"runs/*/{outdir.STDOUT}")]
    assert "HOME=" in printed or "PWD=" in printed  # the workload's env was captured
    assert "AUTOPROF_" not in printed and "s3cret" not in printed
