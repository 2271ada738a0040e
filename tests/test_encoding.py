"""autoprof's event strings against perf's own encoding of the same perfmon data.

`tests/data/perf-encodings/<platform>.json.xz` holds the JSON Linux ships (create_perf_json.py's
output, only the compared fields: `perf_reference.compact` of ../shared/perf-encodings);
`autoprof/testing/perf_reference.py` rebuilds perf's strings from it by jevents.py's rules.
Every event must give the same terms (labels `name=`/`period=` aside), or differ for one of the
reasons `perf_reference.justification` lists, where the kernel's format wins over the converter.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from autoprof.catalog import encoding, formats, host, intel, machine
from autoprof.catalog.model import Event
from autoprof.errors import AutoprofError
from autoprof.testing import perf_reference
from tests.conftest import REPO
from tests.helpers import skl_catalog_copy

ENCODINGS = REPO / "tests" / "data" / "perf-encodings"
PLATFORMS = perf_reference.SHIPPED
EVERYTHING = intel.IntelOptions(experimental=True, deprecated=True)
# Names create_perf_json adds from its uncore CSV (aliases of perfmon events, not in perfmon).
PERF_ONLY = {"LLC_MISSES.PCIE_READ", "LLC_MISSES.PCIE_WRITE", "LLC_MISSES.MEM_READ"}
PERF_ONLY |= {"LLC_MISSES.MEM_WRITE"}


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_strings_match_perfs_own_encoding(intel_dir, platform):
    folder = ENCODINGS / PLATFORMS[platform]
    catalog = intel.load(intel_dir, platform, EVERYTHING)
    result = perf_reference.compare(catalog.events, perf_reference.shipped(folder))
    assert result["different"] == []
    no_kernel_pmu = {x.name for x in catalog.excluded if x.reason.startswith("no kernel PMU")}
    assert {name for _, name in result["missing"]} <= PERF_ONLY | no_kernel_pmu
    assert result["equal"] > 0.95 * len(catalog.events)  # SPR: ~100 umask_wide raw configs
    allowed = {"umask_ext", "occ_sel", "iio_masks", "extsel", "clock_pmu"}
    allowed |= {"filter1", "umask_wide", "generic_ref", "state_filter"}
    assert set(result["justified"]) <= allowed


def test_reference_converter_reproduces_the_shipped_json(intel_dir):
    """The create_perf_json rules the other platforms are checked with give, on SKX, the very
    terms Linux ships (but for the PCU umask, which the shipped, older converter kept)."""
    folder = ENCODINGS / "skylakex"
    shipped = {
        j["EventName"]: perf_reference.jevents_terms(j) for j in perf_reference.shipped(folder)
    }
    rebuilt = perf_reference.converted(intel_dir, "SKX")
    differ = [
        j["EventName"]
        for j in rebuilt
        if encoding.counted(perf_reference.jevents_terms(j)[1])
        != encoding.counted(shipped[j["EventName"]][1])
    ]
    assert len(rebuilt) == len(shipped) - len(PERF_ONLY & set(shipped))
    assert differ and all(name.startswith("UNC_P_POWER_STATE_OCCUPANCY") for name in differ)


def test_issue_examples(intel_dir):
    """The strings issue #10 names: fixed counters, UMaskExt, Filter1, uncore fixed and
    free-running counters, client cmask, the Goldmont offcore matrix."""
    skx = intel.load(intel_dir, "SKX", EVERYTHING)
    spec = {e.name: e.spec for e in skx.events}
    assert spec["INST_RETIRED.ANY"] == "cpu/event=0xc0,name=INST_RETIRED.ANY/"
    assert spec["CPU_CLK_UNHALTED.THREAD"].startswith("cpu/event=0x3c,name=")
    assert spec["UNC_CHA_TOR_INSERTS.IA_HIT_DRD"] != spec["UNC_CHA_TOR_INSERTS.IA_HIT_CRD"]
    assert "config1=0x4023300000000" in spec["UNC_CHA_TOR_INSERTS.IA_HIT_CRD"]  # Filter1 << 32
    assert spec["UNC_U_CLOCKTICKS"] == "uncore_ubox/event=0xff,name=UNC_U_CLOCKTICKS/"
    assert spec["UNC_M_CLOCKTICKS_F"].startswith("uncore_imc/event=0xff,name=")
    icx = {e.name: e for e in intel.load(intel_dir, "ICX", EVERYTHING).events}
    assert "umask_ext" not in icx["UNC_CHA_LLC_LOOKUP.ANY_F"].spec
    assert icx["UNC_CHA_LLC_LOOKUP.ANY_F"].umask == 0x2000  # UMaskExt 0x20 with UMask 0
    freerun = [e for e in icx.values() if e.name.endswith("_FREERUN")]
    assert len({e.spec.split(",name=")[0] for e in freerun}) == len(freerun)
    assert icx["UNC_IIO_BANDWIDTH_IN.PART3_FREERUN"].spec.startswith(
        "uncore_iio_free_running/event=0xff,umask=0x23,"
    )
    adl = {e.name: e.spec for e in intel.load(intel_dir, "ADL", EVERYTHING).events}
    assert adl["UNC_CLOCK.SOCKET"] == "uncore_clock/event=0xff,name=UNC_CLOCK.SOCKET/"
    assert adl["UNC_MC1_RDCAS_COUNT_FREERUN"].startswith("uncore_imc_free_running_1/event=0xff,")
    skl = {e.name: e.spec for e in intel.load(intel_dir, "SKL", EVERYTHING).events}
    assert skl["UNC_CLOCK.SOCKET"].startswith("uncore_cbox_0/event=0xff,")
    assert "cmask=1," in skl["UNC_ARB_TRK_OCCUPANCY.CYCLES_WITH_ANY_REQUEST"]  # client: cmask
    # ExtSel: bit 8 of event= where the kernel's format is config:0-7,21; excluded where no
    # term carries it and the event mask drops bit 21 (JKT's UBOX and PCU, IVT's PCU)
    hsx = {e.name: e.spec for e in intel.load(intel_dir, "HSX", EVERYTHING).events}
    assert hsx["UNC_Q_CTO_COUNT"] == "uncore_qpi/event=0x138,name=UNC_Q_CTO_COUNT/"
    for platform, name in (("JKT", "UNC_U_MSG_CHNL_SIZE_COUNT.4B"),
                           ("IVT", "UNC_P_DELAYED_C_STATE_ABORT_CORE0")):  # fmt: skip
        catalog = intel.load(intel_dir, platform, EVERYTHING)
        dropped = {x.name for x in catalog.excluded if "bit 21" in x.reason}
        assert name in dropped and not dropped & {e.name for e in catalog.events}
    glm = intel.load(intel_dir, "GLM", intel.IntelOptions(offcore_matrix=True))
    matrix = {e.name: e for e in glm.events}
    core = {e.name: e for e in intel.load(intel_dir, "GLM").events}
    combined = [n for n in core if n.startswith("OFFCORE_RESPONSE.") and n in matrix]
    assert combined
    assert all(matrix[n].msr_value == core[n].msr_value for n in combined)
    # arch perfmon v6 cores: UMaskExt is umask's high byte (the kernel's umask format there is
    # config:8-15,40-47, core.c umask2_show; no kernel has a `umask2` term)
    lnl = {e.name: e.spec for e in intel.load(intel_dir, "LNL", EVERYTHING).events}
    assert lnl["DTLB_LOAD_MISSES.STLB_HIT"].startswith("cpu_core/event=0x12,umask=0x320,")
    assert not any("umask2" in spec for spec in lnl.values())


LLC_STATES = {"JKT": 0x1F, "IVT": 0x3F, "HSX": 0x7F, "BDX": 0x7F, "SKX": 0x3FF, "CLX": 0x3FF}


@pytest.mark.parametrize("platform", sorted(LLC_STATES))
def test_llc_lookups_carry_the_states_they_mean(intel_dir, platform):
    """ "One must ALWAYS ... select a state or states to match. Otherwise, the event will count
    nothing" (Intel): every LLC lookup of a state-filtered box asks for every state of its
    Filter's range the kernel's filter_state holds (uncore_snbep.c: JKT config1:18-22, IVT
    17-22, HSX/BDX 17-23, SKX/CLX 17-26)."""
    catalog = intel.load(intel_dir, platform, EVERYTHING)
    lookups = [e for e in catalog.events if "_LLC_LOOKUP." in e.name]
    assert len(lookups) >= 4
    for event in lookups:
        # HSX/BDX UNC_C_LLC_LOOKUP.READ's Filter is CBoFilter0[22:18]: the states of 18-22
        states = 0x3E if event.name == "UNC_C_LLC_LOOKUP.READ" else LLC_STATES[platform]
        assert f"filter_state={states:#x}," in event.spec, event.spec
    # the node filter of JKT's victims and TOR events is not a state range
    if platform == "JKT":
        nid = next(e for e in catalog.events if e.name == "UNC_C_LLC_VICTIMS.NID")
        assert "filter_state" not in nid.spec


def test_jkt_pcu_extsel_follows_the_live_kernels_format(intel_dir, tmp_path, monkeypatch):
    """Today's kernel has no event_ext on SNB-EP's PCU (snbep_uncore_pcu_formats_attr is event
    config:0-7; its raw event mask has no bit 21): perf refuses event=0x103, so the 12 ExtSel
    events are left out with that reason. An older kernel whose uncore_pcu/format/event is
    config:0-7,21 counts them: planning for such a machine, its live format keeps them."""
    name = "UNC_P_CORE0_TRANSITION_CYCLES"
    jkt = intel.load(intel_dir, "JKT", EVERYTHING)
    pcu = [x for x in jkt.excluded if x.pmu == "uncore_pcu" and "ExtSel" in x.reason]
    assert len(pcu) == 12 and name in {x.name for x in pcu}
    assert "value too big for format, maximum is 255" in pcu[0].reason
    old = intel.load(intel_dir, "JKT", dataclasses.replace(EVERYTHING, event_ext=("uncore_pcu",)))
    assert {e.name: e.spec for e in old.events}[name] == f"uncore_pcu/event=0x103,name={name}/"

    tree = tmp_path / "devices"
    shutil.copytree(REPO / "tests" / "data" / "kernel-formats" / "JKT", tree)
    assert formats.event_ext_pmus(tree) == ("uncore_qpi",)  # the QPI boxes' event_ext only
    monkeypatch.setattr(machine, "cpu_id", lambda: intel.platform_cpu_ids(intel_dir)["JKT"])
    monkeypatch.setattr(host, "SYSFS_PMUS", tree)
    today = host.host_catalog(intel_dir, options=EVERYTHING)
    assert name in {x.name for x in today.excluded} - {e.name for e in today.events}
    (tree / "uncore_pcu" / "format" / "event").write_text("config:0-7,21\n")
    assert formats.event_ext_pmus(tree) == ("uncore_pcu", "uncore_qpi")
    older = host.host_catalog(intel_dir, options=EVERYTHING)
    assert f"uncore_pcu/event=0x103,name={name}/" in {e.spec for e in older.events}


def test_lunar_lakes_socket_clock_has_no_pmu_and_spr_keeps_iios_umaskext(intel_dir):
    """LNL's kernel has no uncore_cncu (lnl_msr_uncores is cbox and arb only): its
    UNC_CLOCK.SOCKET is left out with the reason, while PTL's kernel counts it on cncu; SPR/EMR
    UNC_IIO_NUM_TGT_MATCHED_REQ_OF_CPU asks for its UMaskExt 0x70000: fc_mask 7."""
    lnl = intel.load(intel_dir, "LNL", EVERYTHING)
    assert "UNC_CLOCK.SOCKET" not in {e.name for e in lnl.events}
    [why] = [x.reason for x in lnl.excluded if x.name == "UNC_CLOCK.SOCKET"]
    assert "lnl_msr_uncores" in why and "no cncu" in why
    ptl = {e.name: e.spec for e in intel.load(intel_dir, "PTL", EVERYTHING).events}
    assert ptl["UNC_CLOCK.SOCKET"].startswith("uncore_cncu/event=0xff,")
    for platform in ("SPR", "EMR"):
        spec = {e.name: e.spec for e in intel.load(intel_dir, platform, EVERYTHING).events}
        assert spec["UNC_IIO_NUM_TGT_MATCHED_REQ_OF_CPU"] == (
            "uncore_iio/event=0x8f,fc_mask=7,name=UNC_IIO_NUM_TGT_MATCHED_REQ_OF_CPU/"
        )


def test_modifiers_derive_their_own_string():
    """`dataclasses.replace` on the encoding fields gives the string of the derived event."""
    base = Event("X.Y", "cpu", style=encoding.CORE, code=0xA3, umask=0x4)
    derived = dataclasses.replace(base, name="X.Y:c1:e1", cmask=1, edge=True)
    assert derived.spec == "cpu/event=0xa3,umask=4,cmask=1,edge=1,name='X.Y:c1:e1'/"
    assert derived.label == "X.Y:c1:e1"
    uncore = dataclasses.replace(base, pmu="uncore_cha", style=encoding.UNCORE, cmask=2)
    assert "thresh=2" in uncore.spec


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("EventName", 5, "malformed event 5 in "),
        ("EventCode", "zz", "malformed event 'INST_RETIRED.ANY_P' in "),
    ],
)
def test_malformed_catalog_is_one_line(tmp_path, intel_dir, field, value, message):
    def mutate(events):
        target = next(e for e in events if e.get("EventName") == "INST_RETIRED.ANY_P")
        target[field] = value

    directory = skl_catalog_copy(tmp_path, intel_dir, mutate)
    with pytest.raises(AutoprofError) as err:
        intel.load(directory, "SKL")
    assert message in str(err.value)
    assert "skylake_core.json" in str(err.value)
    assert "\n" not in str(err.value)


def test_topdown_metrics_follow_slots_in_one_group(intel_dir):
    """On SPR every PERF_METRICS event sits in the run of TOPDOWN.SLOTS, after it, and perf
    gets them as one group led by slots; the plan still meets its lower bound."""
    from autoprof.schedule import schedule

    catalog = intel.load(intel_dir, "SPR")
    metrics = [e for e in catalog.events if e.name.startswith("PERF_METRICS.")]
    assert len(metrics) == 8 and all(e.leader == "TOPDOWN.SLOTS" for e in metrics)
    plan = schedule(catalog)
    assert len(plan) == plan.lower_bound
    runs = [run for run in plan.runs if any(e.leader for e in run.events)]
    assert len(runs) == 1
    names = [e.name for e in runs[0].events]
    assert all(names.index("TOPDOWN.SLOTS") < names.index(m.name) for m in metrics)
    groups = [arg for arg in runs[0].perf_events() if arg.startswith("{")]
    assert len(groups) == 1
    slots = next(e for e in catalog.events if e.name == "TOPDOWN.SLOTS")
    assert groups[0].startswith("{" + slots.spec + ",")
    assert all(m.spec in groups[0] for m in metrics)
    assert plan.to_json()["runs"][plan.runs.index(runs[0])]["perf_events"] == runs[0].perf_events()
    # asking for one metric brings its leader into the plan
    one = schedule(catalog.select(["PERF_METRICS.RETIRING"]))
    assert [e.name for e in one.runs[0].events] == ["TOPDOWN.SLOTS", "PERF_METRICS.RETIRING"]
    assert one.runs[0].perf_events() == ["{" + slots.spec + "," + metrics[0].spec + "}"]
    # Ice Lake has the first four metrics only
    icl = [e.umask for e in intel.load(intel_dir, "ICL").events if e.leader]
    assert icl == [0x80, 0x81, 0x82, 0x83]


@pytest.mark.skipif(
    shutil.which("perf") is None
    or not Path("/sys/bus/event_source/devices/msr/events/tsc").exists(),
    reason="needs perf and the msr PMU (msr/tsc/)",
)
def test_perf_takes_the_strings_and_groups(tmp_path):
    """perf itself parses encoding's strings (a quoted name= for names with ':') and a
    perf_event_args group with its leader first; it prints the names back unquoted."""
    from autoprof.perf import stat_csv
    from autoprof.schedule.plan import perf_event_args

    lead = Event("TSC.LEAD", "msr", style=encoding.RAW, terms=(("event", 0),))
    member = dataclasses.replace(lead, name="TSC.MEMBER:x", leader="TSC.LEAD")
    args = perf_event_args([member, lead])
    assert args == ["{msr/event=0,name=TSC.LEAD/,msr/event=0,name='TSC.MEMBER:x'/}"]
    out = tmp_path / "perf.csv"
    argv = ["perf", "stat", "-x", ",", "-o", str(out), "-e", args[0], "--", "true"]
    subprocess.run(argv, check=True, capture_output=True, timeout=60)
    rows = stat_csv.parse(out.read_text())
    assert list(rows.frame["EVENT"]) == [lead.label, member.label] == ["TSC.LEAD", "TSC.MEMBER:x"]
