"""perf's own metrics for AMD Zen and Arm64 cores (the pmu-events JSON autoprof ships): perf's
expression language, hand-worked values of the shipped definitions, every metric of every
model evaluated or listed with its reason, co-scheduled plans, the top-down tree from
`aggregate`'s results, and the constants (#slots) with where they came from."""

from __future__ import annotations

import math
import re
import zlib

import numpy as np
import pandas as pd
import pytest

from autoprof.analysis import data
from autoprof.analysis import metrics as analysis
from autoprof.catalog import amd, arm, embedded, host, machine, vendor
from autoprof.catalog.model import ReadOptions
from autoprof.errors import AutoprofError
from autoprof.metrics import catalog as metric_catalog
from autoprof.metrics import constants, perfexpr, perfjson
from autoprof.metrics.events import result_name
from autoprof.metrics.formula import FormulaError
from autoprof.metrics.plan import known_constants, metric_needs, plan_metrics, unavailable_pmus
from autoprof.testing import synthetic_out
from autoprof.testing.cli import invoke
from autoprof.testing.synthetic_out import profile_from_plan
from tests.helpers import ZEN4_COUNTS, zen4_profile

AMD_DIR = embedded.directory("amd")
ARM_DIR = embedded.directory("arm64")
assert AMD_DIR is not None and ARM_DIR is not None


def value(expr: str, **values: float) -> float:
    """A perf expression over named values (identifiers spelled as perf normalizes them)."""
    formula, symbols = perfexpr.parse(expr)
    by_alias = {a: values[n] for a, n in symbols.names.items()}
    by_alias |= {a: values[n] for a, n in symbols.literals.items()}
    return formula(by_alias)


# --- perf's expression language (tools/perf/util/expr.l, expr.y) ---------------------------


def test_operator_precedence_is_perfs_not_pythons():
    # expr.y: | < ^ < & < (< >) < (+ -) < (* / %) < unary -, all left-associative
    assert value("1 + 2 * 3") == 7
    assert value("a < b | c", a=1, b=2, c=4) == 5  # (1 < 2) | 4; Python: 1 < (2 | 4)
    assert value("a | b ^ 1", a=0, b=1) == 0  # 0 | (1 ^ 1)
    assert value("a | b ^ 1", a=0, b=0) == 1
    assert value("6 & 3 ^ 1") == 3  # (6 & 3) ^ 1
    assert value("2.9 | 1") == 3  # integers: (long)2.9 | 1
    assert value("-a * b", a=2, b=3) == -6
    assert value("10 - 4 - 3") == 3 and value("64 / 4 / 2") == 8
    assert value("7 % 3") == 1 and value("-7 % 3") == -1  # C's remainder
    assert value("1e3 / 2 + .5") == 500.5


def test_if_else_d_ratio_min_max_and_nan():
    assert value("a if c else b", a=1, b=2, c=0) == 2
    assert value("a if c else b", a=1, b=2, c=0.5) == 1
    assert value("a if c else b", a=1, b=2, c=math.nan) == 1  # only 0 is false (expr.y)
    assert value("1 + a if c else 2 * b", a=1, b=5, c=0) == 10  # `if` binds loosest
    assert value("a if c else b if d else 9", a=1, b=2, c=0, d=0) == 9
    assert value("d_ratio(a, b)", a=3, b=0) == 0  # d_ratio by zero is 0
    assert value("d_ratio(a, b)", a=3, b=4) == 0.75
    assert value("min(a, b) + max(a, b)", a=2, b=7) == 9
    assert math.isnan(value("NaN + 1"))
    assert math.isinf(value("a / b", a=1, b=0))  # perf drops the value: flagged as infinite


