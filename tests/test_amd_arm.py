"""AMD Zen and Arm64 catalogs from the perf data autoprof ships (autoprof/events/amd, arm64):
CPU matching as perf does it, perf's exact strings, the counter model (AMD pairs, Arm's cycle
counter) and plans as short as NON-INTEL.md section 5's lower bounds."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from autoprof.catalog import amd, arm, embedded, host, machine, update, vendor, yaml
from autoprof.catalog.model import ReadOptions
from autoprof.errors import AutoprofError
from autoprof.run import preflight
from autoprof.schedule import rules, schedule
from autoprof.schedule.bounds import pmu_bound
from autoprof.schedule.plan import Placement, Run, run_problems

AMD_DIR = embedded.directory("amd")
ARM_DIR = embedded.directory("arm64")
assert AMD_DIR is not None and ARM_DIR is not None

# NON-INTEL.md section 5: (events, lower bound, bound with --reserve 1).
AMD_BOUNDS = {
    "zen1": (183, 29, 35),
    "zen2": (219, 34, 41),
    "zen3": (243, 38, 46),
    "zen4": (502, 57, 69),
    "zen5": (602, 63, 76),
    "zen6": (454, 73, 88),
}
ARM_BOUNDS = {
    "neoverse-n1": (109, 18, 19),
    "neoverse-v1": (131, 22, 22),
    "neoverse-n2": (154, 26, 26),
    "neoverse-v3": (238, 40, 40),
    "neoverse-n3": (199, 33, 34),
    "a64fx": (183, 23, 23),
    "hip08": (29, 3, 3),  # its 47 uncore events are left out (arm.WILDCARD)
    "thunderx2": (37, 7, 7),
    "ampereone": (214, 36, 36),
    "t410": (464, 78, None),  # no cycle counter there: the watchdog takes a generic one
}
EVERYTHING = ReadOptions(deprecated=True)
SOFTWARE = len(yaml.load_builtin("software").events)  # task-clock, page-faults, ...


@pytest.mark.parametrize("model", sorted(AMD_BOUNDS))
def test_every_zen_model_is_planned_at_its_lower_bound(model):
    events, bound, reserved = AMD_BOUNDS[model]
    catalog = amd.load(AMD_DIR, model, EVERYTHING)
    assert len(catalog.events) == events
    plan = schedule(catalog)
    assert len(plan) == plan.lower_bound == bound
    with_watchdog = schedule(amd.load(AMD_DIR, model, ReadOptions(deprecated=True, reserve=1)))
    assert len(with_watchdog) == with_watchdog.lower_bound == reserved
    for run in plan.runs + with_watchdog.runs:  # the pair rule, counted here, not by rules
        core = [p for p in run.placements if p.event.pmu == "cpu"]
        pairs = sum(p.event.pair for p in core)
        assert pairs <= 3 and len(core) + pairs <= 6
        assert all(int(p.counter[2:]) % 2 == 0 for p in core if p.event.pair)


@pytest.mark.parametrize("model", sorted(ARM_BOUNDS))
def test_every_arm_model_is_planned_at_its_lower_bound(model):
    events, bound, reserved = ARM_BOUNDS[model]
    catalog = arm.load(ARM_DIR, model)
    assert len(catalog.events) == events
    plan = schedule(catalog)
    assert len(plan) == plan.lower_bound == bound
    if reserved is not None:
        with_watchdog = schedule(arm.load(ARM_DIR, model, ReadOptions(reserve=1)))
        assert len(with_watchdog) == with_watchdog.lower_bound == reserved


def test_pair_events_are_weight_two_on_even_counters():
    catalog = amd.load(AMD_DIR, "zen1")
    pmu = catalog.pmus["cpu"]
    pairs = [e for e in catalog.events if e.pair]
    singles = [e for e in catalog.events if e.pmu == "cpu" and not e.pair]
    assert {e.name.split(".")[0] for e in pairs} == {"fp_ret_sse_avx_ops"} and len(pairs) == 9
    assert all(e.counters == {0, 2, 4} for e in pairs)
    assert rules.assign(pmu, pairs[:3]) is not None
    assert rules.assign(pmu, pairs[:4]) is None  # p <= 3
    assert rules.assign(pmu, pairs[:2] + singles[:2]) is not None  # s + 2p = 6
    assert rules.assign(pmu, pairs[:2] + singles[:3]) is None  # s + 2p = 7
    run = Run([Placement(pairs[0], "gp0"), Placement(singles[0], "gp1")])
    assert any("gp1 used 2 times" in p for p in run_problems(run, catalog.pmus))
    odd = Run([Placement(pairs[0], "gp1")])
    assert run_problems(odd, catalog.pmus)
    watched = amd.load(AMD_DIR, "zen1", ReadOptions(reserve=1)).pmus["cpu"]
    assert rules.assign(watched, pairs[:3]) is None  # the watchdog breaks one pair
    assert rules.assign(watched, pairs[:2] + singles[:1]) is not None


@pytest.mark.parametrize(
    ("cpu_id", "model"),
    [
        ("AuthenticAMD-23-1-1", "amdzen1"),
        ("AuthenticAMD-23-2F-0", "amdzen1"),
        ("AuthenticAMD-23-31-0", "amdzen2"),  # [[:xdigit:]]: Python's re alone misses it
        ("AuthenticAMD-23-71-0", "amdzen2"),
        ("AuthenticAMD-25-1-1", "amdzen3"),  # this VM's /proc/cpuinfo
        ("AuthenticAMD-25-21-0", "amdzen3"),
        ("AuthenticAMD-25-5F-0", "amdzen3"),
        ("AuthenticAMD-25-11-1", "amdzen4"),
        ("AuthenticAMD-25-61-2", "amdzen4"),
        ("AuthenticAMD-26-2-1", "amdzen5"),  # first match: the Zen 6 row matches it too
        ("AuthenticAMD-26-44-0", "amdzen5"),
        ("AuthenticAMD-26-7F-0", "amdzen5"),
        ("AuthenticAMD-26-30-0", "amdzen6"),
        ("AuthenticAMD-26-50-0", "amdzen6"),
    ],
)
def test_an_amd_cpu_id_picks_the_first_matching_row(cpu_id, model):
    assert amd.model_for(AMD_DIR, cpu_id) == model


def test_every_amd_family_model_of_the_table_picks_its_row():
    ranges = {
        "amdzen1": (23, [*range(0x00, 0x30)]),
        "amdzen2": (23, [*range(0x30, 0x100)]),
        # the regex [245] leaves 30-3F to Zen 4 (NON-INTEL.md's "20-5F" is looser than its regex)
        "amdzen3": (25, [*range(0x00, 0x10), *range(0x20, 0x30), *range(0x40, 0x60)]),
        "amdzen4": (25, [*range(0x10, 0x20), *range(0x30, 0x40), *range(0x60, 0x100)]),
        "amdzen5": (26, [*range(0x00, 0x30), *range(0x40, 0x50), *range(0x60, 0x80)]),
        "amdzen6": (26, [*range(0x30, 0x40), *range(0x50, 0x60), *range(0x80, 0x100)]),
    }
    for model, (family, models) in ranges.items():
        for number in models:
            assert amd.model_for(AMD_DIR, f"AuthenticAMD-{family}-{number:X}-0") == model
    with pytest.raises(vendor.UnknownCpu):
        amd.model_for(AMD_DIR, "AuthenticAMD-21-1-0")


@pytest.mark.parametrize(
    ("midr", "model"),
    [
        ("0x00000000410fd0c0", "arm/neoverse-n1"),
        ("0x00000000413fd0c1", "arm/neoverse-n1"),  # variant 3, revision 1: any revision
        ("0x00000000410fd4f0", "arm/neoverse-n2-v2"),
        ("0x00000000411fd401", "arm/neoverse-v1"),
        ("0x00000000431f0af1", "cavium/thunderx2"),
        ("0x000000004e0f0100", "nvidia/t410"),
    ],
)
def test_an_arm_midr_picks_its_row_whatever_the_variant_and_revision(midr, model):
    assert arm.model_for(ARM_DIR, midr)[0] == model


def test_an_unknown_midr_is_unknown():
    with pytest.raises(vendor.UnknownCpu, match="0x00000000410fffff"):
        arm.model_for(ARM_DIR, "0x00000000410fffff")
    assert not vendor.midr_matches("0x00000000411fd0c1", "0x00000000410fd0c0")  # older variant


@pytest.mark.parametrize(
    ("model", "spec"),
    [
        ("zen1", "cpu/event=3,umask=0xff,name=fp_ret_sse_avx_ops.all/"),
        ("zen4", "cpu/event=0x1c7,name=ex_ret_msprd_brnch_instr_dir_msmtch/"),
        ("zen1", "amd_l3/event=1,umask=0x80,name=l3_request_g1.caching_l3_cache_accesses/"),
        (
            "zen5",
            "amd_l3/event=0xac,umask=1,enallcores=1,enallslices=1,sliceid=3,threadmask=3,"
            "name=l3_xi_sampled_latency.dram_near/",
        ),
        ("zen4", "amd_df/event=0x1f,umask=0x7fe,name=local_processor_read_data_beats_cs0/"),
        ("zen5", "amd_umc/event=0,name=umc_mem_clk/"),
        ("neoverse-n1", "armv8_pmuv3_0/event=0x11,name=CPU_CYCLES/"),
    ],
)
def test_perf_strings_are_jevents_own(model, spec):
    loader, folder = (amd.load, AMD_DIR) if model.startswith("zen") else (arm.load, ARM_DIR)
    assert spec in {e.spec for e in loader(folder, model).events}


def test_uncore_is_system_wide_and_arm_has_its_cycle_counter():
    zen4 = amd.load(AMD_DIR, "zen4")
    assert {n for n, p in zen4.pmus.items() if p.system_wide} == {"amd_l3", "amd_df", "amd_umc"}
    assert (zen4.pmus["cpu"].generic, zen4.pmus["amd_df"].generic) == (6, 16)
    n1 = arm.load(ARM_DIR, "neoverse-n1", ReadOptions(core_pmu="armv8_neoverse_n1"))
    [cycles] = [e for e in n1.events if e.name == "CPU_CYCLES"]
    assert cycles.fixed == 0 and not cycles.counters and cycles.pmu == "armv8_neoverse_n1"
    hip08 = arm.load(ARM_DIR, "hip08")
    assert hip08.pmus["armv8_pmuv3_0"].generic == 12
    wildcards = [x for x in hip08.excluded if x.pmu.startswith("hisi_sccl,")]
    assert len(wildcards) == 47 and {x.reason for x in wildcards} == {arm.WILDCARD}


def test_counters_replace_the_table_and_an_unknown_pmu_is_an_error():
    df4 = amd.load(AMD_DIR, "zen5", ReadOptions(counters=(("amd_df", 4),)))
    df_events = [e for e in df4.events if e.pmu == "amd_df"]
    assert pmu_bound(df4.pmus["amd_df"], df_events).runs == 204 // 4
    assert len(schedule(df4)) == 62  # the core PMU still sets the plan
    with pytest.raises(AutoprofError, match="--counters amd_nb: no such PMU"):
        amd.load(AMD_DIR, "zen5", ReadOptions(counters=(("amd_nb", 4),)))
    assert host.counter_numbers(["amd_df=4", "cpu=5"]) == (("amd_df", 4), ("cpu", 5))
    with pytest.raises(AutoprofError, match="expected PMU=N"):
        host.counter_numbers(["amd_df"])


def test_the_cli_plans_a_named_model_and_refuses_an_unknown_one(cli_run):
    run = cli_run("schedule", "--cpu", "amdzen5", "--deprecated", "-a")  # uncore too
    assert run.returncode == 0, run.stderr
    # the model's events and the kernel's software events, which every machine has
    assert f"{602 + SOFTWARE} events in 63 runs (lower bound 63, optimal)" in run.stdout
    run = cli_run("schedule", "--cpu", "amdzen5", "--deprecated")  # a command's profile
    assert f"{368 + SOFTWARE} events in 63 runs (lower bound 63, optimal); 234 excl" in run.stdout
    run = cli_run("schedule", "--cpu", "neoverse-n1", "--counters", "armv8_pmuv3_0=4")
    assert f"{109 + SOFTWARE} events in 27 runs (lower bound 27, optimal)" in run.stdout
    given = cli_run("schedule", "--events-dir", ARM_DIR, "--cpu", "0x00000000410fd0c0")
    assert f"{109 + SOFTWARE} events in 18 runs" in given.stdout  # the folder says its vendor
    unknown = cli_run("schedule", "--cpu", "zen9")
    assert unknown.returncode != 0
    [line] = unknown.stderr.strip().splitlines()
    assert line.startswith("autoprof: error: unknown --cpu 'zen9'") and "zen5" in line


def test_reserve_on_arm_takes_the_cycle_counter_then_generic_ones(cli_run):
    """The watchdog's cycles event holds an Arm core's cycle counter, then generic counters, one
    of which stays autoprof's: a 6-counter core with its cycle counter spares 6, the t410 (no
    cycle counter) 5; the core PMU is found by its kernel name, whatever it is."""
    n1_bound_with_watchdog = ARM_BOUNDS["neoverse-n1"][2]
    one = cli_run("schedule", "--json", "--cpu", "neoverse-n1", "--reserve", "1")
    assert one.returncode == 0, one.stderr
    plan = json.loads(one.stdout)
    assert len(plan["runs"]) == plan["lower_bound"] == n1_bound_with_watchdog
    counters = {e["counter"] for run in plan["runs"] for e in run["events"]}
    assert "fixed0" not in counters and "gp5" in counters  # the cycle counter is the watchdog's
    assert cli_run("schedule", "--cpu", "neoverse-n1", "--reserve", "6").returncode == 0
    over = cli_run("schedule", "--cpu", "neoverse-n1", "--reserve", "7")
    assert (over.returncode, over.stderr) == (
        2,
        "autoprof: error: --reserve 7: the armv8_pmuv3_0 PMU has 6 generic counters and a "
        "cycle counter, at most 6 can be reserved\n",
    )
    assert cli_run("schedule", "--cpu", "t410", "--reserve", "5").returncode == 0
    over = cli_run("schedule", "--cpu", "t410", "--reserve", "6")
    assert over.stderr == (
        "autoprof: error: --reserve 6: the armv8_pmuv3_0 PMU has 6 generic counters, at most 5 "
        "can be reserved\n"
    )
    for core in ("armv8_pmuv3", "armv8_cortex_a76"):  # a device tree's names (this machine's)
        options = ReadOptions(core_pmu=core, reserve=1)
        preflight.check_reserve(arm.load(ARM_DIR, "cortex-a76", options), 1)
        with pytest.raises(AutoprofError, match=f"the {core} PMU has 6 generic counters and a"):
            preflight.check_reserve(arm.load(ARM_DIR, "cortex-a76", replace(options, reserve=7)), 7)


def test_the_reserved_cycle_counter_is_in_the_facts_and_the_schedule_table(cli_run):
    """A profile's machine facts record what the watchdog holds, the cycle counter included,
    and `autoprof schedule` says it beside the counters, as it says x86's reserved ones."""
    core = "armv8_pmuv3_0"
    for reserve, counters in [
        (0, {"generic": 6, "fixed": 1, "reserved": 0, "reserved_fixed": 0}),
        (1, {"generic": 6, "fixed": 0, "reserved": 0, "reserved_fixed": 1}),
        (2, {"generic": 6, "fixed": 0, "reserved": 1, "reserved_fixed": 1}),
    ]:
        catalog = arm.load(ARM_DIR, "neoverse-n1", ReadOptions(reserve=reserve))
        assert machine.read_facts(catalog).counters[core] == counters

    def counters_shown(pmu: str, *args: str) -> str:
        shown = cli_run("schedule", *args)
        assert shown.returncode == 0, shown.stderr
        row = next(line for line in shown.stdout.splitlines() if line.startswith(f"│ {pmu} "))
        return row.split("│")[3].strip()

    n1 = ["--cpu", "neoverse-n1", "--reserve"]
    assert counters_shown(core, *n1, "0") == "6+1f"
    assert counters_shown(core, *n1, "1") == "6+0f (1f reserved)"
    assert counters_shown(core, *n1, "2") == "5+0f (1+1f reserved)"
    t410 = ["--cpu", "t410", "--reserve", "1"]  # no cycle counter: a generic one is held
    assert counters_shown(core, *t410) == "5+0f (1 reserved)"
    assert counters_shown("cpu", "--cpu", "SKX", "--reserve", "1") == "3+3f (1 reserved)"


