"""Every string autoprof plans, parsed by perf against the kernel's format files of its platform.

tests/data/kernel-formats/<platform>/ is a fake PMU tree (written from the table in
`autoprof.testing.kernel_formats`); in a private mount namespace it replaces
/sys/bus/event_source/devices and perf 6.1 parses autoprof's strings as it would on that machine,
printing the perf_event_attr it would open. Each string must parse (its terms exist, its values
fit their bits) and give config/config1/config2 equal to the bits Intel's data asks for
(`autoprof.testing.vendor_bits`, written from the register layouts, not from autoprof's code).
The same for AMD's Zen 1-6 (perf's amdzenN data) and every Arm core of perf's arm64 data.
One platform per vendor runs in the fast suite (SKX, Zen 4, Neoverse N2/V2); the rest are slow.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from autoprof.catalog import amd, arm, embedded, intel, pmuevents
from autoprof.testing import kernel_check, kernel_formats, perf_attrs, vendor_bits
from tests.conftest import REPO

TREES = REPO / "tests" / "data" / "kernel-formats"
RECORDED = REPO / "tests" / "data" / "perf61" / "stat-vv-fake-pmus.txt"
WHY_NOT = perf_attrs.unavailable()
AMD_DIR = embedded.directory("amd")
ARM_DIR = embedded.directory("arm64")
assert AMD_DIR is not None and ARM_DIR is not None
needs_perf_over_fakes = pytest.mark.skipif(
    WHY_NOT is not None, reason=f"cannot run perf over a fake tree: {WHY_NOT}"
)
HISI_WILDCARD = (
    "open: perf 6.1's event grammar takes a PMU name or a prefix of numbered boxes "
    "(hisi_sccl1_l3c -> hisi_sccl1_l3c0, l3c1), not jevents' comma Unit (hisi_sccl,l3c), which "
    "perf matches only for its own aliases (pmu.c pmu_uncore_alias_match): a parser error"
)


def test_trees_are_the_table():
    """The committed trees are what the table writes (edit the table, regenerate the files)."""
    for platform, pmus in kernel_formats.PLATFORMS.items():
        root = TREES / platform
        kept = {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}
        assert kept == kernel_formats.files(pmus), platform


def test_every_intel_platform_has_a_tree(intel_dir):
    assert set(intel.platform_cpu_ids(intel_dir)) == set(kernel_formats.INTEL)


def test_attrs_are_read_from_recorded_output():
    """perf -vv output recorded on this machine (perf 6.1): one attr per CHA box, config1 in
    perf's ``{ bp_addr, config1 }`` line, the name from the warning that follows."""
    attrs = perf_attrs.parse_output(RECORDED.read_text())
    assert attrs["A"] == [perf_attrs.Attr(type=64, config=0x200013C, config1=0x10001)]
    cha = perf_attrs.Attr(type=0, config=0x1135, config1=0x4043300000000)
    assert [(a.config, a.config1) for a in attrs["B"]] == [(cha.config, cha.config1)] * 2
    assert len({a.type for a in attrs["B"]}) == 2


@needs_perf_over_fakes
def test_perf_refuses_what_the_kernel_format_lacks():
    """The harness can fail: a term SKX's PCU has not (occ_sel), a value wider than the SPR CHA
    umask (umask_ext4, 32 bits) and a PMU no kernel creates are refused, with perf's reason."""
    good = "uncore_pcu/event=0x80,umask=0x40,name=GOOD/"
    bad = [
        "uncore_pcu/event=0x80,occ_sel=1,name=OCC/",
        "uncore_imc_dclk/event=0x1,name=DCLK/",
    ]
    parsed = perf_attrs.parse(TREES / "SKX", [good, *bad], batch=3)
    assert set(parsed.refused) == set(bad)
    assert "unknown term 'occ_sel'" in parsed.refused[bad[0]]
    assert "Cannot find PMU" in parsed.refused[bad[1]]
    assert [a.config for a in parsed.attrs["GOOD"]] == [0x4080]
    wide = "uncore_cha/event=0x36,umask=0x78c86ffe20,name=WIDE/"
    refused = perf_attrs.parse(TREES / "SPR", [wide]).refused
    assert "value too big for format" in refused[wide]


def _check(intel_dir: Path, platform: str) -> kernel_check.Report:
    report = kernel_check.check(intel_dir, platform, TREES / platform)
    assert report.refused == {}
    assert [(name, spec) for name, spec, *_ in report.different] == []
    return report


