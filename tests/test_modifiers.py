"""User-only and kernel-only counting as perf spells it (issue #28, point 3): `-e NAME:u` / `:k`
on catalog events, perf's generic, raw and `pmu/terms/` events, and `profile --user`; the mode
stays part of the event's name from the plan to results.csv. Counting itself is proven on a
real PMU in test_pmu_lane.py; here, what this machine's perf counts (software events)."""

from __future__ import annotations

import json

import pytest

from autoprof.catalog import host, modifiers
from autoprof.catalog.model import Event
from autoprof.errors import AutoprofError
from autoprof.results import csvfile
from autoprof.run import outdir
from autoprof.testing.cli import invoke, process


@pytest.mark.parametrize(
    ("typed", "split"),
    [
        ("INST_RETIRED:u", ("INST_RETIRED", "u")),
        ("cycles:k", ("cycles", "k")),
        ("cpu/event=0x3c/u", ("cpu/event=0x3c/", "u")),
        ("armv8_pmuv3_0/event=0x8,name=X/k", ("armv8_pmuv3_0/event=0x8,name=X/", "k")),
        ("mem:0x1000:w:u", ("mem:0x1000:w", "u")),
        ("syscalls:sys_enter_write", ("syscalls:sys_enter_write", "")),
        ("mem:0x1000:w", ("mem:0x1000:w", "")),
        ("cycles:p", ("cycles:p", "")),  # perf's other modifiers are not autoprof's
        ("cpu/event=0x3c/", ("cpu/event=0x3c/", "")),
    ],
)
def test_a_modifier_is_read_as_perf_spells_it(typed, split):
    assert modifiers.split(typed) == split


def test_catalog_events_keep_their_mode_in_name_and_string():
    catalog = host.build_catalog(cpu="SKX")
    chosen = host.resolve_events(catalog, ["INST_RETIRED.ANY:u", "INST_RETIRED.ANY", "cycles:k"])
    by_name = {e.name: e for e in chosen.events}
    user = by_name["INST_RETIRED.ANY:u"]
    assert user.spec.endswith(",name='INST_RETIRED.ANY:u'/u") and user.label == user.name
    assert user.fixed == by_name["INST_RETIRED.ANY"].fixed  # same counters, another event
    assert by_name["CPU_CLK_UNHALTED.THREAD:k"].spec.endswith("/k")  # cycles on an Intel core


def test_perfs_generic_names_on_an_arm_core_are_its_architected_events():
    """`instructions` on an Arm PMUv3 core is INST_RETIRED (0x08), as the kernel counts it
    (armv8_pmuv3_perf_map), also with a modifier: one event, one counter, one name."""
    catalog = host.build_catalog(cpu="neoverse-n1")
    chosen = host.resolve_events(catalog, ["instructions:u", "INST_RETIRED:u", "r08:u", "cycles"])
    assert [(e.name, e.pmu) for e in chosen.events] == [
        ("INST_RETIRED:u", "armv8_pmuv3_0"),
        ("CPU_CYCLES", "armv8_pmuv3_0"),
    ]


def test_unencoded_events_take_the_modifier_perf_takes():
    def spec(text: str) -> str:
        return modifiers.with_modifier(Event(text, "software", text), "u").spec

    assert spec("page-faults") == "page-faults:u"
    assert spec("mem:0x1000:w") == "mem:0x1000:w:u"
    assert spec("msr/tsc/") == "msr/tsc/u"
    assert spec("msr/tsc,name=TSC.TICKS/") == "msr/tsc,name='TSC.TICKS:u'/u"
    assert modifiers.with_modifier(Event("msr/tsc/", "msr", "msr/tsc/"), "k").name == "msr/tsc/k"


def test_modifiers_that_cannot_mean_anything_are_refused():
    tracepoint = Event("sched:sched_switch", "tracepoint", "sched:sched_switch")
    with pytest.raises(AutoprofError, match="fires in the kernel"):
        modifiers.with_modifier(tracepoint, "u")
    user = Event("page-faults:u", "software", "page-faults:u")
    assert modifiers.with_modifier(user, "u") is user
    with pytest.raises(AutoprofError, match="user mode only already"):
        modifiers.with_modifier(Event("x", "software", "page-faults:u"), "k")


@pytest.mark.needs_perf
def test_profile_user_names_every_event_in_user_mode(tmp_path):
    """--user, with an anchor: every event counted as NAME:u, in the plan, the manifest (which
    records --user: a resumed profile keeps it) and results.csv."""
    out = tmp_path / "out"
    args = ["--user", "-e", "page-faults", "-e", "task-clock", "--anchor", "task-clock"]
    proc = process("profile", *args, "-o", str(out), "--", "true")
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / outdir.MANIFEST).read_text())
    assert manifest["options"]["user"] is True
    planned = [e["name"] for run in manifest["plan"]["runs"] for e in run["events"]]
    assert sorted(planned) == ["page-faults:u", "task-clock:u"]
    agg = invoke("aggregate", str(out))
    assert agg.returncode == 0, agg.stderr
    frame = csvfile.read_csv(out / outdir.RESULTS)
    assert set(frame["EVENT_NAME"]) == {"page-faults:u", "task-clock:u"}
    report = json.loads((out / outdir.REPORT).read_text())
    assert report["events"]["modifiers"] == []  # perf printed the names autoprof gave


def test_user_is_refused_with_metrics(tmp_path):
    proc = process(
        "profile", "--user", "--metrics", "IPC", "--cpu", "SKX", "--dry-run", "--", "true"
    )
    assert proc.returncode == 2 and "--user" in proc.stderr and "Traceback" not in proc.stderr