def test_a_reserve_that_leaves_amds_pair_events_no_pair_is_one_line(cli_run):
    """AMD's pair events need an even/odd counter pair the watchdog's counters do not break:
    with 3 of 6 counters reserved none is left, which a plan of them says in one line; a plan
    without them may reserve 5."""
    refused = cli_run("schedule", "--cpu", "zen4", "--reserve", "3")
    assert refused.returncode == 2
    assert refused.stderr == (
        "autoprof: error: 3 reserved counters leave the cpu PMU no even/odd counter pair for "
        "fp_ret_sse_avx_ops.add_sub_flops (a pair event): reserve at most 2, or leave its pair "
        "events out\n"
    )
    assert cli_run("schedule", "--cpu", "zen4", "--reserve", "2").returncode == 0
    singles = cli_run("schedule", "--cpu", "zen4", "--reserve", "5", "-e", "ex_ret_instr")
    assert singles.returncode == 0, singles.stderr


def test_a_plan_for_another_cpu_has_the_kernels_software_events(cli_run):
    """Every Linux kernel counts task-clock, page-faults, ...: a --cpu plan names them (-e) and
    anchors every run on one, as a plan for this machine does."""
    for model in ("SKX", "zen4", "neoverse-n1"):
        run = cli_run("schedule", "--json", "--cpu", model, "-e", "task-clock", "--anchor",
                      "page-faults")  # fmt: skip
        assert run.returncode == 0, (model, run.stderr)
        [only] = json.loads(run.stdout)["runs"]
        assert only["perf_events"] == ["task-clock", "page-faults"]
        every = cli_run("schedule", "--json", "--cpu", model, "--anchor", "task-clock")
        assert every.returncode == 0, (model, every.stderr)
        events = [e for run in json.loads(every.stdout)["runs"] for e in run["events"]]
        software = {e["name"] for e in events if e["pmu"] == "software"}
        assert software == {e.name for e in yaml.load_builtin("software").events}
        assert all(e["counter"] is None for e in events if e["pmu"] == "software")