@needs_perf_over_fakes
def test_skx_strings_give_the_bits_of_intels_data(intel_dir):
    """SKX: CHA Filter1 in config1:32-63, the PCU's occupancy select as umask, IIO masks,
    offcore/ldlat/frontend MSR values, fixed counters by the kernel's codes."""
    report = _check(intel_dir, "SKX")
    assert report.checked > 3500
    assert report.unchecked <= 2  # UNC_U_CLOCKTICKS, UNC_M_CLOCKTICKS_F: fixed counters


@pytest.mark.slow
@needs_perf_over_fakes
@pytest.mark.parametrize("platform", sorted(set(kernel_formats.INTEL) - {"SKX"}))
def test_every_platforms_strings_give_the_bits_of_intels_data(intel_dir, platform):
    report = _check(intel_dir, platform)
    assert report.checked > 100


@needs_perf_over_fakes
def test_amd_and_arm_trees_take_perfs_own_strings():
    """The AMD and Arm trees, for their catalogs to plug in: the strings perf's jevents writes
    (NON-INTEL.md sec. 2) give the bits the kernel's formats place, e.g. a 12-bit AMD event
    scattered over config:0-7,32-35 and a 12-bit PerfMonV2 DF umask over config:8-15,24-27."""
    zen4 = {
        "A": ("cpu/event=0x1c7,name=A/", 0x1_0000_00C7),
        "B": (
            "amd_l3/event=0xac,umask=1,enallcores=1,enallslices=1,sliceid=3,threadmask=3,name=B/",
            0xAC | 1 << 8 | 1 << 47 | 1 << 46 | 3 << 48 | 3 << 56,
        ),
        "C": ("amd_df/event=0x1f,umask=0x7fe,name=C/", 0x1F | 0xFE << 8 | 0x7 << 24),
        "D": ("amd_umc/event=0,name=D/", 0),
    }
    parsed = perf_attrs.parse(TREES / "amd-zen4", [spec for spec, _ in zen4.values()])
    assert parsed.refused == {}
    got = {name: {a.config for a in attrs} for name, attrs in parsed.attrs.items()}
    assert got == {name: {config} for name, (_, config) in zen4.items()}
    assert len(parsed.attrs["D"]) == 2  # amd_umc_0 and amd_umc_1
    zen1 = perf_attrs.parse(TREES / "amd-zen1", ["amd_df/event=0x1f,umask=0x7fe,name=C/"])
    assert "value too big for format" in next(iter(zen1.refused.values()))
    arm = perf_attrs.parse(TREES / "arm64-neoverse", ["armv8_pmuv3_0/event=0x11,name=CYC/"])
    assert [a.config for a in arm.attrs["CYC"]] == [0x11]


def test_every_zen_model_has_a_tree():
    zen = {name for name in amd.models(AMD_DIR) if name.startswith("zen")}
    assert zen == set(kernel_formats.AMD_TREES) == {f"zen{n}" for n in range(1, 7)}


def _check_other(model: str) -> dict[str, int]:
    """A model's strings all parse and give the data's bits; its events checked per PMU."""
    tree = TREES / kernel_check.tree_name(model)
    if model in kernel_formats.AMD_TREES:
        report = kernel_check.check_amd(AMD_DIR, model, tree)
        catalog = amd.load(AMD_DIR, model, kernel_check.ALL_EVENTS)
    else:
        report = kernel_check.check_arm(ARM_DIR, model, tree)
        catalog = arm.load(ARM_DIR, model, kernel_check.ALL_EVENTS)
    assert report.refused == {}
    assert [(name, spec) for name, spec, *_ in report.different] == []
    assert report.checked == len(catalog.events) - report.unchecked
    counts = Counter(event.pmu for event in catalog.events)
    return dict(counts) if report.unchecked == 0 else {"unchecked": report.unchecked, **counts}


@needs_perf_over_fakes
def test_zen4_strings_give_the_bits_of_the_ppr_layout():
    """Zen 4, every event (deprecated too): 12-bit core codes over config:0-7,32-35, PerfMonV2
    DF event/umask over 32-37 and 24-27, UMC RdWrMask, on the PerfMonV2 tree."""
    assert _check_other("zen4") == {"cpu": 336, "amd_l3": 17, "amd_df": 136, "amd_umc": 13}


@needs_perf_over_fakes
def test_neoverse_n2_strings_give_the_event_numbers_of_arms_data():
    assert _check_other("neoverse-n2") == {"armv8_pmuv3_0": 154}


@pytest.mark.slow
@needs_perf_over_fakes
@pytest.mark.parametrize("model", ["zen1", "zen2", "zen3", "zen5", "zen6"])
def test_every_zen_models_strings_give_the_bits_of_the_ppr_layout(model):
    assert "unchecked" not in _check_other(model)