def test_identifiers_escapes_keywords_and_literals():
    formula, s = perfexpr.parse(
        "d_ratio(6 * cpu@de_no_dispatch_per_slot.no_ops_from_frontend\\,cmask\\=0x6@, slots)"
        " + #SLOTS + source_count(l3_misses) if strcmp_cpuid_str(0x410fd493) else ifx"
    )
    assert set(s.names.values()) == {
        "cpu/de_no_dispatch_per_slot.no_ops_from_frontend,cmask=0x6/",
        "slots",
        "ifx",  # a symbol, not the keyword: flex takes the longest match
    }
    assert list(s.literals.values()) == ["#slots"]  # literals are case-insensitive
    assert list(s.counted.values()) == ["l3_misses"]
    assert list(s.cpuid.values()) == ["0x410fd493"]  # a symbol, longer than the number 0
    assert formula.names == s.aliases


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("a +", "ends early"),
        ("min(a)", "expected ','"),
        ("a b", "unexpected 'b'"),
        ("a $ b", "unexpected '$'"),
        ("has_event(cycles)", "has_event() is not supported"),
        ("(a", "ends early"),
        ("", "empty expression"),
    ],
)
def test_malformed_expressions_are_clear_errors(text, says):
    with pytest.raises(FormulaError, match=re.escape(says)):
        perfexpr.parse(text)


@pytest.mark.parametrize(
    ("text", "scale", "unit"),
    [
        ("100%", 100.0, "%"),
        ("1percent of slots", 1.0, "percent of slots"),
        ("1e3per_1k_instr", 1000.0, "per_1k_instr"),
        ("6.103515625e-5MiB", 6.103515625e-5, "MiB"),
        ("1core clocks", 1.0, "core clocks"),
        ("100%slots", 100.0, "%slots"),
        (None, 1.0, ""),
    ],
)
def test_scale_unit(text, scale, unit):
    assert perfjson.scale_unit(text) == (scale, unit)


# --- the shipped definitions, worked out by hand ---------------------------------------------


def evaluate(found, name: str, counts: dict[str, float], known: dict[str, float]) -> float:
    """A metric's value on counts by results name (what `aggregate` calls each event)."""
    metric = found.metrics[name]
    values = {alias: counts[result_name(text)[0]] for alias, text in metric.events.items()}
    values |= constants.for_metric(metric.constants, known)
    return float(metric.formula(values)) * metric.scale


# by hand: bad speculation = (2.5M - 2.1M) / 6M = 1/15; its share of mispredicts 30k / 40k
ZEN4_EXPECTED = {
    "total_dispatch_slots": 6_000_000,
    "frontend_bound": 20.0,  # 1.2M / 6M, ScaleUnit 100%
    "bad_speculation": 100 / 15,
    "backend_bound": 30.0,
    "smt_contention": 10.0,
    "retiring": 35.0,
    "frontend_bound_latency": 15.0,  # 6 * 150k / 6M
    "frontend_bound_bandwidth": 5.0,  # (1.2M - 900k) / 6M
    "bad_speculation_mispredicts": 5.0,  # (1/15) * 30k / 40k
    "bad_speculation_pipeline_restarts": 100 / 15 / 4,
    "backend_bound_memory": 7.5,  # 30% * 600 / 2400
    "backend_bound_cpu": 22.5,
    "retiring_fastpath": 31.5,  # 35% * (1 - 0.1)
    "retiring_microcode": 3.5,
    "branch_misprediction_ratio": 5.0,  # 30k / 600k
    "ic_fetch_miss_ratio": 0.0,  # d_ratio(0, 0)
    "umc_mem_bandwidth": 32.0,  # 1M * 64 B / 1e6 / 2 s duration_time, MB/s
    "l3_read_miss_latency": 200.0,  # 5000 * 10 / 250 core clocks
}


def test_zen4_metrics_by_hand():
    found = metric_catalog.for_machine(None, "zen4")
    known = {constants.DURATION_S: 2.0}
    for name, expected in ZEN4_EXPECTED.items():
        assert evaluate(found, name, ZEN4_COUNTS, known) == pytest.approx(expected), name
    assert found.metrics["frontend_bound"].unit == "%"
    assert found.metrics["bad_speculation_mispredicts"].refs == ("bad_speculation",)