def test_every_arm_model_folder_and_core_name_is_a_cpu_name(cli_run):
    """--cpu takes every core folder of perf's arm64 mapfile (``arm/cortex-a57-a72``), its last
    part and each core a shared folder names, which picks that core's own MIDR (Arm's part
    numbers: Cortex-A57 0xd07, A72 0xd08, A65 0xd06, Neoverse E1 0xd4a, N2 0xd49, V2 0xd4f)."""
    names = arm.models(ARM_DIR)
    folders = {row[2] for row in arm.rows(ARM_DIR) if row[3:4] == ["core"]}
    parts = {"cortex-a57": 0xD07, "cortex-a72": 0xD08, "cortex-a65": 0xD06}
    parts |= {"neoverse-e1": 0xD4A, "neoverse-n2": 0xD49, "neoverse-v2": 0xD4F}
    for name, part in parts.items():
        assert int(names[name], 16) >> 4 & 0xFFF == part, name
    for folder in folders:
        for name in (folder, folder.rsplit("/", 1)[-1], *arm.core_names(folder)):
            midr = names[name]
            assert arm.model_for(ARM_DIR, midr)[0] == folder, name
            assert host.host_catalog(cpu=name).cpu == midr, name
    assert arm.core_names("arm/cortex-a76") == [] and "cortex-a76" in names
    run = cli_run("schedule", "--cpu", "cortex-a57")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("0x00000000410fd070: ")


