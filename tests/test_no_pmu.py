"""Issue #22: a machine whose kernel counts no hardware event (a VM without a virtual PMU) says
so in one line, and a profile of hardware events is refused before any run."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from autoprof.analysis import metrics as analysis_metrics
from autoprof.catalog import host, machine
from autoprof.catalog.model import Catalog, Event, Pmu
from autoprof.errors import AutoprofError
from autoprof.testing.cli import invoke

NO_PMU_HERE = pytest.mark.skipif(
    machine.has_core_pmu(), reason="this machine has a hardware PMU: nothing to refuse"
)


def _named_here(spec: str) -> str:
    """What this machine's catalog calls the event perf counts for `spec` (`instructions` is
    INST_RETIRED.ANY where Intel's perfmon data describes the core; as typed where none does):
    the name a refusal gives it."""
    plan = json.loads(invoke("schedule", "--json", "-e", spec).stdout)
    [event] = plan["runs"][0]["events"]
    return event["name"]


def _sysfs(tmp_path, **pmus: list[str]):
    for name, files in pmus.items():
        (tmp_path / name).mkdir(parents=True)
        for f in files:
            (tmp_path / name / f).write_text("0\n")
    return tmp_path


@pytest.mark.parametrize(
    ("pmus", "expected"),
    [
        ({"software": ["type"], "breakpoint": ["type"], "msr": ["type"]}, False),  # this VM
        ({"software": ["type"], "cpu": ["type"]}, True),  # x86
        ({"cpu_core": ["type", "cpus"], "cpu_atom": ["type", "cpus"]}, True),  # hybrid x86
        ({"armv8_pmuv3_0": ["type", "cpus"], "software": ["type"]}, True),  # Arm ACPI server
        ({"uprobe": ["type"], "tracepoint": ["type"]}, False),
    ],
)
def test_a_core_pmu_is_what_sysfs_shows(tmp_path, pmus, expected):
    assert machine.has_core_pmu(_sysfs(tmp_path, **pmus)) is expected


def test_hardware_events_are_those_of_no_host_pmu():
    events = [Event("task-clock", "software"), Event("msr/tsc/", "msr"), Event("r01c2", "cpu")]
    catalog = Catalog("x", {"cpu": Pmu("cpu", generic=4)}, events)
    assert [e.name for e in host.hardware_events(catalog)] == ["r01c2"]


@NO_PMU_HERE
@pytest.mark.parametrize("event", ["instructions", "r01c2"])
def test_a_profile_of_hardware_events_is_refused_in_one_line(cli_run, tmp_path, event):
    run = cli_run("profile", "-e", "task-clock", "-e", event, "-o", tmp_path / "out", "--", "true")
    assert run.returncode == 2
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("autoprof: error: this machine's kernel offers no hardware PMU")
    assert f"{_named_here(event)} cannot be counted" in line and "--cpu" in line
    assert not (tmp_path / "out" / "runs").exists()  # refused before any run


@NO_PMU_HERE
def test_every_event_of_this_machine_says_up_front_that_there_is_no_pmu(cli_run, tmp_path):
    run = cli_run("profile", "--dry-run", "-o", tmp_path / "out", "--", "true")
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[0].startswith("autoprof: note: this machine's kernel offers no")
    assert "task-clock" in run.stdout  # the software events are still profiled


def _catalog_of_a_vm() -> Catalog:
    events = [Event("task-clock", "software"), Event("msr/tsc/", "msr"), Event("r01c2", "cpu")]
    pmus = {"cpu": Pmu("cpu", generic=4), "software": Pmu("software", unconstrained=True)}
    pmus["msr"] = Pmu("msr", unconstrained=True)
    return Catalog("AuthenticAMD-25-11-1", pmus, events)


def test_every_event_of_a_machine_without_pmu_is_what_its_kernel_counts(tmp_path):
    """Issue #29: "every event" of a VM without a PMU plans its software events and msr (the
    hardware ones are left out with the reason, in a note), not a refusal; a machine with a
    core PMU keeps them all."""
    vm = _sysfs(tmp_path / "vm", software=["type"], msr=["type"], breakpoint=["type"])
    counted = host.countable(_catalog_of_a_vm(), vm)
    assert [e.name for e in counted.events] == ["task-clock", "msr/tsc/"]
    assert set(counted.pmus) == {"software", "msr"}
    assert [(x.name, x.reason) for x in counted.excluded] == [
        ("r01c2", "no hardware PMU on this machine")
    ]
    assert "offers no hardware PMU" in counted.note and "1 hardware events left out" in counted.note
    with pytest.raises(AutoprofError, match="r01c2 cannot be counted: measure software events"):
        host.refuse_uncountable(_catalog_of_a_vm(), vm)
    real = _sysfs(tmp_path / "real", software=["type"], cpu=["type"])
    assert host.countable(_catalog_of_a_vm(), real).events == _catalog_of_a_vm().events
    host.refuse_uncountable(_catalog_of_a_vm(), real)


@NO_PMU_HERE
def test_a_profile_of_every_event_counts_the_software_events(cli_run, tmp_path):
    """`autoprof profile -- true` on a VM without a PMU profiles what it can count."""
    out = tmp_path / "out"
    run = cli_run("profile", "-o", out, "--", "true")
    assert run.returncode == 0, run.stderr
    assert run.stderr.startswith("autoprof: note: this machine's kernel offers no hardware PMU")
    assert "hardware events left out" in run.stderr.splitlines()[0]
    assert cli_run("aggregate", out).returncode == 0
    frame = pd.read_csv(out / "results.csv")
    assert {"task-clock", "page-faults", "context-switches"} <= set(frame["EVENT_NAME"])
    assert set(frame["PMU"]) <= set(host.HOST_PMUS)


@NO_PMU_HERE
def test_a_schedule_of_every_event_plans_only_what_counts_here(cli_run):
    run = cli_run("schedule", "--json")
    assert run.returncode == 0, run.stderr
    [note] = run.stderr.strip().splitlines()
    assert note.startswith("autoprof: note: this machine's kernel offers no hardware PMU")
    plan = json.loads(run.stdout)
    pmus = {e["pmu"] for r in plan["runs"] for e in r["events"]}
    assert pmus and pmus <= set(host.HOST_PMUS) and len(plan["runs"]) == 1
    # another machine's plan (--cpu) keeps every hardware event
    other = json.loads(cli_run("schedule", "--json", "--cpu", "SKX").stdout)
    assert len(other["runs"]) > 100


@NO_PMU_HERE
def test_events_list_marks_what_this_machine_cannot_count(cli_run):
    run = cli_run("events", "list", "--json")
    assert run.returncode == 0, run.stderr
    events = json.loads(run.stdout)
    hardware = [e for e in events if e["pmu"] not in host.HOST_PMUS]
    assert hardware and not any(e["countable"] for e in hardware)
    assert all(e["countable"] for e in events if e["pmu"] in host.HOST_PMUS)
    assert "marked 'not countable here'" in run.stderr
    table = cli_run("events", "list", "--pmu", "software").stdout
    assert "task-clock" in table and "not countable here" not in table


@NO_PMU_HERE
def test_a_worker_plans_every_countable_event(tmp_path):
    """The queue worker's and the web's jobs plan through `run.planning`, as the CLI does."""
    from autoprof.run import planning
    from autoprof.run.request import Request

    notes: list[str] = []
    planned = planning.plan(Request(["true"]), notes.append)
    assert {e.pmu for e in planned.catalog.events} <= set(host.HOST_PMUS)
    assert len(notes) == 1 and "hardware events left out" in notes[0]
    with pytest.raises(AutoprofError, match=re.escape(f"{_named_here('instructions')} cannot")):
        request = Request(["true"], ["task-clock", "instructions"])
        planning.check(request, planning.plan(request))


@NO_PMU_HERE
def test_bench_refuses_hardware_events_before_any_run(cli_run, tmp_path):
    marker = tmp_path / "ran"
    run = cli_run("bench", "-n", "2", "-e", "instructions", "--", "touch", marker)
    assert run.returncode == 2
    [line] = run.stderr.strip().splitlines()
    assert f"{_named_here('instructions')} cannot be counted" in line and "--cpu" in line
    assert not marker.exists()


@NO_PMU_HERE
def test_the_web_api_refuses_a_job_of_hardware_events(tmp_path):
    """A job that `profile` would refuse is a 400 at once, not a job queued to fail."""
    from autoprof.web.state import TOKEN_HEADER
    from tests.helpers import TOKEN, web_client

    with web_client(f"sqlite:///{tmp_path / 's.db'}", tmp_path / "data", ["true"]) as web:
        job = {"tool": "profile", "command": "true", "events": ["task-clock", "instructions"]}
        answer = web.post("/api/jobs", json=job, headers={TOKEN_HEADER: TOKEN})
        assert answer.status_code == 400
        assert f"{_named_here('instructions')} cannot be counted" in answer.json()["error"]
        assert web.get("/api/jobs").json() == []
        picker = {e["pmu"] for e in web.get("/api/events").json()}
        assert picker and picker <= set(host.HOST_PMUS)


def test_metrics_of_a_profile_without_hardware_events_say_why_none_is_computed(cli_run, tmp_path):
    """Issue #41: a PMU-less VM's profile gave "0 of 13 metrics computed" and an empty tree;
    the first note now says why, and what such a profile answers."""
    import shutil
    from pathlib import Path

    out = tmp_path / "out"
    shutil.copytree(Path(__file__).parent / "data" / "profile-ed64973", out)  # this VM's
    run = cli_run("analyze", "metrics", out)
    assert run.returncode == 0, run.stderr
    said = run.stdout.splitlines()
    first = next(i for i, line in enumerate(said) if "metrics computed" in line)
    assert said[first - 1].startswith("these results count no hardware event")
    assert "autoprof analyze stats" in said[first - 1]
    frame = pd.read_csv(out / "results.csv")
    assert not analysis_metrics.counted_hardware(frame)
    frame.loc[0, "PMU"] = "cpu"
    assert analysis_metrics.counted_hardware(frame)


@NO_PMU_HERE
def test_metrics_list_here_says_up_front_that_none_can_be_computed(cli_run):
    listed = cli_run("metrics", "list")
    assert listed.returncode == 0
    assert listed.stderr.startswith("autoprof: note: this machine's kernel offers no hardware PMU")
    assert "a profile made here computes none of them" in listed.stderr
    other = cli_run("metrics", "list", "--cpu", "SKX")
    assert "no hardware PMU" not in other.stderr
