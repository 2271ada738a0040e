"""`bench`'s package energy (`benchmark.energy`): read from the power PMU in sysfs, counted
system-wide around each repetition by perf, reported in Joules with the same statistics; one
note where the machine has no such counter.

This VM has no RAPL. The machine's sysfs is input, not the thing under test: a tree of the real
PMUs plus a `power` PMU is bind-mounted over /sys/bus/event_source/devices (`unshare -m`, as
`testing.perf_attrs` does), and perf itself reads it. Its energy-pkg is the software PMU's
cpu-clock (type 1, config 0: nanoseconds) with the scale 1e-9 and the unit Joules, so perf
counts a real counter system-wide and applies sysfs's scale and unit: one "Joule" per second
of CPU 0's clock while the repetition runs.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from autoprof.benchmark import energy
from autoprof.testing import perf_attrs
from autoprof.testing.cli import invoke


def power_tree(root: Path, unit: str = "Joules", events: bool = True) -> Path:
    """/sys/bus/event_source/devices as this machine has it, with this power PMU in place of
    the machine's own (a VM may have one with energy-psys only)."""
    devices = root / "devices"
    devices.mkdir()
    for entry in Path(perf_attrs.DEVICES).iterdir():
        if entry.name != "power":
            os.symlink(os.path.realpath(entry), devices / entry.name)
    power = devices / "power"
    (power / "format").mkdir(parents=True)
    (power / "type").write_text("1\n")  # PERF_TYPE_SOFTWARE
    (power / "cpumask").write_text("0\n")  # one CPU per package, as rapl.c's
    (power / "format" / "event").write_text("config:0-63\n")
    if events:
        (power / "events").mkdir()
        (power / "events" / "energy-pkg").write_text("event=0x00\n")  # cpu-clock
        (power / "events" / "energy-pkg.scale").write_text("1e-09\n")
        (power / "events" / "energy-pkg.unit").write_text(f"{unit}\n")
    return devices


def test_the_energy_event_is_read_from_sysfs(tmp_path):
    found = energy.find(power_tree(tmp_path))
    assert found == energy.EnergyEvent("event=0x00", 1e-9, "Joules")
    (tmp_path / "none").mkdir()
    assert energy.find(tmp_path / "none") == (
        "energy not measured: this machine has no RAPL package counter (power/energy-pkg/)"
    )
    (tmp_path / "watts").mkdir()
    said = energy.find(power_tree(tmp_path / "watts", unit="Watts"))
    assert said == "energy not measured: power/energy-pkg/ counts in 'Watts', not Joules"
    (tmp_path / "bare").mkdir()
    assert "no RAPL package counter" in str(
        energy.find(power_tree(tmp_path / "bare", events=False))
    )


def test_a_machine_without_rapl_says_so_in_one_note(tmp_path):
    if Path(perf_attrs.DEVICES, "power", "events", "energy-pkg").exists():
        pytest.skip("this machine has RAPL")
    out = tmp_path / "bench.json"
    proc = invoke("bench", "-n", "2", "--warmup", "0", "--export-json", out, "--", "true")
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in (proc.stdout + proc.stderr).splitlines() if "energy" in line]
    assert notes == [
        "note: energy not measured: this machine has no RAPL package counter (power/energy-pkg/)"
    ]
    data = json.loads(out.read_text())
    assert data["energy_note"].startswith("energy not measured")
    assert all(r["energy_j"] is None for r in data["commands"][0]["repetitions"])


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (unshare -m, perf -a)")
def test_energy_is_counted_around_each_repetition_where_sysfs_has_it(tmp_path):
    why = perf_attrs.unavailable()
    if why:
        pytest.skip(why)
    devices = power_tree(tmp_path)
    out = tmp_path / "bench.json"
    argv = [sys.executable, "-m", "autoprof", "bench", "-n", "3", "--warmup", "0",
            "--export-json", str(out), "--", "sleep", "0.2"]  # fmt: skip
    script = (
        f"mount --bind {shlex.quote(str(devices))} {perf_attrs.DEVICES} && exec {shlex.join(argv)}"
    )
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "energy not measured" not in proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert data["energy_note"] is None and data["units"]["energy_j"] == "J"
    for rep in data["commands"][0]["repetitions"]:
        # CPU 0's clock in "Joules" over the repetition: at least the 0.2 s the command slept
        # (its perf's start and exit more), within its repetition's own wall time and start
        assert 0.2 <= rep["energy_j"] <= rep["wall_s"] + data["startup_s"] + 2.0, rep
    summary = {s["metric"]: s for s in data["commands"][0]["summary"]}
    assert summary["energy_j"]["mean"] >= 0.2
    assert "energy_j" in proc.stdout
