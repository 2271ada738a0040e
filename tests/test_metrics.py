"""Metrics: the formula evaluator on hand-computed inputs, the perfmon metric catalogs of every
platform, derived events, constants, the TMA tree, and a property test over SKX and SPR."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoprof.catalog import intel
from autoprof.catalog.model import Event
from autoprof.errors import AutoprofError
from autoprof.metrics import catalog as metric_catalog
from autoprof.metrics import constants
from autoprof.metrics.events import modify, resolve
from autoprof.metrics.formula import FormulaError, parse
from autoprof.metrics.plan import metric_needs, smt_constants
from autoprof.metrics.tree import Node, bottleneck_path, tree_lines
from autoprof.testing.cli import one_error_line
from tests.conftest import INTEL_DIR


def test_cpi_and_ipc_by_hand():
    cpi = parse("a / b")
    assert cpi({"a": 3_000_000, "b": 1_500_000}) == 2.0
    ipc = parse("a / ( b )")
    assert ipc({"a": 1_500_000, "b": 3_000_000}) == 0.5
    assert parse("1 / ( a / ( b ) )")({"a": 4, "b": 10}) == pytest.approx(2.5)


def test_min_max_conditional_and_division_by_zero():
    f = parse("max( a - b , 0 ) + min( a , b , 1 ) if a > = b else 7")  # Intel's `> =`
    assert f({"a": 5, "b": 2}) == 4.0
    assert f({"a": 1, "b": 2}) == 7.0
    assert math.isnan(parse("a / b")({"a": 0, "b": 0}))
    assert math.isinf(parse("a / b")({"a": 1, "b": 0}))
    assert math.isnan(parse("#NA if 0 > 2 else NA")({}))
    assert parse("#NA if 0 > 2 else 3 * a")({"a": 2}) == 6.0


def test_threshold_with_and_or():
    fetch = parse("a > 10 & b > 15")  # SKX Fetch_Latency's threshold
    assert fetch({"a": 12, "b": 20}) == 1.0
    assert fetch({"a": 12, "b": 15}) == 0.0
    mux = parse("a > 1.1 | a < 0.9")
    assert mux({"a": 0.5}) and mux({"a": 1.2}) and not mux({"a": 1.0})


def test_arrays_evaluate_per_interval():
    f = parse("(a / 2) if a > b else b")
    out = f({"a": np.array([4.0, 1.0]), "b": np.array([1.0, 3.0])})
    assert list(out) == [2.0, 3.0]


@pytest.mark.parametrize(
    "text",
    ["__import__('os')", "a.b", "a +", "f(a, b)", "a[1]", "'x'", "lambda: 1", "max(a)", ""],
)
def test_malformed_formulas_are_clear_errors(text):
    with pytest.raises(FormulaError):
        parse(text)


def test_missing_value_is_a_clear_error():
    with pytest.raises(FormulaError, match="no value for 'b'"):
        parse("a / b")({"a": 1})


def test_needed_follows_the_branch_constants_choose():
    f = parse("100 * ( a / ( ( 4 ) * ( ( b / 2 ) if smt_on else ( c ) ) ) )")
    assert f.needed({"smt_on": 1}) == {"a", "b"}
    assert f.needed({"smt_on": 0}) == {"a", "c"}
    assert f.needed({}) == {"a", "b", "c", "smt_on"}


def _skx(intel_dir):
    return metric_catalog.load(intel_dir, "SKX").metrics


def test_frontend_bound_smt_on_and_off(intel_dir):
    fe = _skx(intel_dir)["Frontend_Bound"]
    assert fe.events == {
        "a": "IDQ_UOPS_NOT_DELIVERED.CORE",
        "b": "CPU_CLK_UNHALTED.THREAD_ANY",
        "c": "CPU_CLK_UNHALTED.THREAD",
    }
    counts = {"a": 1_000_000, "b": 2_000_000, "c": 1_250_000}
    # SMT on: slots = 4 * THREAD_ANY / 2 = 4,000,000 -> 25 %; off: 4 * THREAD = 5,000,000 -> 20 %
    assert fe.formula({**counts, "smt_on": 1, "threads": 2}) == pytest.approx(25.0)
    assert fe.formula({**counts, "smt_on": 0, "threads": 1}) == pytest.approx(20.0)
    assert fe.threshold({"a": 25.0}) and not fe.threshold({"a": 15.0})
    assert fe.parent is None and fe.level == 1 and "TmaL1" in fe.groups and fe.tma


def test_threshold_names_map_to_metrics(intel_dir):
    metrics = _skx(intel_dir)
    icache = metrics["ICache_Misses"]
    assert icache.parent == "Fetch_Latency"
    assert icache.threshold.text == "a > 5 & b > 10 & c > 15"
    assert icache.threshold_metrics == {
        "a": "ICache_Misses",
        "b": "Fetch_Latency",
        "c": "Frontend_Bound",
    }


def _metric_platforms(intel_dir):
    rows = intel.read_mapfile(intel_dir)
    return sorted({r.platform for r in rows if r.kind == "metrics"})


@pytest.mark.slow
def test_every_platform_parses_and_resolves(intel_dir):
    """Every formula and threshold parses; every event resolves, except retire latencies
    (sampled by perf record; GNR ships their means, which stand in) and Lunar Lake's socket
    clock (no kernel PMU counts it: the catalog left it out and says why)."""
    unresolved = {}
    for platform in _metric_platforms(intel_dir):
        metrics = metric_catalog.load(intel_dir, platform)
        events = intel.load(
            intel_dir, platform, intel.IntelOptions(deprecated=True, experimental=True)
        )
        retire = metric_catalog.retire_latencies(intel_dir, platform)
        for smt in (True, False):
            for needs in metric_needs(
                list(metrics.metrics.values()), events, smt_constants(smt), retire
            ):
                for reason in needs.missing:
                    unresolved.setdefault(platform, set()).add(reason)
                    if platform == "LNL" and reason.startswith("UNC_CLOCK.SOCKET: left out"):
                        assert "uncore_snb.c:750" in reason
                        continue
                    assert "retire latency" in reason, (platform, needs.metric.name, reason)
    assert "SKX" not in unresolved and "SPR" not in unresolved
    # GNR's retire-latency file stands in for all but two of the events its metrics sample
    assert {r.split(":")[0] for r in unresolved["GNR"]} == {
        "MEM_INST_RETIRED.STLB_MISS_LOADS",
        "MEM_INST_RETIRED.STLB_MISS_STORES",
    }
    assert {"MTL", "LNL", "ARL"} <= set(unresolved)


def test_retire_latencies_of_a_cpu_intel_does_not_know_are_none(intel_dir):
    """An AMD machine's metric plan (with files of one's own) has no retire latencies to
    look up, instead of failing on the Intel mapfile."""
    assert metric_catalog.retire_latencies(intel_dir, "GNR")
    assert metric_catalog.retire_latencies(intel_dir, "AuthenticAMD-26-2-1") == {}


def _base(name="ICACHE_16B.IFDATA_STALL"):
    return Event(
        name=name,
        pmu="cpu",
        style="core",
        code=0x80,
        umask=0x4,
        counters=frozenset({0, 1, 2, 3}),
    )


def test_modifiers_become_perf_terms_with_the_base_constraints():
    edge = modify(_base(), "ICACHE_16B.IFDATA_STALL:c1:e1", ["c1", "e1"])
    assert (
        edge.spec == "cpu/event=0x80,umask=4,cmask=1,edge=1,name='ICACHE_16B.IFDATA_STALL:c1:e1'/"
    )
    assert edge.counters == frozenset({0, 1, 2, 3}) and edge.name == "ICACHE_16B.IFDATA_STALL:c1:e1"
    assert modify(_base(), "X:SUP", ["SUP"]).spec.endswith("/k")
    assert modify(_base(), "X:USER", ["USER"]).spec.endswith("/u")
    assert "umask=0xfc" in modify(_base(), "X:u0xfc", ["u0xfc"]).spec
    assert "umask=4" not in modify(_base(), "X:u0xfc", ["u0xfc"]).spec
    assert "cmask=1,inv=1" in modify(_base(), "X:i1:c1", ["i1", "c1"]).spec
    cha = Event("UNC_CHA_TOR_INSERTS.IA_MISS", "uncore_cha", style="uncore", code=0x35, umask=0x21)
    assert "config1=0x4043300000000" in modify(cha, "T:filter1=0x40433", ["filter1=0x40433"]).spec
    ocr = Event(
        "OCR.X",
        "cpu",
        style="core",
        code=0x2A,
        umask=0x1,
        msr_value=0x1,
        registers=frozenset({"0x1a6"}),
    )
    derived = modify(ocr, "OCR.X:ocr_msr_val=0x103b800002", ["ocr_msr_val=0x103b800002"])
    assert "offcore_rsp=0x103b800002" in derived.spec and derived.registers == ocr.registers


def test_perf_own_events_and_topdown(intel_dir):
    spr = intel.load(intel_dir, "SPR")
    tsc = resolve("TSC", spr)
    assert tsc.event.spec == "msr/tsc/" and tsc.event.pmu == "msr"
    energy = resolve("FREERUN_PKG_ENERGY_STATUS", spr)
    assert energy.event.spec == "power/energy-pkg/" and energy.factor == pytest.approx(1 / 61e-6)
    fe = resolve("PERF_METRICS.FRONTEND_BOUND", spr)
    assert fe.event.spec == "cpu/event=0,umask=0x82,name=PERF_METRICS.FRONTEND_BOUND/"
    assert fe.event.leader == "TOPDOWN.SLOTS"  # perf gets {slots,...} as one group
    slots = resolve("TOPDOWN.SLOTS:perf_metrics", spr)
    assert slots.event.name == "TOPDOWN.SLOTS" and slots.event.fixed == 3
    assert resolve("NO_SUCH.EVENT:c1", spr).missing
    with pytest.raises(ValueError, match="no modifiers apply"):
        modify(Event("task-clock", "software"), "task-clock:c1", ["c1"])


def test_constants_from_machine_facts_and_sets():
    topology = [
        {"cpu": c, "socket": c // 4, "core": (c % 4) // 2, "node": c // 4} for c in range(8)
    ]
    values = constants.from_machine({"smt": True, "topology": topology})
    assert values[constants.SOCKETS] == 2 and values[constants.CORES] == 2
    assert values[constants.THREADS] == 2 and values[constants.SMT] == 1
    assert values[constants.CPUS] == 8
    assert constants.from_machine(None) == {}
    assert constants.from_machine({"smt": False})[constants.THREADS] == 1
    sets = constants.parse_sets(["SYSTEM_TSC_FREQ=2.1e9", "HYPERTHREADING_ON=off"])
    assert sets == {"SYSTEM_TSC_FREQ": 2.1e9, "HYPERTHREADING_ON": 0.0, "THREADS_PER_CORE": 1.0}
    with pytest.raises(AutoprofError, match="NAME=VALUE"):
        constants.parse_sets(["nonsense"])
    with pytest.raises(AutoprofError, match="not a number"):
        constants.parse_sets(["X=abc"])


def test_tsc_frequency_and_chas_come_from_the_machine(tmp_path):
    """SYSTEM_TSC_FREQ from the CPU's name (perf's fallback) or intel_pstate's base frequency,
    CHAS_PER_SOCKET from the uncore_cha_N PMUs; recorded in the machine facts."""
    from dataclasses import asdict

    from autoprof.catalog import machine

    xeon = "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz"
    assert machine.tsc_hz(xeon, tmp_path) == 2.1e9
    assert machine.tsc_hz("AMD EPYC", tmp_path) is None
    cpufreq = tmp_path / "cpu" / "cpu0" / "cpufreq"
    cpufreq.mkdir(parents=True)
    (cpufreq / "base_frequency").write_text("2300000\n")  # kHz
    assert machine.tsc_hz("13th Gen Intel(R) Core(TM) i7-1365U", tmp_path) == 2.3e9
    pmus = tmp_path / "pmus"
    for name in ("uncore_cha_0", "uncore_cha_1", "uncore_cha_2", "uncore_imc_0", "cpu"):
        (pmus / name).mkdir(parents=True)
    assert machine.chas_per_socket(pmus) == 3
    assert machine.chas_per_socket(tmp_path / "cpu") is None
    facts = machine.read_facts()
    assert facts.tsc_hz == machine.tsc_hz() and facts.chas_per_socket == machine.chas_per_socket()
    known = constants.from_machine(asdict(facts) | {"tsc_hz": 2.1e9, "chas_per_socket": 28})
    assert (known[constants.TSC], known[constants.CHAS]) == (2.1e9, 28.0)


def test_tree_shows_children_under_crossed_parents_and_the_bottleneck_path():
    nodes = [
        Node("Frontend_Bound", None, 40.0, "percent", True),
        Node("Backend_Bound", None, 20.0, "percent", True),
        Node("Retiring", None, 30.0, "percent", False),
        Node("Fetch_Latency", "Frontend_Bound", 30.0, "percent", True),
        Node("Fetch_Bandwidth", "Frontend_Bound", 10.0, "percent", False),
        Node("Memory_Bound", "Backend_Bound", 15.0, "percent", True),
        Node("ICache_Misses", "Fetch_Latency", 120.0, "percent", False, flag="outside 0-100%"),
        Node("Store_Bound", "Retiring", 1.0, "percent", True),
    ]
    assert bottleneck_path(nodes) == ["Frontend_Bound", "Fetch_Latency"]
    text = "\n".join(tree_lines(nodes))
    assert "Fetch_Latency" in text and "Memory_Bound" in text and "ICache_Misses" in text
    assert "Store_Bound" not in text  # its parent did not cross its threshold
    assert "outside 0-100%" in text and "<==" in text.split("Fetch_Latency")[1].splitlines()[0]


def test_yaml_metric_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {name: X, formula: 'a / ', events: {a: task-clock}}\n")
    with pytest.raises(FormulaError, match="does not parse"):
        metric_catalog.load_yaml(bad)
    bad.write_text("- {name: X, formula: 'a / b', events: {a: task-clock}}\n")
    with pytest.raises(AutoprofError, match="undefined"):
        metric_catalog.load_yaml(bad)


@pytest.fixture(scope="module")
def random_inputs():
    if not (INTEL_DIR / "mapfile.csv").is_file():
        pytest.skip(f"Intel perfmon data not found at {INTEL_DIR}")
    metrics = []
    for platform in ("SKX", "SPR"):
        metrics += list(metric_catalog.load(INTEL_DIR, platform).metrics.values())
    names = sorted(
        {a for m in metrics for a in m.events} | {c for m in metrics for c in m.constants.values()}
    )
    return metrics, names


@pytest.mark.slow  # every metric of two large catalogs, hypothesis counts
@settings(max_examples=30, deadline=None)
@given(
    counts=st.lists(st.integers(0, 10**13), min_size=64, max_size=64),
    smt=st.booleans(),
    seconds=st.floats(0.001, 1000),
)
def test_every_skx_and_spr_metric_evaluates_on_random_counts(random_inputs, counts, smt, seconds):
    metrics, _ = random_inputs
    known = {
        **smt_constants(smt),
        constants.SOCKETS: 2.0,
        constants.CORES: 28.0,
        constants.CHAS: 28.0,
        constants.TSC: 2.1e9,
        constants.CPUS: 112.0,
        constants.DURATION_MS: seconds * 1000,
        constants.DURATION_S: seconds,
    }
    values = {}
    for m in metrics:
        inputs = {a: float(counts[i % len(counts)]) for i, a in enumerate(sorted(m.events))}
        inputs.update(constants.for_metric(m.constants, known))
        value = m.formula(inputs)
        assert isinstance(value, float)
        values[m.name] = value
    for m in metrics:
        if m.threshold is not None:
            m.threshold({a: values[name] for a, name in m.threshold_metrics.items()})


def test_a_cpu_without_metrics_points_at_the_shipped_software_metrics(cli_run):
    line = one_error_line(cli_run("schedule", "--cpu", "a64fx", "--metrics", "all"))
    assert "--metrics-file software" in line
    here = cli_run("schedule", "--metrics", "all", "--metrics-file", "software")
    assert here.returncode == 0, here.stderr  # this machine's software events
