"""Preflight rules over given values, and reading them from a /proc tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoprof.catalog import machine
from autoprof.errors import AutoprofError
from autoprof.run.preflight import (
    FATAL,
    WARNING,
    System,
    evaluate,
    fail_on_fatal,
    read_system,
)

ROOT_CAPS = (1 << 41) - 1
USER_CAPS = 0


def system(**values) -> System:
    base = dict(
        perf="/usr/bin/perf", paranoid=2, kptr_restrict=0, nmi_watchdog=0, capabilities=USER_CAPS
    )
    return System(**{**base, **values})


def keyed(findings):
    return {f.key: f for f in findings}


def test_user_system_wide_at_paranoid_2_is_fatal_with_the_fix():
    found = keyed(evaluate(system(), system_wide=True, kernel=True))
    assert found["paranoid"].severity == FATAL
    assert found["paranoid"].fix == "sudo sysctl -w kernel.perf_event_paranoid=0"
    with pytest.raises(AutoprofError, match=r"perf_event_paranoid=0"):
        fail_on_fatal(list(found.values()))


def test_user_per_process_with_kernel_at_paranoid_2_is_a_warning():
    found = keyed(evaluate(system(), system_wide=False, kernel=True))
    assert found["paranoid"].severity == WARNING
    assert found["paranoid"].fix == "sudo sysctl -w kernel.perf_event_paranoid=1"
    assert "paranoid" not in keyed(evaluate(system(), system_wide=False, kernel=False))


def test_debian_level_3_forbids_users_everything():
    found = keyed(evaluate(system(paranoid=3), system_wide=False, kernel=False))
    assert found["paranoid"].severity == FATAL
    assert found["paranoid"].fix == "sudo sysctl -w kernel.perf_event_paranoid=2"


def test_root_is_not_bound_by_paranoid_but_by_kptr_restrict_2():
    root = system(capabilities=ROOT_CAPS, paranoid=3, kptr_restrict=1)
    assert evaluate(root, system_wide=True, kernel=True) == []
    found = keyed(
        evaluate(system(capabilities=ROOT_CAPS, kptr_restrict=2), system_wide=True, kernel=True)
    )
    assert found["kptr-restrict"].severity == WARNING
    assert found["kptr-restrict"].fix == "sudo sysctl -w kernel.kptr_restrict=0"
    assert "kptr-restrict" not in keyed(
        evaluate(system(kptr_restrict=2), system_wide=True, kernel=False)
    )


def test_nmi_watchdog_matters_only_when_counters_are_used():
    on = system(nmi_watchdog=1, capabilities=ROOT_CAPS)
    assert keyed(evaluate(on, system_wide=False, kernel=False))["nmi-watchdog"].fix == (
        "sudo sysctl -w kernel.nmi_watchdog=0"
    )
    assert evaluate(on, system_wide=False, kernel=False, counters=False) == []


def test_missing_perf_is_fatal():
    found = keyed(
        evaluate(system(perf=None, capabilities=ROOT_CAPS), system_wide=False, kernel=False)
    )
    assert found["perf-missing"].severity == FATAL
    assert "linux-perf" in found["perf-missing"].fix


def test_read_system_from_a_proc_tree(tmp_path: Path):
    kernel = tmp_path / "sys" / "kernel"
    kernel.mkdir(parents=True)
    (kernel / "perf_event_paranoid").write_text("3\n")
    (kernel / "kptr_restrict").write_text("1\n")
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "status").write_text("Name:\tx\nCapEff:\t0000004000000000\n")
    read = read_system(tmp_path)
    assert (read.paranoid, read.kptr_restrict, read.nmi_watchdog) == (3, 1, None)
    assert read.has_cap(38) and not read.has_cap(21)


def test_read_system_on_this_machine():
    read = read_system()
    text = Path("/proc/sys/kernel/perf_event_paranoid").read_text()
    assert read.paranoid == int(text)


def test_a_user_namespace_root_is_an_ordinary_user_to_perf():
    """Capabilities count in the initial user namespace only (the kernel's perfmon_capable)."""
    rootless = system(capabilities=ROOT_CAPS, user_namespace=True)
    found = keyed(evaluate(rootless, system_wide=False, kernel=False))
    assert found["user-namespace"].severity == WARNING
    assert "user space only" in found["user-namespace"].message
    assert found["user-namespace"].fix == "sudo sysctl -w kernel.perf_event_paranoid=1 on the host"
    wide = keyed(evaluate(rootless, system_wide=True, kernel=False))
    assert wide["paranoid"].severity == FATAL and "user namespace" in wide["paranoid"].message
    assert "user-namespace" not in wide  # one line: the fatal one
    assert evaluate(system(capabilities=ROOT_CAPS), system_wide=True, kernel=False) == []
    assert evaluate(system(user_namespace=True, paranoid=1), system_wide=False, kernel=True) == []


def test_read_system_sees_a_user_namespace_in_uid_map(tmp_path: Path):
    (tmp_path / "self").mkdir()
    uid_map = tmp_path / "self" / "uid_map"
    uid_map.write_text("         0          0 4294967295\n")
    assert not read_system(tmp_path).user_namespace
    uid_map.write_text("         0       1000          1\n")
    assert read_system(tmp_path).user_namespace


def test_cpu_lists_are_parsed_and_checked_against_the_online_cpus(tmp_path: Path):
    assert machine.cpu_list("0-3,5") == {0, 1, 2, 3, 5}
    for wrong in ("0-x", "", "1,,2", "3-1", "0-3 junk"):  # one strict parser: never a guess
        with pytest.raises(AutoprofError, match=r"^CPU list "):
            machine.cpu_list(wrong)
    two = system(online_cpus=frozenset({0, 1}), capabilities=ROOT_CAPS)
    found = keyed(evaluate(two, system_wide=True, kernel=False, cpu_list="5-9"))
    assert found["cpu-list"].severity == FATAL
    assert found["cpu-list"].message == (
        "--cpu-list 5-9: CPU 5-9 not online; this machine has CPUs 0-1"
    )
    assert evaluate(two, system_wide=True, kernel=False, cpu_list="1") == []
    online = tmp_path / "devices" / "system" / "cpu" / "online"
    online.parent.mkdir(parents=True)
    online.write_text("0-3,6\n")
    assert read_system(tmp_path, tmp_path).online_cpus == {0, 1, 2, 3, 6}
    # the topology reads the same list (a memory-only NUMA node's empty one is no CPU)
    for node, cpus in (("node0", "0-3\n"), ("node1", "6\n"), ("node2", "\n")):
        (tmp_path / "devices" / "system" / "node" / node).mkdir(parents=True)
        (tmp_path / "devices" / "system" / "node" / node / "cpulist").write_text(cpus)
    found = machine.topology(tmp_path / "devices" / "system")
    assert [(c["cpu"], c["node"]) for c in found] == [(0, 0), (1, 0), (2, 0), (3, 0), (6, 1)]
    online.write_text("0-3,junk\n")  # a list that is none is unreadable, not half read
    assert read_system(tmp_path, tmp_path).online_cpus is None