def test_events_show_an_amd_and_an_arm_event(cli_run):
    run = cli_run("events", "show", "--cpu", "zen1", "fp_ret_sse_avx_ops.all")
    assert "perf spec:   cpu/event=3,umask=0xff,name=fp_ret_sse_avx_ops.all/" in run.stdout
    assert "counters:    0,2,4" in run.stdout
    run = cli_run("events", "show", "--cpu", "0x00000000413fd0c1", "CPU_CYCLES")
    assert "armv8_pmuv3_0/event=0x11,name=CPU_CYCLES/" in run.stdout
    assert "counter:     fixed 0" in run.stdout


def test_a_directory_says_its_vendor(tmp_path):
    assert vendor.layout(AMD_DIR) == "amd" and vendor.layout(ARM_DIR) == "arm64"
    (tmp_path / "mapfile.csv").write_text("Family-model,Version\nSomething-1,v1\n")
    with pytest.raises(AutoprofError, match="names no Intel, AMD or Arm64 CPU"):
        vendor.layout(tmp_path)


def test_events_update_installs_a_newer_copy_in_the_cache(tmp_path, monkeypatch, cli_run):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    newer = Path(shutil.copytree(AMD_DIR, tmp_path / "newer"))
    fp = newer / "amdzen5" / "floating-point.json"
    fp.write_text(fp.read_text().replace("fp_ret_sse_avx_ops.all", "fp_ret_sse_avx_ops.every"))
    run = cli_run("events", "update", "--from", newer)
    assert run.returncode == 0, run.stderr
    installed = tmp_path / "cache" / "autoprof" / "events" / "amd"
    assert f"amd: 6 models from {newer}, now used from {installed}" in run.stdout
    assert host.events_dir(None, "amd") == installed
    shown = cli_run("events", "show", "--cpu", "zen5", "fp_ret_sse_avx_ops.every")
    assert "cpu/event=3,umask=0xf,name=fp_ret_sse_avx_ops.every/" in shown.stdout