def test_zen5_per_kilo_instruction_and_eight_slots():
    found = metric_catalog.for_machine(None, "zen5")
    counts = {
        "bp_l1_tlb_miss_l2_tlb_hit": 300,
        "bp_l1_tlb_miss_l2_tlb_miss.all": 100,
        "instructions": 200_000,  # perf's generic event
        "ls_not_halted_cyc": 1_000,
        "ex_ret_ops": 4_000,
    }
    assert evaluate(found, "l1_itlb_misses_pti", counts, {}) == pytest.approx(2.0)  # 400/200k*1e3
    assert evaluate(found, "retiring", counts, {}) == pytest.approx(50.0)  # 4000 / (8 * 1000)


N2_COUNTS = {
    "OP_RETIRED": 800,
    "OP_SPEC": 1_000,
    "STALL_SLOT": 2_000,
    "STALL_SLOT_FRONTEND": 1_500,
    "STALL_SLOT_BACKEND": 1_200,
    "CPU_CYCLES": 1_000,
    "BR_MIS_PRED": 10,
    "INST_RETIRED": 2_500,
}


@pytest.mark.parametrize(
    ("cpu", "slots", "expected"),
    [
        # r0p0: strcmp_cpuid_str(0x410fd493) is 0, (0x410fd490 ^ 1) is 0: the else branch,
        # STALL_SLOT - CPU_CYCLES; 5 slots
        ("0x00000000410fd490", 5, {"bad_speculation": 20.0, "frontend_bound": 9.0,
                                   "retiring": 64.0, "backend_bound": 21.0, "ipc_rate": 50.0}),
        # r0p3: the first test matches (revision 3 >= 3): STALL_SLOT as counted
        ("0x00000000410fd493", 5, {"bad_speculation": 16.0, "frontend_bound": 29.0,
                                   "retiring": 48.0, "backend_bound": 21.0, "ipc_rate": 50.0}),
        # Neoverse V2: neither id, (0 ^ 1) is 1: STALL_SLOT as counted; 8 slots
        ("0x00000000410fd4f0", 8, {"bad_speculation": 19.0, "frontend_bound": 17.75,
                                   "retiring": 60.0, "backend_bound": 12.0, "ipc_rate": 31.25}),
    ],
)  # fmt: skip
def test_neoverse_n2_v2_topdown_by_hand(cpu, slots, expected):
    """bad_speculation = 100 ((1 - 800/1000)(1 - S/(1000 #slots)) + 4 * 10/1000), S the slots
    stalled (2000, less 1000 cycles on N2 before r0p3); ipc_rate = (2500/1000) / #slots."""
    found = metric_catalog.for_machine(None, cpu)
    assert found.model == "arm/neoverse-n2-v2"
    metrics = list(found.metrics.values())
    known = known_constants(found.cpu, True, metrics)
    assert known[constants.SLOTS] == slots  # the model table (Arm's telemetry specification)
    for name, want in expected.items():
        assert evaluate(found, name, N2_COUNTS, known) == pytest.approx(want), name


def test_neoverse_n1_n3_and_hip08_by_hand():
    n1 = metric_catalog.for_machine(None, "neoverse-n1")
    counts = {"INST_RETIRED": 2_500, "CPU_CYCLES": 1_000, "BR_MIS_PRED_RETIRED": 5,
              "L1D_CACHE_REFILL": 50, "L1D_CACHE": 1_000, "STALL_BACKEND": 300}  # fmt: skip
    assert evaluate(n1, "ipc", counts, {}) == pytest.approx(2.5)
    assert evaluate(n1, "branch_mpki", counts, {}) == pytest.approx(2.0)
    assert evaluate(n1, "l1d_cache_miss_ratio", counts, {}) == pytest.approx(0.05)
    assert evaluate(n1, "backend_stalled_cycles", counts, {}) == pytest.approx(30.0)
    n3 = metric_catalog.for_machine(None, "neoverse-n3")
    flush = {"STALL_SLOT_FRONTEND": 1_500, "CPU_CYCLES": 1_000, "STALL_FRONTEND_FLUSH": 20}
    assert evaluate(n3, "frontend_bound", flush, {}) == pytest.approx(28.0)  # 0.3 - 0.02
    hip = metric_catalog.for_machine(None, "hip08")
    counts = {"FETCH_BUBBLE": 800, "CPU_CYCLES": 1_000, "INST_SPEC": 2_000,
              "INST_RETIRED": 1_600, "armv8_pmuv3_0/event=0x201d/": 150}  # fmt: skip
    # frontend 800/4000, bad speculation 400/4000, retiring 1600/4000: backend 1 - 0.7
    assert evaluate(hip, "backend_bound", counts, {}) == pytest.approx(0.3)
    assert evaluate(hip, "fetch_latency_bound", counts, {}) == pytest.approx(0.15)
    assert evaluate(hip, "fetch_bandwidth_bound", counts, {}) == pytest.approx(0.05)
    # hip08's files list no CPU_CYCLES: perf counts the kernel's alias of the common event
    assert "armv8_pmuv3_0/event=0x11,name=CPU_CYCLES/" in hip.metrics["retiring"].events.values()


