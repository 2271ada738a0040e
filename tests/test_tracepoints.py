"""Issue #29: tracepoints on a fresh VM, where nothing mounted tracefs yet. perf mounts it
itself when it may (root), so autoprof asks perf for the list when tracefs shows none, and
an unknown `sys:event` (or an empty search) says what to do instead of an empty answer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from autoprof.catalog import host
from autoprof.errors import AutoprofError


def _perf_lists_tracepoints() -> list[str]:
    perf = shutil.which("perf")
    if perf is None:
        return []
    argv = [perf, "list", "--raw-dump", "tracepoint"]
    return sorted(subprocess.run(argv, capture_output=True, text=True).stdout.split())


def test_without_tracefs_the_tracepoints_are_perfs(tmp_path, monkeypatch):
    listed = _perf_lists_tracepoints()
    if not listed:
        pytest.skip("perf lists no tracepoints here (not root, or no tracefs)")
    monkeypatch.setattr(host, "TRACEFS", tmp_path / "tracing" / "events")  # nothing mounted
    assert host.tracepoints() == listed
    assert host.tracepoint_hint() == ""


@pytest.mark.parametrize(
    ("made", "says"),
    [
        ([], "this kernel has no tracefs"),
        (["tracing"], "tracefs is not mounted at"),
    ],
)
def test_no_tracepoints_says_why(tmp_path, monkeypatch, made, says):
    for folder in made:
        (tmp_path / folder).mkdir()
    monkeypatch.setattr(host, "TRACEFS", tmp_path / "tracing" / "events")
    monkeypatch.setattr(host.perf_query, "tracepoints", list)  # perf cannot list them either
    assert says in host.tracepoint_hint()
    catalog = host.host_catalog(with_tracepoints=True)
    assert catalog.note == f"--tracepoints: {host.tracepoint_hint()}"
    with pytest.raises(AutoprofError, match=f"unknown event 'sched:sched_switch': .*{says}"):
        host.resolve_events(catalog, ["sched:sched_switch"])


def test_a_misspelt_tracepoint_names_the_close_ones(cli_run):
    if "syscalls:sys_enter_write" not in host.tracepoints():
        pytest.skip("this machine has no syscalls:sys_enter_write tracepoint")
    run = cli_run("schedule", "-e", "syscalls:sys_enter_wrte")
    assert run.returncode == 2
    assert "did you mean syscalls:sys_enter_write" in run.stderr


def test_an_empty_search_points_at_the_tracepoints(cli_run):
    if "sched:sched_switch" not in host.tracepoints():
        pytest.skip("this machine has no sched:sched_switch tracepoint")
    run = cli_run("events", "search", "sched_switch")
    assert run.returncode == 0 and "sched:sched_switch" not in run.stdout
    assert "1 tracepoint does (sched:sched_switch)" in run.stderr
    assert "autoprof events search sched_switch --tracepoints" in run.stderr
    found = cli_run("events", "search", "sched_switch", "--tracepoints")
    assert "sched:sched_switch" in found.stdout


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root")
def test_the_readmes_tracepoint_example_works_before_tracefs_is_mounted(tmp_path):
    """In a mount namespace of its own without tracefs (a VM just booted), the quick start's
    `-e syscalls:sys_enter_write` is planned, as perf would count it."""
    if "syscalls:sys_enter_write" not in _perf_lists_tracepoints():
        pytest.skip("perf lists no syscalls:sys_enter_write here")
    script = (
        "umount /sys/kernel/tracing 2>/dev/null; umount /sys/kernel/debug/tracing 2>/dev/null; "
        'ls /sys/kernel/tracing/events >/dev/null 2>&1 && echo MOUNTED; exec "$@"'
    )
    argv = [sys.executable, "-m", "autoprof", "schedule", "--json"]
    argv += ["-e", "task-clock", "-e", "syscalls:sys_enter_write"]
    proc = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", *argv],
        capture_output=True,
        text=True,
    )
    if "MOUNTED" in proc.stdout or "unshare:" in proc.stderr:
        pytest.skip(f"cannot hide tracefs here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    assert '"syscalls:sys_enter_write"' in proc.stdout


def test_a_search_says_how_many_in_words_and_never_prints_an_empty_table(cli_run):
    """Issue #41: "1 events", and an empty table printed before the note that nothing matched."""
    one = cli_run("events", "search", "^INST_RETIRED.ANY$", "--cpu", "SKX")
    assert one.returncode == 0 and "1 event of" in one.stdout and "1 events" not in one.stdout
    none = cli_run("events", "search", "no_such_event_anywhere", "--cpu", "SKX")
    assert none.returncode == 0 and none.stdout == ""
    assert none.stderr == "autoprof: note: no event of SKX matches 'no_such_event_anywhere'\n"
    here = cli_run("events", "search", "no_such_event_anywhere")
    assert here.returncode == 0 and here.stdout == ""
    assert here.stderr.startswith("autoprof: note: no event matches 'no_such_event_anywhere'")