@pytest.mark.slow  # parses every Arm model: 4 s
def test_a_linux_checkout_gives_amd_and_arm(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    arch = tmp_path / "linux" / "tools" / "perf" / "pmu-events" / "arch"
    x86 = Path(shutil.copytree(AMD_DIR, arch / "x86"))
    with (x86 / "mapfile.csv").open("a") as mapfile:  # Intel's rows sit beside AMD's there
        mapfile.write("GenuineIntel-6-55-[01234],v1,skylakex,core\n")
    shutil.copytree(ARM_DIR, arch / "arm64")
    done = {name: models for name, _, models in update.update(tmp_path / "linux")}
    assert done == {"amd": 6, "arm64": len(set(arm.models(ARM_DIR).values()))}
    mapfile = (tmp_path / "cache" / "autoprof" / "events" / "amd" / "mapfile.csv").read_text()
    assert "GenuineIntel" not in mapfile and "AuthenticAMD-26" in mapfile


def test_a_malformed_update_is_one_error_line_and_keeps_the_old_data(
    tmp_path, monkeypatch, cli_run
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    broken = Path(shutil.copytree(AMD_DIR, tmp_path / "broken"))
    (broken / "amdzen3" / "cache.json").write_text("[{not json")
    run = cli_run("events", "update", "--from", broken)
    assert run.returncode != 0
    [line] = run.stderr.strip().splitlines()
    assert line.startswith(f"autoprof: error: events update: {broken} is not usable amd data")
    assert "malformed JSON" in line
    assert host.events_dir(None, "amd") != tmp_path / "cache" / "autoprof" / "events" / "amd"
    left = [p.name for p in (tmp_path / "cache" / "autoprof" / "events").iterdir()]
    assert not [name for name in left if name == "amd" or name.startswith(".")]  # no scratch
    nothing = cli_run("events", "update", "--from", tmp_path)
    assert "has no mapfile.csv and is no Linux checkout" in nothing.stderr


def test_an_update_nested_too_deeply_is_one_line_and_leaves_no_scratch_copy(
    tmp_path, monkeypatch, cli_run
):
    """Issue #29, security item 10: Python's JSON reader raises RecursionError past ~1,000
    levels; that was a traceback, with the staged copy left in the cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    broken = Path(shutil.copytree(AMD_DIR, tmp_path / "broken"))
    (broken / "amdzen3" / "cache.json").write_text("[" * 100_000 + "]" * 100_000)
    run = cli_run("events", "update", "--from", broken)
    assert run.returncode == 2
    [line] = run.stderr.strip().splitlines()
    assert line.startswith(
        f"autoprof: error: events update: {broken} is not usable amd data: malformed JSON in "
    )
    assert line.endswith("/amdzen3/cache.json: JSON nested too deeply to read")
    assert list((tmp_path / "cache" / "autoprof" / "events").iterdir()) == []


def test_a_task_profile_leaves_out_system_wide_pmus_and_a_system_wide_one_counts_them():
    from autoprof.run.options import ProfileOptions
    from autoprof.run.planning import plan_catalog
    from autoprof.run.request import Request

    whole_system = Request(options=ProfileOptions(system_wide=True))

    zen4 = amd.load(AMD_DIR, "zen4")
    planned = plan_catalog(zen4, Request())
    task = planned.catalog
    assert {e.pmu for e in task.events} == {"cpu"} and len(planned.plan) == 57
    left = {x.pmu for x in task.excluded if x.reason == "system-wide only: profile -a counts it"}
    assert left == {"amd_l3", "amd_df", "amd_umc"}
    whole = plan_catalog(zen4, whole_system).catalog
    assert len(whole.events) == 502
    with pytest.raises(AutoprofError, match=r"amd_df counts system-wide only.*profile it with -a"):
        plan_catalog(zen4, Request(events=["local_processor_read_data_beats_cs0"]))


def test_a_cpu_no_data_knows_is_a_note_and_software_events(monkeypatch):
    monkeypatch.setattr(machine, "cpu_id", lambda: "HygonGenuine-24-0-0")
    catalog = host.host_catalog()
    assert catalog.note == (
        "no event data knows this machine's CPU id HygonGenuine-24-0-0: software events only"
    )
    assert "task-clock" in {e.name for e in catalog.events} and "cpu" not in catalog.pmus
    monkeypatch.setattr(machine, "cpu_id", lambda: "AuthenticAMD-21-1-0")  # before Zen: no row
    note = host.host_catalog().note
    assert note.startswith("unknown CPU id 'AuthenticAMD-21-1-0'") and "software events" in note


def test_this_arm_machine_reads_its_midr_and_core_pmu_from_sysfs(tmp_path):
    regs = tmp_path / "cpu" / "cpu0" / "regs" / "identification"
    regs.mkdir(parents=True)
    (regs / "midr_el1").write_text("0x00000000413fd0c1\n")
    assert machine.midr(tmp_path) == "0x00000000413fd0c1"
    assert vendor.vendor_of(machine.midr(tmp_path)) == "arm64"
    pmus = tmp_path / "devices"
    for name in ("arm_cmn_0", "armv8_pmuv3_0", "software"):
        (pmus / name).mkdir(parents=True)
    (pmus / "armv8_pmuv3_0" / "cpus").write_text("0-63\n")
    (pmus / "arm_cmn_0" / "cpumask").write_text("0\n")
    assert machine.arm_core_pmu(pmus) == "armv8_pmuv3_0"


def test_an_amd_machine_has_perfs_metrics_and_its_own_metric_files(cli_run, tmp_path):
    """perf's metrics for zen4 (tests/test_perf_metrics.py), plus a YAML file of one's own."""
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "- {name: my_ipc, formula: i / c, events: {i: ex_ret_ops, c: ls_not_halted_cyc}}"
    )
    run = cli_run("schedule", "--cpu", "zen4", "--metrics", "my_ipc", "--metrics", "retiring",
                  "--metrics-file", mine)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "2 metrics from 2 events in 1 runs" in " ".join(run.stdout.split())