def test_ampereone_slots_come_from_the_machine_or_set():
    """AmpereOne's metrics read #slots, which no public table gives: the profiled machine's
    caps/slots, else --set; without either the metric is listed, not computed."""
    found = metric_catalog.for_machine(None, "ampereone")
    counts = {"OP_RETIRED": 3_000, "CPU_CYCLES": 1_000}
    assert constants.SLOTS not in known_constants(found.cpu, True, list(found.metrics.values()))
    assert evaluate(found, "retired_fraction", counts, {"#slots": 4}) == pytest.approx(75.0)
    frame = counts_frame([[_event("OP_RETIRED"), _event("CPU_CYCLES")]], _rate(counts))
    values = analysis.compute(frame, [found.metrics["retired_fraction"]], {})
    assert values["retired_fraction"].missing == ["constant #slots (give --set '#slots=VALUE')"]
    values = analysis.compute(frame, [found.metrics["retired_fraction"]], {"#slots": 4.0})
    assert values["retired_fraction"].value == pytest.approx(75.0)


def counts_frame(runs, rate, intervals: int = 5) -> pd.DataFrame:
    """`synthetic_out.counts_frame`, prepared for analysis as `data.load` prepares a file."""
    return data.prepare(synthetic_out.counts_frame(runs, rate, intervals))


def _event(name: str, pmu: str = "armv8_pmuv3_0"):
    from autoprof.catalog.model import Event

    return Event(name=name, pmu=pmu)


def _rate(counts: dict[str, float]):
    return lambda event: counts[event.name]


# --- every model: each metric evaluates or is listed with its reason ---------------------------


def _models(kind: str) -> dict[str, str]:
    """One CPU id per model folder of perf's data."""
    directory = AMD_DIR if kind == vendor.AMD else ARM_DIR
    table = amd.models(directory) if kind == vendor.AMD else arm.models(directory)
    reader = amd if kind == vendor.AMD else arm
    found: dict[str, str] = {}
    for cpu in table.values():
        try:
            folder = reader.model_for(directory, cpu)
        except vendor.UnknownCpu:
            continue
        found.setdefault(folder if isinstance(folder, str) else folder[0], cpu)
    return found


def _synthetic_rate(event) -> float:
    return 1_000 + zlib.crc32(event.name.encode()) % 1_000_000


