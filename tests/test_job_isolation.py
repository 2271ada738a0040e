"""Issue #29, security items 1, 2, 3, 5, 6 and 8: what a job (of the web, of a worker) may do
to the machine and to autoprof itself, and what others see of it. Each test fails on the code
before the issue."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from autoprof.queue import worker
from autoprof.queue.spec import JobSpec, Refused, compile_allow


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
