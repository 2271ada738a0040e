"""Events as perf users type them (issue #17 item 13), `events list --json`, the plan's perf
strings, and one-line errors for malformed catalogs (item 10), through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoprof.catalog import host, intel, perfnames
from autoprof.perf import labels as perf_labels
from autoprof.schedule import schedule
from autoprof.testing.cli import invoke
from tests.helpers import skl_catalog_copy


@pytest.fixture
def spr(intel_dir):
    return host.host_catalog(intel_dir, "SPR")


@pytest.mark.parametrize(
    ("typed", "event"),
    [
        ("cycles", "CPU_CLK_UNHALTED.THREAD"),
        ("instructions", "INST_RETIRED.ANY"),
        ("cache-misses", "LONGEST_LAT_CACHE.MISS"),
        ("branch-misses", "BR_MISP_RETIRED.ALL_BRANCHES"),
        ("ref-cycles", "CPU_CLK_UNHALTED.REF_TSC"),
        ("r01c2", "UOPS_RETIRED.HEAVY"),
        ("cpu/event=0x3c,umask=0x0/", "CPU_CLK_UNHALTED.THREAD"),
        ("cpu/event=0xc5,umask=0x0/", "BR_MISP_RETIRED.ALL_BRANCHES"),
        ("topdown-retiring", "PERF_METRICS.RETIRING"),
        ("cpu/topdown-be-bound/", "PERF_METRICS.BACKEND_BOUND"),
    ],
)
def test_perf_names_map_to_the_catalog_event_with_the_same_encoding(spr, typed, event):
    chosen = host.resolve_events(spr, [typed])
    assert event in [e.name for e in chosen.events]


def test_unmatched_perf_names_get_generic_counters(spr):
    chosen = host.resolve_events(spr, ["r99ff", "L1-dcache-load-misses", "cpu/event=0xfe/"])
    assert [e.spec for e in chosen.events] == ["r99ff", "L1-dcache-load-misses", "cpu/event=0xfe/"]
    assert all(e.counters == frozenset(range(8)) and e.pmu == "cpu" for e in chosen.events)
    plan = schedule(chosen)
    assert len(plan) == plan.lower_bound == 1


def test_sysfs_alias_is_read_from_the_pmu_folder(tmp_path, intel_dir):
    """A ``pmu/alias/`` is looked up in sysfs (here a folder laid out like
    /sys/bus/event_source/devices) and matched by its terms."""
    (tmp_path / "cpu" / "events").mkdir(parents=True)
    (tmp_path / "cpu" / "events" / "llc-misses").write_text("event=0x2e,umask=0x41\n")
    (tmp_path / "cpu" / "events" / "odd").write_text("event=0x03,umask=0x82\n")
    skx = intel.load(intel_dir, "SKX")
    found = perfnames.resolve(skx, "cpu/llc-misses/", tmp_path)
    assert [e.name for e in found.events] == ["LONGEST_LAT_CACHE.MISS"]
    own = perfnames.resolve(skx, "cpu/odd/", tmp_path).events
    assert [(e.spec, e.counters) for e in own] == [("cpu/odd/", frozenset(range(4)))]
    assert perfnames.resolve(skx, "cpu/no-such-alias/", tmp_path) is None
    (tmp_path / "power" / "events").mkdir(parents=True)
    (tmp_path / "power" / "events" / "energy-pkg").write_text("event=0x02\n")
    power = perfnames.resolve(skx, "power/energy-pkg/", tmp_path)
    assert [(e.spec, e.counters) for e in power.events] == [("power/energy-pkg/", frozenset())]
    assert power.pmus["power"].unconstrained


PERF_NAMES = [("cycles", 0x3C), ("instructions", 0xC0), ("r01c2", 0xC2)]
PERF_NAMES += [("cpu/event=0x3c,umask=0x0/", 0x3C)]  # (as typed, its event code)


def test_generic_events_plan_on_this_machine():
    """perf's names plan on this machine beside software events, in one run: each as the
    catalog event of the same encoding where this machine's perfmon data has one (on an Intel
    VM `cycles` is CPU_CLK_UNHALTED.THREAD, given to perf by its encoding and name), else
    given to perf as typed, on the core PMU's assumed generic counters (an AMD VM without
    perfmon data for its CPU)."""
    typed = [a for spec, _ in PERF_NAMES for a in ("-e", spec)]
    proc = invoke("schedule", "--json", *typed, "-e", "task-clock")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    events = [e for run in plan["runs"] for e in run["events"]]
    specs = {e["name"]: e["spec"] for e in events}
    for spec, code in PERF_NAMES:
        [alone] = json.loads(invoke("schedule", "--json", "-e", spec).stdout)["runs"][0]["events"]
        assert specs[alone["name"]] == alone["spec"]  # the same event beside the others
        if alone["name"] == spec:
            assert alone["spec"] == spec
        else:  # the catalog's event of that code, named for perf to print
            assert f"event={code:#x}" in alone["spec"] and "name=" in alone["spec"], alone
    assert specs["task-clock"] == "task-clock"
    assert len(plan["runs"]) == plan["lower_bound"] == 1
    assert plan["runs"][0]["perf_events"] == [e["spec"] for e in plan["runs"][0]["events"]]


def test_events_list_json(intel_dir):
    proc = invoke("events", "list", "--json", "--cpu", "SKX", "--events-dir", str(intel_dir))
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    catalog = host.host_catalog(intel_dir, "SKX")
    assert [e["name"] for e in listed] == [e.name for e in catalog.events]
    by_name = {e["name"]: e for e in listed}
    assert by_name["INST_RETIRED.ANY"]["spec"] == "cpu/event=0xc0,name=INST_RETIRED.ANY/"
    assert by_name["INST_RETIRED.ANY"]["fixed"] == 0
    offcore = by_name["OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE"]
    assert offcore["registers"] == ["0x1a6", "0x1a7"] and offcore["counters"] == [0, 1, 2, 3]
    keys = {"name", "pmu", "spec", "counters", "fixed", "taken_alone", "registers", "description"}
    assert all(keys <= set(e) for e in listed)


def test_schedule_json_runs_with_perf_alone(intel_dir):
    """Every planned event carries the exact string perf gets; a topdown group is led by slots."""
    proc = invoke("schedule", "--json", "--cpu", "SPR", "--events-dir", str(intel_dir))
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    catalog = {e.name: e.spec for e in host.host_catalog(intel_dir, "SPR").events}
    events = [e for run in plan["runs"] for e in run["events"]]
    assert all(e["spec"] == catalog[e["name"]] for e in events)
    grouped = [arg for run in plan["runs"] for arg in run["perf_events"] if arg.startswith("{")]
    assert grouped == ["{" + ",".join(catalog[n] for n in _topdown_order(catalog)) + "}"]


def _topdown_order(catalog: dict[str, str]) -> list[str]:
    return ["TOPDOWN.SLOTS"] + [n for n in catalog if n.startswith("PERF_METRICS.")]


@pytest.mark.parametrize("command", [["schedule"], ["events", "show", "INST_RETIRED.ANY_P"]])
def test_malformed_catalog_is_one_line_in_the_cli(tmp_path, intel_dir, command):
    def mutate(events):
        next(e for e in events if e.get("EventName") == "INST_RETIRED.ANY_P")["EventCode"] = "zz"

    directory = skl_catalog_copy(tmp_path, intel_dir, mutate)
    proc = invoke(*command, "--cpu", "SKL", "--events-dir", str(directory))
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "INST_RETIRED.ANY_P" in lines[0] and "skylake_core.json" in lines[0]
    assert "EventCode 'zz'" in lines[0]


def test_malformed_event_name_is_one_line_in_the_cli(tmp_path, intel_dir):
    def mutate(events):
        events[3]["EventName"] = 12

    directory = skl_catalog_copy(tmp_path, intel_dir, mutate)
    proc = invoke("schedule", "--cpu", "SKL", "--events-dir", str(directory))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    path = Path(directory) / "SKL/events/skylake_core.json"
    assert proc.stderr.strip() == (
        f"autoprof: error: malformed event 12 in {path}: EventName 12 is not a string"
    )


@pytest.mark.parametrize("platform", ["ADL", "ARL"])
def test_hybrid_parts_count_perf_names_on_every_core_type(intel_dir, platform, tmp_path):
    """perf 6.1 opens a generic, cache or raw event on every hybrid core PMU
    (parse-events-hybrid.c), so `cycles` is one event per core type, each under a name perf
    prints apart from the others."""
    catalog = intel.load(intel_dir, platform)
    cores = perfnames.core_pmus(catalog)
    assert len(cores) == {"ADL": 2, "ARL": 3}[platform]
    cycles = perfnames.resolve(catalog, "cycles", tmp_path).events
    assert [e.pmu for e in cycles] == cores
    assert {e.name for e in cycles} == {"CPU_CLK_UNHALTED.THREAD", "CPU_CLK_UNHALTED.CORE"}
    assert all(e.fixed is not None and e.label == f"{e.pmu}.{e.name}" for e in cycles)
    misses = perfnames.resolve(catalog, "L1-dcache-load-misses", tmp_path).events
    assert [e.spec for e in misses] == [f"{p}/L1-dcache-load-misses/" for p in cores]
    raw = perfnames.resolve(catalog, "r01c2", tmp_path).events
    assert [(e.pmu, e.code, e.umask) for e in raw] == [(p, 0xC2, 0x01) for p in cores]
    plan = schedule(host.resolve_events(catalog, ["cycles", "instructions", "r01c2"]))
    assert len(plan) == plan.lower_bound == 1


def test_hybrid_names_follow_the_core_types_this_machine_has(intel_dir, tmp_path):
    """An ARL-S has no cpu_lowpower: sysfs decides which core types a perf name reaches, and a
    bare alias reaches every core type whose sysfs lists it (here ADL's, from the kernel's
    adl_hybrid_events_attrs: the atom's topdown-retiring is event 0xc2)."""
    for pmu, alias in (("cpu_core", "event=0x00,umask=0x80"), ("cpu_atom", "event=0xc2,umask=0x0")):
        (tmp_path / pmu / "events").mkdir(parents=True)
        (tmp_path / pmu / "events" / "topdown-retiring").write_text(alias + "\n")
    arl = intel.load(intel_dir, "ARL")
    assert [e.pmu for e in perfnames.resolve(arl, "cycles", tmp_path).events] == [
        "cpu_core",
        "cpu_atom",
    ]
    planned_elsewhere = perfnames.resolve(arl, "cycles", None).events  # --cpu ARL: no sysfs
    assert [e.pmu for e in planned_elsewhere] == ["cpu_core", "cpu_atom", "cpu_lowpower"]
    adl = intel.load(intel_dir, "ADL")
    retiring = perfnames.resolve(adl, "topdown-retiring", tmp_path).events
    assert [(e.pmu, e.code, e.umask) for e in retiring] == [
        ("cpu_core", 0x00, 0x04),  # TOPDOWN.SLOTS leads the perf metrics
        ("cpu_core", 0x00, 0x80),
        ("cpu_atom", 0xC2, 0x00),
    ]


@pytest.mark.parametrize("platform", ["ADL", "ARL", "MTL", "LNL", "PTL", "NVL"])
def test_no_run_holds_two_events_perf_prints_alike(intel_dir, platform):
    """perf prints a name= event under that name on any PMU, and the core types of a hybrid
    part share names: the plan of every event keeps each run's printed names distinct."""
    plan = schedule(intel.load(intel_dir, platform))
    for run in plan.runs:
        events = [(e.pmu, e.label, e.spec, e.key) for e in run.events]
        assert perf_labels.first_clash(events) is None, run
    names = {}
    for run in plan.runs:
        for e in run.events:
            names.setdefault(e.name, set()).add(e.pmu)
    shared = [n for n, pmus in names.items() if len(pmus) > 1]
    assert shared, "no event name on two core types: nothing was tested"


@pytest.mark.skipif(
    not Path("/sys/bus/event_source/devices/msr/events/tsc").exists(),
    reason="needs the msr PMU (msr/tsc/)",
)
def test_events_perf_would_print_alike_are_refused_in_one_line(tmp_path):
    proc = invoke("profile", "-o", str(tmp_path / "a"), "-e", "msr/tsc,name=task-clock/",
                  "-e", "task-clock", "--", "true")  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("autoprof: error: msr/task-clock and software/task-clock")
    assert "would both print as 'task-clock'" in proc.stderr
    proc = invoke("profile", "-o", str(tmp_path / "b"), "-e", "msr/tsc,name=X/",
                  "-e", "msr/aperf,name=X/", "--", "true")  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "autoprof: error: msr/tsc,name=X/ and msr/aperf,name=X/ are both called msr/X: "
        "give each a name= of its own"
    )
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