@pytest.mark.parametrize("kind", [vendor.AMD, vendor.ARM64])
def test_every_metric_of_every_model_evaluates_or_is_listed(kind):
    directory = AMD_DIR if kind == vendor.AMD else ARM_DIR
    reader = amd if kind == vendor.AMD else arm
    models = _models(kind)
    assert len(models) == (6 if kind == vendor.AMD else 28)
    with_metrics = 0
    for folder, cpu in sorted(models.items()):
        found = perfjson.load(directory, kind, cpu)
        assert not found.unreadable, (folder, found.unreadable)  # perf's language, all of it
        metrics = list(found.metrics.values())
        if not metrics:
            continue
        with_metrics += 1
        catalog = reader.load(directory, cpu, ReadOptions(deprecated=True, experimental=True))
        known = known_constants(catalog.cpu, True, metrics)
        for system_wide in (True, False):
            unavailable = unavailable_pmus(catalog, system_wide)
            needs = metric_needs(metrics, catalog, known, unavailable=unavailable)
            events = {e.key: e for n in needs if not n.missing for e in n.measured}
            frame = counts_frame([list(events.values())], _synthetic_rate)
            values = analysis.compute(frame, metrics, known)
            listed = {n.metric.name: n.missing for n in needs if n.missing}
            for name, computed in values.items():
                if computed.missing or name in listed:
                    reasons = computed.missing or listed[name]
                    assert reasons and all(r.strip() for r in reasons), (folder, name)
                else:  # a number from a whole set of counts (flagged if out of range)
                    assert not math.isnan(computed.value) or computed.flag, (folder, name)
            if system_wide:  # every core metric is computed; only what lacks a value is listed
                for name, computed in values.items():
                    for reason in computed.missing:
                        assert reason.startswith("constant #slots"), (folder, name, reason)
            else:
                for name in listed:
                    assert any("system-wide only" in r for r in listed[name]), (folder, name)
    assert with_metrics == (6 if kind == vendor.AMD else 9)


def test_uncore_metrics_of_a_task_profile_are_listed_never_computed():
    """A profile of a command cannot count amd_df: zen4's DRAM metrics are listed with the
    reason, and a results file holding some of their events still does not compute them."""
    found = metric_catalog.for_machine(None, "zen4")
    catalog = amd.load(AMD_DIR, "zen4", ReadOptions(deprecated=True))
    metric = found.metrics["dram_read_data_for_local_processor"]
    task = unavailable_pmus(catalog, system_wide=False)
    planned = plan_metrics(catalog, [metric, found.metrics["retiring"]], True, unavailable=task)
    assert list(planned.unmeasurable) == [metric.name]
    assert "amd_df counts system-wide only" in planned.unmeasurable[metric.name][0]
    some = [e for e in catalog.events if e.name.startswith("local_processor_read_data_beats_cs")]
    frame = counts_frame([some[:5]], _synthetic_rate)  # 5 of the 12 channels
    computed = analysis.compute(frame, [metric], {})[metric.name]
    assert math.isnan(computed.value) and len(computed.missing) == 7


# --- plans: each metric's events in one run ---------------------------------------------------


@pytest.mark.parametrize(
    ("cpu", "group", "runs"),
    [("neoverse-n1", "TopdownL1", 1), ("zen4", "PipelineL1", 1), ("neoverse-n2", "TopdownL1", 1),
     ("zen4", "PipelineL2", 3)],
)  # fmt: skip
def test_consistent_plans_hold_each_metrics_events_in_one_run(cpu, group, runs):
    found = metric_catalog.for_machine(None, cpu)
    chosen = found.select([group])
    catalog = host.build_catalog(cpu=cpu, deprecated=True, experimental=True)
    planned = plan_metrics(catalog, chosen, smt=True, consistent=True)
    assert len(planned.plan) == runs
    for need in planned.needs:
        at = planned.schedule.runs[need.metric.name]
        assert at is not None, need.metric.name
        assert {e.key for e in need.measured} <= {e.key for e in planned.plan.runs[at].events}


def test_neoverse_n1_topdown_l1_is_arms_level_one(cli_run):
    run = cli_run("schedule", "--metrics", "TopdownL1", "--cpu", "neoverse-n1", "--consistent")
    assert run.returncode == 0, run.stderr
    assert "perf defines no TopdownL1 for this core" in run.stderr
    assert "2 metrics from 3 events in 1 runs (lower bound 1)" in " ".join(run.stdout.split())


