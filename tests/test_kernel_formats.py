"""Every string autoprof plans, parsed by perf against the kernel's format files of its platform.

tests/data/kernel-formats/<platform>/ is a fake PMU tree (written from the table in
`autoprof.testing.kernel_formats`); in a private mount namespace it replaces
/sys/bus/event_source/devices and perf 6.1 parses autoprof's strings as it would on that machine,
printing the perf_event_attr it would open. Each string must parse (its terms exist, its values
fit their bits) and give config/config1/config2 equal to the bits Intel's data asks for
(`autoprof.testing.vendor_bits`, written from the register layouts, not from autoprof's code).
One platform runs in the fast suite; all 40 are slow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoprof.catalog import intel
from autoprof.testing import kernel_check, kernel_formats, perf_attrs
from tests.conftest import REPO

TREES = REPO / "tests" / "data" / "kernel-formats"
RECORDED = REPO / "tests" / "data" / "perf61" / "stat-vv-fake-pmus.txt"
WHY_NOT = perf_attrs.unavailable()


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


@pytest.mark.skipif(WHY_NOT is not None, reason=f"cannot run perf over a fake tree: {WHY_NOT}")
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


@pytest.mark.skipif(WHY_NOT is not None, reason=f"cannot run perf over a fake tree: {WHY_NOT}")
def test_skx_strings_give_the_bits_of_intels_data(intel_dir):
    """SKX: CHA Filter1 in config1:32-63, the PCU's occupancy select as umask, IIO masks,
    offcore/ldlat/frontend MSR values, fixed counters by the kernel's codes."""
    report = _check(intel_dir, "SKX")
    assert report.checked > 3500
    assert report.unchecked <= 2  # UNC_U_CLOCKTICKS, UNC_M_CLOCKTICKS_F: fixed counters


@pytest.mark.slow
@pytest.mark.skipif(WHY_NOT is not None, reason=f"cannot run perf over a fake tree: {WHY_NOT}")
@pytest.mark.parametrize("platform", sorted(set(kernel_formats.INTEL) - {"SKX"}))
def test_every_platforms_strings_give_the_bits_of_intels_data(intel_dir, platform):
    report = _check(intel_dir, platform)
    assert report.checked > 100


@pytest.mark.skipif(WHY_NOT is not None, reason=f"cannot run perf over a fake tree: {WHY_NOT}")
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
