"""Issue #22: a machine whose kernel counts no hardware event (a VM without a virtual PMU) says
so in one line, and a profile of hardware events is refused before any run."""

from __future__ import annotations

import pytest

from autoprof.catalog import host
from autoprof.catalog.model import Catalog, Event, Pmu

NO_PMU_HERE = pytest.mark.skipif(
    host.has_core_pmu(), reason="this machine has a hardware PMU: nothing to refuse"
)


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
    assert host.has_core_pmu(_sysfs(tmp_path, **pmus)) is expected


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
    assert f"{event} cannot be counted" in line and "--cpu" in line
    assert not (tmp_path / "out" / "runs").exists()  # refused before any run


@NO_PMU_HERE
def test_every_event_of_this_machine_says_up_front_that_there_is_no_pmu(cli_run, tmp_path):
    run = cli_run("profile", "--dry-run", "-o", tmp_path / "out", "--", "true")
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[0].startswith("autoprof: note: this machine's kernel offers no")
    assert "task-clock" in run.stdout  # the software events are still profiled