def test_amd_pair_events_are_co_scheduled_where_they_fit(tmp_path):
    """PMCx003 FLOPs events take an even/odd counter pair: two pairs and two single events
    fill zen4's six counters in one run; three pairs and one single (7) never fit one run."""
    mine = tmp_path / "flops.yaml"
    mine.write_text(
        """
- name: two_flops_per_op
  formula: (a + m) / (c + o)
  events: {a: fp_ret_sse_avx_ops.add_sub_flops, m: fp_ret_sse_avx_ops.mult_flops,
           c: ls_not_halted_cyc, o: ex_ret_ops}
- name: three_flops_per_cycle
  formula: (a + m + d) / c
  events: {a: fp_ret_sse_avx_ops.add_sub_flops, m: fp_ret_sse_avx_ops.mult_flops,
           d: fp_ret_sse_avx_ops.div_flops, c: ls_not_halted_cyc}
"""
    )
    found = metric_catalog.for_machine(None, "zen4", (str(mine),))
    chosen = found.select(["two_flops_per_op", "three_flops_per_cycle"])
    catalog = host.build_catalog(cpu="zen4", deprecated=True)
    planned = plan_metrics(catalog, chosen, smt=True, consistent=True)
    assert planned.schedule.runs["two_flops_per_op"] is not None
    assert planned.schedule.runs["three_flops_per_cycle"] is None  # 3 * 2 + 1 > 6 counters
    assert len(planned.plan) == planned.plan.lower_bound == 2


# --- the tree from aggregate's results --------------------------------------------------------


def test_analyze_metrics_prints_zen4s_tree_from_aggregated_results(tmp_path):
    out = zen4_profile(tmp_path)
    shown = invoke("analyze", "metrics", str(out), "--tree", "-o", str(tmp_path / "a"))
    assert shown.returncode == 0, shown.stderr
    lines = [ln.rstrip() for ln in shown.stdout.splitlines()]
    start = lines.index("Top-down tree (amdzen4)")
    tree = lines[start + 1 : start + 14]
    assert [ln.split()[0] for ln in tree] == [
        "frontend_bound", "frontend_bound_latency", "frontend_bound_bandwidth",
        "bad_speculation", "bad_speculation_mispredicts", "bad_speculation_pipeline_restarts",
        "backend_bound", "backend_bound_memory", "backend_bound_cpu",
        "smt_contention",
        "retiring", "retiring_fastpath", "retiring_microcode",
    ]  # fmt: skip
    assert tree[1].startswith("  frontend_bound_latency") and tree[0].startswith("frontend")
    assert tree[0].split()[1] == "20.0%" and tree[6].split()[1] == "30.0%"
    # the bottleneck path: the largest level-1 node (retiring 35%), then its largest child
    assert tree[11].endswith("31.5% <==")
    assert "total_dispatch_slots" not in shown.stdout  # --tree: the tree only
    table = pd.read_csv(tmp_path / "a" / "metrics.csv").set_index("METRIC")
    for name in [ln.split()[0] for ln in tree]:  # ratios: 10 intervals change none
        assert table.loc[name, "VALUE"] == pytest.approx(ZEN4_EXPECTED[name]), name
        assert table.loc[name, "SCOPE"] == "same-run"
    assert table.loc["frontend_bound_latency", "PARENT"] == "frontend_bound"


def test_amd_and_arm_metrics_need_no_metrics_file_and_a_core_without_any_says_so(cli_run):
    listed = cli_run("metrics", "list", "--cpu", "zen4", "--group", "PipelineL1")
    assert listed.returncode == 0, listed.stderr
    assert "amdzen4: 5 metrics" in listed.stdout
    none = cli_run("schedule", "--cpu", "a64fx", "--metrics", "all")
    [line] = none.stderr.strip().splitlines()
    assert line == (
        "autoprof: error: no metrics for fujitsu/a64fx: perf's data defines none for it; the "
        "shipped software metrics count anywhere (--metrics-file software), or give "
        "--metrics-file FILE.yaml for your own"
    )


# --- constants: from the machine, the model table or --set, and said which -------------------


