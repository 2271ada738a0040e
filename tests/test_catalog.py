"""Catalog loaders against the real Intel perfmon data, autoprof's YAML, and the live host."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from autoprof.catalog import host, intel, machine, yaml
from autoprof.catalog.intel import IntelOptions
from autoprof.errors import AutoprofError


def test_skylake_x_core_and_uncore(intel_dir):
    cat = intel.load(intel_dir, "GenuineIntel-6-55-4")
    assert cat.pmus["cpu"].generic == 4 and cat.pmus["cpu"].fixed == 3
    assert any(p.startswith("uncore_cha") for p in cat.pmus)
    inst = cat.find("INST_RETIRED.ANY")[0]
    assert inst.fixed == 0 and not inst.counters
    assert inst.spec == "cpu/event=0xc0,name=INST_RETIRED.ANY/"  # perf's code, not 0x0100
    offcore = [e for e in cat.events if e.registers == {"0x1a6", "0x1a7"}]
    assert offcore and all("offcore_rsp=" in e.spec for e in offcore)
    assert all(x.reason in (intel.DEPRECATED, intel.EXPERIMENTAL) for x in cat.excluded)
    assert not any(e.deprecated or e.experimental for e in cat.events)


def test_stepping_selects_the_platform(intel_dir):
    # Skylake-X and Cascade Lake share model 0x55 and differ by stepping.
    skx = intel.rows_for_cpu(intel_dir, "GenuineIntel-6-55-4")
    clx = intel.rows_for_cpu(intel_dir, "GenuineIntel-6-55-7")
    assert {r.platform for r in skx} == {"SKX"}
    assert {r.platform for r in clx} == {"CLX"}


def test_smt_off_reserve_and_opt_ins(intel_dir):
    on = intel.load(intel_dir, "SKX")
    off = intel.load(intel_dir, "SKX", IntelOptions(smt=False))
    assert off.pmus["cpu"].generic == 8 > on.pmus["cpu"].generic
    reserved = intel.load(intel_dir, "SKX", IntelOptions(reserve=1)).pmus["cpu"]
    assert (reserved.generic, reserved.reserved, reserved.counters) == (3, 1, 4)
    everything = intel.load(intel_dir, "SKX", IntelOptions(experimental=True, deprecated=True))
    assert len(everything.events) == len(on.events) + len(on.excluded)
    assert not everything.excluded


def test_hybrid_and_matrix(intel_dir):
    adl = intel.load(intel_dir, "GenuineIntel-6-97-2")
    assert {"cpu_core", "cpu_atom"} <= set(adl.pmus)
    assert adl.find("cpu_atom/INST_RETIRED.ANY")[0].spec.startswith("cpu_atom/")
    plain = intel.load(intel_dir, "SNB")
    matrix = intel.load(intel_dir, "SNB", IntelOptions(offcore_matrix=True))
    raw = json.loads((intel_dir / "SNB/events/sandybridge_matrix.json").read_text())["Events"]
    requests = [r["MATRIX_REQUEST"] for r in raw if r["MATRIX_RESPONSE"] == "Null"]
    responses = [r["MATRIX_RESPONSE"] for r in raw if r["MATRIX_REQUEST"] == "Null"]
    combos = {f"OFFCORE_RESPONSE.{q}.{p}" for q in requests for p in responses}
    names = {e.name for e in matrix.events}
    assert combos <= names and not combos <= {e.name for e in plain.events}
    combo = matrix.find("OFFCORE_RESPONSE.DEMAND_DATA_RD.LLC_MISS.ANY_DRAM")[0]
    # responses go above the request's 16 bits, as the core file's own combined events show
    assert combo.registers == {"0x1a6", "0x1a7"} and "offcore_rsp=0x67fc00001" in combo.spec


def test_unknown_cpu_lists_close_matches(intel_dir):
    with pytest.raises(AutoprofError, match=r"close matches: .*GenuineIntel-6-"):
        intel.load(intel_dir, "GenuineIntel-6-FE-1")


def _one_platform_copy(intel_dir: Path, tmp_path: Path, text: str | None) -> Path:
    (tmp_path / "SKL" / "events").mkdir(parents=True)
    rows = [
        r
        for r in (intel_dir / "mapfile.csv").read_text().splitlines()
        if r.startswith("Family") or "/SKL/events/skylake_core.json" in r
    ]
    (tmp_path / "mapfile.csv").write_text("\n".join(rows) + "\n")
    if text is not None:
        (tmp_path / "SKL" / "events" / "skylake_core.json").write_text(text)
    return tmp_path


def test_malformed_and_missing_json(intel_dir, tmp_path):
    broken = _one_platform_copy(intel_dir, tmp_path / "a", '{"Events": [ {"EventName": ')
    with pytest.raises(AutoprofError, match="malformed JSON"):
        intel.load(broken, "SKL")
    missing = _one_platform_copy(intel_dir, tmp_path / "b", None)
    with pytest.raises(AutoprofError, match="missing event file"):
        intel.load(missing, "SKL")
    wrong = _one_platform_copy(intel_dir, tmp_path / "c", json.dumps({"Events": "nope"}))
    with pytest.raises(AutoprofError, match="malformed event file"):
        intel.load(wrong, "SKL")


def test_cli_errors_are_one_line(intel_dir, tmp_path, cli_run):
    broken = _one_platform_copy(intel_dir, tmp_path, "not json")
    cases = [
        ["schedule", "--events-dir", str(intel_dir), "--cpu", "GenuineIntel-6-99-1"],
        ["schedule", "--events-dir", str(broken), "--cpu", "SKL"],
        ["schedule", "-e", "NO_SUCH_EVENT"],
        ["schedule", "--events-dir", str(tmp_path / "nowhere")],
    ]
    for args in cases:
        proc = cli_run(*args)
        assert proc.returncode == 2, args
        assert proc.stderr.startswith("autoprof: error: ") and proc.stderr.count("\n") == 1
        assert "Traceback" not in proc.stderr


def test_builtin_yaml_and_malformed_yaml(tmp_path):
    software = yaml.load_builtin("software")
    assert software.pmus["software"].unconstrained
    assert {"task-clock", "page-faults", "context-switches"} <= {e.name for e in software.events}
    bad = tmp_path / "bad.yaml"
    bad.write_text("pmu: {name: x}\nevents: [ {description: no name} ]\n")
    with pytest.raises(AutoprofError, match="malformed YAML"):
        yaml.load_file(bad)


def test_cpu_id_format():
    cpuinfo = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nstepping\t: 4\n"
    assert machine.cpu_id(cpuinfo) == "GenuineIntel-6-55-4"


@pytest.mark.skipif(not Path("/sys/bus/event_source/devices").is_dir(), reason="no sysfs PMUs")
def test_live_host_catalog():
    cat = host.host_catalog()
    assert "software" in cat.pmus and cat.find("task-clock")
    assert cat.pmus["breakpoint"].generic >= 1
    points = host.tracepoints()
    if points:
        chosen = host.resolve_events(cat, [points[0], "mem:0x1000:w"])
        assert [e.pmu for e in chosen.events] == ["tracepoint", "breakpoint"]
    with pytest.raises(AutoprofError, match="malformed breakpoint"):
        host.resolve_events(cat, ["mem:zzz"])


@pytest.mark.needs_perf
def test_software_catalog_matches_perf():
    """Every software event we ship is one perf knows by that name."""
    listed = subprocess.run(["perf", "list", "sw"], capture_output=True, text=True).stdout
    for event in yaml.load_builtin("software").events:
        assert event.name in listed, event.name


def test_events_of_pmus_this_machine_lacks_are_left_out_with_the_reason(intel_dir, tmp_path):
    """An ARL-S has no cpu_lowpower (ARL-H's low-power E-cores): perf would refuse those
    events in every run. A PMU is found by its name or its numbered boxes, as perf finds it."""
    arl = intel.load(intel_dir, "ARL")
    for name in ("cpu_core", "cpu_atom", "uncore_cncu", "uncore_hac_arb_0", "uncore_hac_cbox_0",
                 "uncore_hac_cbox_1", "uncore_imc_free_running_0", "software", "msr"):  # fmt: skip
        (tmp_path / name).mkdir()
    kept = host.without_absent_pmus(arl, tmp_path)
    gone = {"cpu_lowpower", "uncore_imc", "uncore_imc_free_running_1"}
    assert {e.pmu for e in kept.events} == set(arl.pmus) - gone == set(kept.pmus)
    left_out = [x for x in kept.excluded if str(tmp_path) in x.reason]
    assert {x.pmu for x in left_out} == gone
    assert len(left_out) == sum(e.pmu in gone for e in arl.events) > 100
    with pytest.raises(AutoprofError, match=r"cpu_lowpower/INST_RETIRED\.ANY is left out"):
        kept.select(["cpu_lowpower/INST_RETIRED.ANY"])
    assert {e.pmu for e in kept.find("INST_RETIRED.ANY")} == {"cpu_core", "cpu_atom"}
    # a kernel that shows none of the catalog's PMUs (a VM without counters) keeps it whole
    assert host.without_absent_pmus(arl, tmp_path / "none") is arl


def test_an_event_left_out_is_named_with_its_reason(intel_dir):
    skx = host.host_catalog(intel_dir, "SKX")
    deprecated = next(x for x in skx.excluded if x.pmu == "cpu" and x.reason == intel.DEPRECATED)
    with pytest.raises(AutoprofError) as err:
        skx.select([deprecated.name])
    assert str(err.value) == (
        f"cpu/{deprecated.name} is left out for {skx.cpu}: deprecated (--deprecated keeps it)"
    )


def test_intel_uncore_is_system_wide_as_amds(intel_dir, cli_run):
    """The kernel gives uncore PMUs no task context (perf_invalid_context): a profile of a
    command leaves Intel's uncore events out with the reason, as AMD's L3/DF/UMC; -a counts
    them; one named by -e is refused in one line; `schedule` says which PMUs those are."""
    from autoprof.run.options import ProfileOptions
    from autoprof.run.planning import plan_catalog
    from autoprof.run.request import Request

    whole_system = Request(options=ProfileOptions(system_wide=True))

    skx = intel.load(intel_dir, "SKX")
    wide = {n for n, p in skx.pmus.items() if p.system_wide}
    assert wide == {n for n in skx.pmus if n.startswith("uncore_")} and "uncore_cha" in wide
    task = plan_catalog(skx, Request()).catalog
    assert {e.pmu for e in task.events} == {"cpu"}
    left = [x for x in task.excluded if x.reason == "system-wide only: profile -a counts it"]
    uncore = [e for e in skx.events if e.pmu in wide]
    assert {x.pmu for x in left} == {e.pmu for e in uncore} and len(left) == len(uncore)
    whole = plan_catalog(skx, whole_system).catalog
    assert {e.pmu for e in whole.events} == {e.pmu for e in skx.events}
    with pytest.raises(AutoprofError, match=r"uncore_imc counts system-wide only.*with -a"):
        plan_catalog(skx, Request(events=["UNC_M_CAS_COUNT.RD"]))
    for flags, start in ((["-a"], "system-wide only: "), ([], "system-wide only, left out: ")):
        shown = cli_run("schedule", "--cpu", "SKX", *flags)
        assert shown.returncode == 0, shown.stderr
        [line] = [ln for ln in shown.stdout.splitlines() if ln.startswith(start)]
        assert "uncore_cha" in line and "cpu," not in line and "profile -a or --cpu-list" in line