@pytest.mark.slow
@needs_perf_over_fakes
@pytest.mark.parametrize("model", kernel_check.arm_models(ARM_DIR))
def test_every_arm_cores_strings_give_the_event_numbers_of_arms_data(model):
    assert "unchecked" not in _check_other(model)


@needs_perf_over_fakes
def test_hisilicons_comma_pmus_are_refused_by_perf_61():
    """Why HIP08's uncore events are left out (arm.WILDCARD, HISI_WILDCARD): perf refuses
    jevents' comma PMU in a string, and parses one SCCL's boxes by their prefix."""
    catalog = arm.load(ARM_DIR, "hip08", kernel_check.ALL_EVENTS)
    assert not [e for e in catalog.events if e.pmu.startswith("hisi_")]
    comma, prefix = "hisi_sccl,l3c/config=0x42,name=C/", "hisi_sccl1_l3c/config=0x42,name=P/"
    parsed = perf_attrs.parse(TREES / "arm64-hip08", [comma, prefix])
    assert parsed.refused == {comma: "parser error"}
    assert [a.config for a in parsed.attrs["P"]] == [0x42, 0x42]  # hisi_sccl1_l3c0 and l3c1


@needs_perf_over_fakes
def test_a_tree_of_the_wrong_family_is_caught():
    """The check can fail: Zen 5's 12-bit DF umasks (0xffe) do not fit Zen 3's 8-bit DF umask
    (perf refuses them), Zen 3 has no UMC PMU (perf cannot find it); the L3 formats are Fam
    19h's on both (sliceid, threadmask...), so those strings parse and match."""
    catalog = amd.load(AMD_DIR, "zen5", kernel_check.ALL_EVENTS)
    wide = [e for e in catalog.events if e.pmu == "amd_df" and e.umask > 0xFF][:2]
    l3 = [e for e in catalog.events if e.pmu == "amd_l3" and "sliceid" in e.spec][:2]
    umc = [e for e in catalog.events if e.pmu == "amd_umc"][:1]
    raws = kernel_check.model_raws(AMD_DIR / "amdzen5")
    report = kernel_check.compare(
        "zen5",
        wide + l3 + umc,
        lambda e: vendor_bits.amd(raws[e.name], "zen5"),
        TREES / "amd-zen3",
    )
    assert len(wide) == len(l3) == 2
    assert set(report.refused) == {e.spec for e in wide + umc}
    assert all("value too big for format" in report.refused[e.spec] for e in wide)
    assert "Cannot find PMU `amd_umc'" in report.refused[umc[0].spec]
    assert report.unchecked == 0 and report.checked == 5 and report.different == []


def test_the_oracle_places_amd_and_arm_fields_by_the_register_layouts():
    """vendor_bits on real entries of the data, bits worked out by hand from the PPR / Arm ARM
    (no perf needed): EventSelect[11:8] at 32, PerfMonV2 DF UnitMask[11:8] at 24, Fam 19h L3
    EnAllSlices 46 / EnAllCores 47 / SliceId 48 / ThreadMask 56, UMC RdWrMask 8, an Arm
    standard event's code from the architecture's table."""
    raws = {m: kernel_check.model_raws(AMD_DIR / f"amd{m}") for m in ("zen1", "zen4", "zen5")}
    expected = {
        ("zen4", "ex_ret_msprd_brnch_instr_dir_msmtch"): 0x1_0000_00C7,
        ("zen1", "remote_outbound_data_controller_0"): 0x7_0000_02C7,
        ("zen4", "local_processor_read_data_beats_cs4"): 0x1_0700_FE1F,
        ("zen4", "umc_act_cmd.rd"): 0x105,
        ("zen5", "l3_xi_sampled_latency.dram_near"): 0x0303_C000_0000_01AC,
    }
    got = {(m, n): vendor_bits.amd(raws[m][n], m).config for m, n in expected}
    assert got == expected
    standard = {}
    for name in arm.STANDARD_FILES:
        for raw in pmuevents.read_json(ARM_DIR / name):
            standard.setdefault(str(raw.get("EventName")).lower(), raw)
    n1 = kernel_check.model_raws(ARM_DIR / "arm" / "neoverse-n1")
    hip08 = kernel_check.model_raws(ARM_DIR / "hisilicon" / "hip08")
    assert vendor_bits.arm(n1["cpu_cycles"], standard).config == 0x11
    assert vendor_bits.arm(hip08["prefetch_drop"], standard).config == 0x42