def test_slots_come_from_the_machine_sysfs_first(tmp_path):
    pmus = tmp_path / "devices"
    (pmus / "armv8_pmuv3_0" / "caps").mkdir(parents=True)
    (pmus / "armv8_pmuv3_0" / "cpus").write_text("0-63\n")
    assert machine.arm_slots(pmus) is None
    (pmus / "armv8_pmuv3_0" / "caps" / "slots").write_text("0x00000006\n")  # arm_pmuv3.c
    assert machine.arm_slots(pmus) == 6
    facts = {"cpu_id": "0x00000000410fd490", "slots": 6, "smt": False}
    values, sources = constants.gather(facts, "0x00000000410fd490", {}, [])
    assert values["#slots"] == 6 and sources["#slots"] == "the profiled machine"
    values, sources = constants.gather(None, "0x00000000410fd490", {}, [])
    assert values["#slots"] == 5 and sources["#slots"] == "model table"
    values, sources = constants.gather(facts, "0x00000000410fd490", {"#slots": 7.0}, [])
    assert values["#slots"] == 7 and sources["#slots"] == "--set"


def test_analysis_notes_say_where_slots_came_from(tmp_path):
    catalog = host.build_catalog(cpu="neoverse-n2", deprecated=True)
    found = metric_catalog.for_machine(None, "neoverse-n2")
    planned = plan_metrics(catalog, found.select(["TopdownL1"]), True)
    out = profile_from_plan(tmp_path / "out", planned.plan, lambda e: N2_COUNTS[e.name])
    assert invoke("aggregate", str(out)).returncode == 0
    shown = invoke("analyze", "metrics", str(out), "--metrics", "TopdownL1")
    assert shown.returncode == 0, shown.stderr
    assert "constants: #slots from model table" in shown.stdout
    assert "bad_speculation" in shown.stdout and "20.0% of slots" in shown.stdout


def test_strcmp_cpuid_str_follows_perfs_mapfile_rules():
    names = ["strcmp_cpuid_str(0x410fd493)", "strcmp_cpuid_str(0x410fd490)"]
    r0p0 = constants.cpuid_tests("0x00000000410fd490", names)
    assert r0p0 == {names[0]: 0.0, names[1]: 1.0}
    r1p0 = constants.cpuid_tests("0x00000000411fd490", names)  # variant 1 > 0: both match
    assert r1p0 == {names[0]: 1.0, names[1]: 1.0}
    zen = "strcmp_cpuid_str(AuthenticAMD-25-[[:xdigit:]]+)"  # x86: a POSIX regex
    amd_id = constants.cpuid_tests("AuthenticAMD-25-11-1", [zen])
    assert list(amd_id.values()) == [1.0]


def test_perf_metric_series_follow_the_intervals():
    found = metric_catalog.for_machine(None, "neoverse-n1")
    metric = found.metrics["ipc"]
    inst, cycles = _event("INST_RETIRED"), _event("CPU_CYCLES")
    frame = counts_frame([[inst, cycles]], lambda e: 3_000 if e is inst else 1_000, intervals=4)
    computed = analysis.compute(frame, [metric], {})["ipc"]
    assert computed.value == 3.0 and list(computed.series) == [3.0] * 4
    assert np.isfinite(computed.series).all()


def test_unknown_metric_word_names_the_model():
    found = metric_catalog.for_machine(None, "zen4")
    with pytest.raises(AutoprofError, match="no metric or metric group 'TopdownL9' for amdzen4"):
        found.select(["TopdownL9"])


def test_source_count_is_how_many_counters_gave_a_value():
    """perf's source_count(EVENT): here, how many CPUs or boxes gave EVENT's value (VALUES of
    the per-interval counts), so `x / source_count(x)` is the mean over three L3 boxes."""
    from autoprof.metrics.model import Metric

    formula, symbols = perfexpr.parse("l3_misses / source_count(l3_misses)")
    events = dict(symbols.names) | {a: f"source_count({n})" for a, n in symbols.counted.items()}
    metric = Metric("per_box", formula, events)
    box = _event("l3_misses", "amd_l3")
    frame = synthetic_out.counts_frame([[box]], lambda e: 600.0, intervals=4)
    three = pd.concat([frame.assign(UNIT=f"amd_l3_{i}") for i in range(3)], ignore_index=True)
    computed = analysis.compute(data.prepare(three), [metric], {})["per_box"]
    assert computed.value == pytest.approx(4 * 600.0)  # (4 intervals x 3 boxes x 600) / 3
    assert list(computed.series) == [600.0] * 4
