"""Counters found on the machine (issue #28, point 4): the search over group sizes and the
remembered answer. The probe against a real kernel (6 generic counters of an emulated
Cortex-A76: a group of 6 counts, 7 is refused) runs in test_pmu_lane.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from autoprof.catalog import host, probe
from autoprof.errors import AutoprofError
from autoprof.perf import query

SAMPLES = Path(__file__).parent / "data" / "samples"


def kernel_with(counters: int):
    """A PMU whose kernel counts a group of up to `counters` events, as perf reports it."""
    return lambda size: size <= counters


@pytest.mark.parametrize("counters", [1, 2, 4, 5, 6, 7, 8, 12, 31, 64])
@pytest.mark.parametrize("guess", [1, 4, 6, 8, 64])
def test_the_probe_finds_the_counters_whatever_the_tables_guess(counters, guess):
    found = probe.probe("perf", "armv8_pmuv3", guess, kernel_with(counters))
    assert found.counters == counters and found.event == "armv8_pmuv3/event=0x8/"
    if guess == counters < probe.MAX_COUNTERS:
        assert found.perf_calls == 2  # the table right: the group of k counts, k + 1 does not
    assert found.perf_calls <= 2 + 7


def sample_block(title: str) -> str:
    """One block of the real perf output of the lane's machine (tests/data/samples)."""
    text = (SAMPLES / "armv8-pmuv3-qemu.txt").read_text()
    block = text.split(f"--- {title}\n", 1)[1]
    return block.split("\n---", 1)[0]


def test_perfs_answer_to_a_group_is_read_as_the_kernel_gave_it():
    """Real perf 6.1 output of the emulated Cortex-A76 (6 generic counters): six INST_RETIRED
    in one group count; seven are refused (six <not counted>, one <not supported>)."""
    fits = sample_block("perf stat -x, -e {r08,r08,r08,r08,r08,r08}:u -- loop 3000000 (fit6)")
    over = sample_block("perf stat -x, -e {r08,r08,r08,r08,r08,r08,r08}:u -- loop 3000000 (over7)")
    assert query.group_counted(fits, 6) and not query.group_counted(fits, 7)
    assert not query.group_counted(over, 7) and not query.group_counted(over, 6)
    muxed = sample_block(
        "perf stat -x, -e r08:u -e r08:u -e r08:u -e r08:u -e r08:u -e r08:u -e r08:u -e r08:u "
        "-e r08:u -- loop 3000000 (mux9)"
    )
    assert not query.group_counted(muxed, 9)  # counted part of the time only


def test_a_pmu_that_counts_nothing_probes_zero():
    assert probe.probe("perf", "cpu", 6, kernel_with(0)).counters == 0


def test_only_core_pmus_of_amd_and_arm_are_probed():
    assert probe.probe_event("armv8_pmuv3") == "armv8_pmuv3/event=0x8/"
    assert probe.probe_event("armv8_cortex_a76") == "armv8_cortex_a76/event=0x8/"
    assert probe.probe_event("cpu") == "cpu/event=0xc0/"
    assert probe.probe_event("amd_df") is None and probe.probe_event("software") is None


def test_the_answer_is_remembered_for_this_machine_and_boot(tmp_path):
    path = tmp_path / "cache" / probe.FILE
    found = probe.probe("perf", "armv8_pmuv3", 6, kernel_with(6))
    probe.remember(found, path)
    assert probe.remembered("armv8_pmuv3", path) == found
    assert probe.remembered("armv8_cortex_a76", path) is None  # another PMU: probed apart
    entry = json.loads(path.read_text())
    assert list(entry.values()) == [
        {"pmu": "armv8_pmuv3", "counters": 6, "event": found.event, "perf_calls": 2,
         "when": found.when}
    ]  # fmt: skip
    other = {k[::-1]: v for k, v in entry.items()}  # another machine's key: not this one's
    path.write_text(json.dumps(other))
    assert probe.remembered("armv8_pmuv3", path) is None


def test_a_counters_file_others_may_write_is_not_believed(tmp_path):
    path = tmp_path / probe.FILE
    probe.remember(probe.probe("perf", "armv8_pmuv3", 6, kernel_with(6)), path)
    os.chmod(path, 0o666)
    assert probe.remembered("armv8_pmuv3", path) is None
    os.chmod(path, 0o644)
    entries = json.loads(path.read_text())
    for entry in entries.values():
        entry["counters"] = 1000  # no PMU has that many: a forged file
    path.write_text(json.dumps(entries))
    assert probe.remembered("armv8_pmuv3", path) is None


def test_the_answer_reads_back_whatever_the_umask(tmp_path):
    """A umask that lets the group write (0o002, usual where each user has their own group)
    still writes a file `remembered` believes: never writable by others."""
    path = tmp_path / probe.FILE
    found = probe.probe("perf", "armv8_pmuv3", 6, kernel_with(6))
    old = os.umask(0o002)
    try:
        probe.remember(found, path)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    assert probe.remembered("armv8_pmuv3", path) == found
    assert [p.name for p in tmp_path.iterdir()] == [probe.FILE]  # no temp file left


def test_the_file_is_found_from_the_password_database_not_the_environment(monkeypatch):
    monkeypatch.setenv("HOME", "/nonexistent-home")
    monkeypatch.setenv("XDG_CACHE_HOME", "/nonexistent-cache")
    path = probe.cache_file()
    assert path is not None and "nonexistent" not in str(path)
    assert path.name == probe.FILE


def test_the_probe_decides_this_machines_counters_and_names_both_numbers():
    """The model table's number where the probe agrees; the probe's, with a note naming both,
    where it does not; --counters at or below the probe kept, above it refused (both named)."""
    tables = {"armv8_pmuv3": 6, "cpu": 6}
    assert host.counter_decision(tables, {"armv8_pmuv3": 6}, {}) == ({}, [])
    changed, notes = host.counter_decision(tables, {"armv8_pmuv3": 4}, {})
    assert changed == {"armv8_pmuv3": 4}
    assert notes == [
        "armv8_pmuv3: the model table's 6 generic counters are refused: this machine counts 4 "
        "at once (probed); planning with 4"
    ]
    assert host.counter_decision(tables, {"armv8_pmuv3": 6}, {"armv8_pmuv3": 5}) == ({}, [])
    with pytest.raises(AutoprofError) as refused:
        host.counter_decision(tables, {"armv8_pmuv3": 6}, {"armv8_pmuv3": 7})
    assert str(refused.value).startswith(
        "--counters armv8_pmuv3=7 is more than the 6 generic counters this machine's "
        "armv8_pmuv3 has"
    )
