"""The kernel's sysfs ``format/`` definitions per platform, as a compact table, and the fake
``/sys/bus/event_source/devices`` trees written from it (tests/data/kernel-formats/).

perf parses an event string against the ``format/<term>`` files of its PMU (``config:0-7``,
``config1:32``, ``config:8-15,32-55``): a term no file names, or a value wider than its bits,
is a syntax error. With these trees bind-mounted over sysfs (`autoprof.testing.perf_attrs`),
perf parses autoprof's strings for any platform here and prints the perf_event_attr it would
open. Transcribed from the kernel's format attributes (Linux 6.x):

- core PMUs: arch/x86/events/intel/core.c (``intel_arch3_formats_attr``: event, umask, edge, pc,
  any, inv, cmask; ``format_attr_offcore_rsp`` config1:0-63, ``format_attr_ldlat``
  config1:0-15, ``format_attr_frontend`` config1:0-23 (Skylake and later big cores),
  ``in_tx``/``in_tx_cp`` config:32/33 (TSX cores); ``any`` is hidden where CPUID.0AH says
  AnyThread is deprecated (arch perfmon v5: Ice Lake and later); ``umask2_show``: umask is
  config:8-15,40-47 where CPUID.23H enumerates umask2 (Lion Cove, Skymont, Darkmont...);
- server uncore: arch/x86/events/intel/uncore_snbep.c (``snbep_uncore_*_formats_attr``,
  ``ivbep_*``, ``hswep_*``, ``knl_*``, ``skx_*``, ``snr_*``, ``icx_*``, ``spr_*``, ``gnr_*``
  and the ``umask_ext*`` attributes) and uncore_discovery.c (``generic_uncore_formats_attr``);
- client uncore: arch/x86/events/intel/uncore_snb.c (``snb_uncore_formats_attr`` cmask5,
  ``skl_uncore_formats_attr`` cmask8, ``adl_uncore_formats_attr`` threshold config:24-29,
  ``icl_uncore_clock_formats_attr``, ``adl_uncore_imc_formats_attr``, MTL ``hac_cbox``,
  ``cncu``/``sncu``);
- free-running counters: uncore.c ``uncore_freerunning_formats_attr`` (event, umask).

Rows checked line by line against the kernel source cite it as ``file:line`` of torvalds/linux
``arch/x86/events/intel/`` at the versions the project's source index serves (read_file on
repo torvalds/linux): uncore_snbep.c at 0378c93a92e2, uncore_snb.c at 0401bbf56da5. Those rows:
SNB-EP/HSX/BDX PCU, IVT PCU, SNB-EP CBo, SKX/CLX CHA, SNR..GNR IIO, the ADL-family iMC and
Lunar Lake's whole uncore. PTL's and NVL's uncore rows are not in any indexed kernel version
(Panther Lake's cncu/santa boxes came later): they stay as written, unchecked.
AMD and Arm (NON-INTEL.md sec. 2): arch/x86/events/amd/core.c, amd/uncore.c,
drivers/perf/arm_pmuv3.c, drivers/perf/hisilicon/hisi_uncore_{ddrc,hha,l3c}_pmu.c.

Each platform lists its PMUs as (kernel PMU name, format set, boxes): a type with several boxes
is ``uncore_<name>_<N>`` (uncore.c ``uncore_pmu_register``), perf expands ``uncore_<name>/``
to every box. Two boxes are enough to see that expansion.
"""

from __future__ import annotations

from pathlib import Path

Formats = dict[str, str]

_EV, _UM = {"event": "config:0-7"}, {"umask": "config:8-15"}
_EDGE_INV = {"edge": "config:18", "inv": "config:23"}
# arch/x86/events/intel/core.c
ARCH = _EV | _UM | _EDGE_INV | {"pc": "config:19", "cmask": "config:24-31"}
ARCH3 = ARCH | {"any": "config:21"}
EXTRA = {"offcore_rsp": "config1:0-63", "ldlat": "config1:0-15"}
TSX = {"in_tx": "config:32", "in_tx_cp": "config:33"}
FRONTEND = {"frontend": "config1:0-23"}
UMASK2 = {"umask": "config:8-15,40-47"}
CORE_V3 = ARCH3 | EXTRA  # Nehalem .. Broadwell, Silvermont .. Goldmont Plus
CORE_HSW = CORE_V3 | TSX
CORE_SKL = CORE_HSW | FRONTEND
CORE_V5 = ARCH | EXTRA | FRONTEND  # AnyThread deprecated (arch perfmon v5)
CORE_V5_ATOM = ARCH | EXTRA
CORE_V6 = CORE_V5 | UMASK2
CORE_V6_ATOM = CORE_V5_ATOM | UMASK2

# uncore_snbep.c
THRESH8 = {"thresh": "config:24-31"}
THRESH5 = {"thresh": "config:24-28"}
SNBEP = _EV | _UM | _EDGE_INV | THRESH8  # snbep/ivbep/skx_uncore_formats_attr
UBOX = _EV | _UM | _EDGE_INV | THRESH5  # snbep/ivbep_uncore_ubox_formats_attr
EVENT_EXT = {"event": "config:0-7,21"}
QPI = SNBEP | EVENT_EXT  # snbep_uncore_qpi_formats_attr (match/mask terms left out)
BANDS = {f"filter_band{i}": f"config1:{8 * i}-{8 * i + 7}" for i in range(4)}
# occ_edge is "config:14-51" in the kernel (uncore_snbep.c:489), a typo for 31 that sysfs shows
OCC = {"occ_sel": "config:14-15", "occ_invert": "config:30", "occ_edge": "config:14-51"}
# snbep_uncore_pcu_formats_attr (uncore_snbep.c:694): ``event`` (config:0-7, :469), not
# ``event_ext``; its users snbep_uncore_pcu (:1150) and hswep_uncore_pcu (:2857, BDX's too) mask
# the control with SNBEP_PCU_MSR_PMON_RAW_EVENT_MASK (:51), which has no bit 21 either
SNBEP_PCU = _EV | OCC | _EDGE_INV | THRESH5 | BANDS
# ivbep_uncore_pcu_formats_attr (:1587): no inv; IVBEP_PCU_MSR_PMON_RAW_EVENT_MASK (:154)
IVBEP_PCU = _EV | OCC | {"edge": "config:18"} | THRESH5 | BANDS
# snbep_uncore_cbox_formats_attr (:680); LLC_LOOKUP's state filter is config1:18-22 (:506), which
# snbep_cbox_hw_config (:1027) keeps for 0x0334/0x0534/0x0934 (snbep_uncore_cbox_extra_regs :901)
SNBEP_CBOX = SNBEP | {
    "tid_en": "config:19",
    "filter_tid": "config1:0-4",
    "filter_nid": "config1:10-17",
    "filter_state": "config1:18-22",
    "filter_opc": "config1:23-31",
}
_FILTER_HI = {"filter_nc": "config1:62", "filter_c6": "config1:61", "filter_isoc": "config1:63"}
IVBEP_CBOX = (
    _EV
    | _UM
    | {"edge": "config:18", "tid_en": "config:19"}
    | THRESH8
    | {
        "filter_tid": "config1:0-4",
        "filter_link": "config1:5-8",
        "filter_state": "config1:17-22",
        "filter_nid": "config1:32-47",
        "filter_opc": "config1:52-60",
    }
    | _FILTER_HI
)
HSWEP_CBOX = (
    _EV
    | _UM
    | {"edge": "config:18", "tid_en": "config:19"}
    | THRESH8
    | {
        "filter_tid": "config1:0-5",
        "filter_link": "config1:6-8",
        "filter_state": "config1:17-23",
        "filter_nid": "config1:32-47",
        "filter_opc": "config1:52-60",
    }
    | _FILTER_HI
)
HSWEP_UBOX = UBOX | {"filter_tid": "config1:0-4", "filter_cid": "config1:5"}
HSWEP_SBOX = SNBEP | {"tid_en": "config:19"}
KNL_CHA = (
    SNBEP
    | {
        "qor": "config:16",
        "tid_en": "config:19",
        "filter_tid": "config1:0-8",
        "filter_link": "config1:12",
        "filter_state": "config1:18-20",
        "filter_local": "config1:33",
        "filter_all_op": "config1:35",
        "filter_nnm": "config1:37",
        "filter_opc": "config1:41-60",
    }
    | _FILTER_HI
)
# skx_uncore_cha_formats_attr (uncore_snbep.c:3529): filter_state5 config1:17-26 (:510), kept
# for the LLC_LOOKUP umasks 0x03..0x91 (skx_uncore_cha_extra_regs :3561, skx_cha_hw_config :3619)
SKX_CHA = (
    SNBEP
    | {
        "tid_en": "config:19",
        "filter_tid": "config1:0-8",
        "filter_state": "config1:17-26",
        "filter_rem": "config1:32",
        "filter_loc": "config1:33",
        "filter_all_op": "config1:35",
        "filter_nm": "config1:36",
        "filter_not_nm": "config1:37",
        "filter_opc_0": "config1:41-50",
        "filter_opc_1": "config1:51-60",
    }
    | _FILTER_HI
)
THRESH9 = {"thresh": "config:24-35"}
SKX_IIO = SNBEP | THRESH9 | {"ch_mask": "config:36-43", "fc_mask": "config:44-46"}
# snr_uncore_iio_formats_attr (uncore_snbep.c:4412): ch_mask2 config:36-47, fc_mask2 48-50
# (:492, :494); SPR's iio takes it (spr_uncore_iio :5634) with event_mask_ext 0x7ffff (:378)
SNR_IIO = SNBEP | THRESH9 | {"ch_mask": "config:36-47", "fc_mask": "config:48-50"}
SKX_PCU = SNBEP | {"occ_invert": "config:30", "occ_edge_det": "config:31"} | BANDS
SNR_PCU = SKX_PCU | THRESH5
SKX_UPI = SNBEP | {"umask": "config:8-15,32-43,45-55"}  # umask_ext
UMASK_EXT2 = {"umask": "config:8-15,32-57"}
UMASK_EXT3 = {"umask": "config:8-15,32-39"}
UMASK_EXT4 = {"umask": "config:8-15,32-55"}
SNR_CHA = SNBEP | UMASK_EXT2 | {"tid_en": "config:19", "filter_tid": "config1:0-9"}
SNR_M2M = SNBEP | UMASK_EXT3  # also icx_upi_uncore_formats_attr
SPR_CHA = SNBEP | UMASK_EXT4 | {"tid_en": "config:16", "filter_tid": "config1:0-9"}
SPR_RAW = SNBEP | UMASK_EXT4  # spr_uncore_raw_formats_attr
FREE = _EV | _UM  # uncore.c uncore_freerunning_formats_attr

# uncore_snb.c
SNB_CLIENT = _EV | _UM | _EDGE_INV | {"cmask": "config:24-28"}
SKL_CLIENT = _EV | _UM | _EDGE_INV | {"cmask": "config:24-31"}
# adl_uncore_formats_attr (uncore_snb.c:574; threshold config:24-29, :254): ADL's cbox, and
# MTL's cbox/arb/hac_* (mtl_uncore_cbox ...), which Lunar Lake keeps (lnl_msr_uncores :750)
ADL_CLIENT = _EV | _UM | _EDGE_INV | {"threshold": "config:24-29"}
CLOCK = dict(_EV)  # icl_uncore_clock_formats_attr
SNB_IMC = dict(_EV)  # snb_uncore_imc_formats_attr
# adl_uncore_imc_formats_attr (uncore_snb.c:1676): event, chmask config:8-11 (:249), edge
ADL_IMC = _EV | {"chmask": "config:8-11", "edge": "config:18"}
# lnl_uncore_formats_attr (uncore_snb.c:1774): threshold2 config:24-31 (:255); hbo and sncu
LNL_MMIO = _EV | _UM | _EDGE_INV | {"threshold": "config:24-31"}

# amd/core.c, amd/uncore.c, drivers/perf/arm_pmuv3.c (NON-INTEL.md sec. 2)
AMD_CORE = {
    "event": "config:0-7,32-35",
    "umask": "config:8-15",
    "edge": "config:18",
    "inv": "config:23",
    "cmask": "config:24-31",
}
AMD_L3_ZEN1 = _EV | _UM | {"slicemask": "config:48-51", "threadmask": "config:56-63"}
AMD_L3_ZEN3 = (
    _EV
    | _UM
    | {
        "coreid": "config:42-44",
        "enallslices": "config:46",
        "enallcores": "config:47",
        "sliceid": "config:48-50",
        "threadmask": "config:56-57",
    }
)
AMD_DF = {"event": "config:0-7,32-35,59-60", "umask": "config:8-15"}
AMD_DF_V2 = {"event": "config:0-7,32-37", "umask": "config:8-15,24-27"}
AMD_UMC = _EV | {"rdwrmask": "config:8-9"}
ARM_PMUV3 = {"event": "config:0-15", "long": "config1:0", "rdpmc": "config1:1"}
# drivers/perf/hisilicon/hisi_uncore_{ddrc,hha,l3c}_pmu.c, v1 (HIP08): ``event`` only
HISI_DDRC_V1 = {"event": "config:0-4"}
HISI_V1 = {"event": "config:0-7"}

Pmus = list[tuple[str, Formats, int]]


def _client(cbox: Formats, arb: Formats, *extra: tuple[str, Formats, int]) -> Pmus:
    return [("uncore_cbox", cbox, 2), ("uncore_arb", arb, 1), *extra]


_SNB_CLIENT = _client(SNB_CLIENT, SNB_CLIENT, ("uncore_imc", SNB_IMC, 1))
_SKL_CLIENT = _client(SKL_CLIENT, SKL_CLIENT, ("uncore_imc", SNB_IMC, 1))
_ICL_CLIENT = _client(SKL_CLIENT, SKL_CLIENT, ("uncore_clock", CLOCK, 1))
_IMC_FREE = [("uncore_imc_free_running_0", FREE, 1), ("uncore_imc_free_running_1", FREE, 1)]
_ADL_CLIENT = _client(ADL_CLIENT, ADL_CLIENT, ("uncore_clock", CLOCK, 1))
_ADL_CLIENT += [("uncore_imc", ADL_IMC, 2), *_IMC_FREE]
_MTL_CLIENT = [
    ("uncore_cbox", ADL_CLIENT, 2),
    ("uncore_arb", ADL_CLIENT, 1),
    ("uncore_hac_cbox", ADL_CLIENT, 2),
    ("uncore_hac_arb", ADL_CLIENT, 1),
    ("uncore_cncu", CLOCK, 1),
    ("uncore_sncu", CLOCK, 1),
    ("uncore_imc", ADL_IMC, 2),
    *_IMC_FREE,
]
# Lunar Lake: lnl_msr_uncores (uncore_snb.c:750) is cbox and arb only (no cncu: the socket's
# UCLK fixed counter has no PMU), lnl_mmio_uncores (:1843) adl_uncore_imc, lnl_uncore_hbo
# (:1800), lnl_uncore_sncu (:1829) and adl_uncore_imc_free_running (:1728, tgl formats :1576)
_LNL_CLIENT = [
    ("uncore_cbox", ADL_CLIENT, 2),
    ("uncore_arb", ADL_CLIENT, 2),
    ("uncore_imc", ADL_IMC, 2),
    ("uncore_hbo", LNL_MMIO, 2),
    ("uncore_sncu", LNL_MMIO, 1),
    *_IMC_FREE,
]
# Panther Lake and Nova Lake as first written (no indexed kernel version has them to check)
_PTL_CLIENT = [
    ("uncore_cncu", CLOCK, 1),
    ("uncore_sncu", CLOCK, 1),
    ("uncore_imc", _EV | {"chmask": "config:8-11"}, 2),
]
_JKT = [
    ("uncore_ubox", UBOX, 1),
    ("uncore_cbox", SNBEP_CBOX, 2),
    ("uncore_pcu", SNBEP_PCU, 1),
    ("uncore_ha", SNBEP, 1),
    ("uncore_imc", SNBEP, 2),
    ("uncore_qpi", QPI, 2),
    ("uncore_r2pcie", SNBEP, 1),
    ("uncore_r3qpi", SNBEP, 2),
]
_IVT = [
    ("uncore_ubox", UBOX, 1),
    ("uncore_cbox", IVBEP_CBOX, 2),
    ("uncore_pcu", IVBEP_PCU, 1),
    ("uncore_ha", SNBEP, 2),
    ("uncore_imc", SNBEP, 2),
    ("uncore_irp", SNBEP, 1),
    ("uncore_qpi", QPI, 2),
    ("uncore_r2pcie", SNBEP, 1),
    ("uncore_r3qpi", SNBEP, 2),
]
_HSX = [
    ("uncore_ubox", HSWEP_UBOX, 1),
    ("uncore_cbox", HSWEP_CBOX, 2),
    ("uncore_sbox", HSWEP_SBOX, 2),
    ("uncore_pcu", SNBEP_PCU, 1),
    ("uncore_ha", SNBEP, 2),
    ("uncore_imc", SNBEP, 2),
    ("uncore_irp", SNBEP, 1),
    ("uncore_qpi", QPI, 2),
    ("uncore_r2pcie", SNBEP, 1),
    ("uncore_r3qpi", SNBEP, 2),
]
_KNL = [
    ("uncore_ubox", HSWEP_UBOX, 1),
    ("uncore_cha", KNL_CHA, 2),
    ("uncore_imc", SNBEP, 2),  # knl_uncore_imc_dclk is named "imc"
    ("uncore_imc_uclk", SNBEP, 2),
    ("uncore_edc_uclk", SNBEP, 2),
    ("uncore_edc_eclk", SNBEP, 2),
    ("uncore_m2pcie", SNBEP, 1),
    ("uncore_irp", SNBEP, 1),
]
_SKX = [
    ("uncore_ubox", UBOX, 1),
    ("uncore_cha", SKX_CHA, 2),
    ("uncore_iio", SKX_IIO, 2),
    ("uncore_iio_free_running", FREE, 2),
    ("uncore_irp", SNBEP, 2),
    ("uncore_pcu", SKX_PCU, 1),
    ("uncore_imc", SNBEP, 2),
    ("uncore_m2m", SNBEP, 2),
    ("uncore_upi", SKX_UPI, 2),
    ("uncore_m2pcie", SNBEP, 2),
    ("uncore_m3upi", SNBEP, 2),
]
_SNR = [
    ("uncore_ubox", UBOX, 1),
    ("uncore_cha", SNR_CHA, 2),
    ("uncore_iio", SNR_IIO, 2),
    ("uncore_irp", SNBEP, 2),
    ("uncore_m2pcie", SNBEP, 2),
    ("uncore_pcu", SNR_PCU, 1),
    ("uncore_m2m", SNR_M2M, 1),
    ("uncore_imc", SNBEP, 2),
    ("uncore_iio_free_running", FREE, 2),
    ("uncore_imc_free_running", FREE, 1),
]
_ICX = [
    *[p for p in _SNR if p[0] != "uncore_m2m"],
    ("uncore_m2m", SNR_M2M, 2),
    ("uncore_upi", SNR_M2M, 2),  # icx_upi_uncore_formats_attr: umask_ext3
    ("uncore_m3upi", SNBEP, 2),
]
_SPR_COMMON = [
    ("uncore_cha", SPR_CHA, 2),
    ("uncore_iio", SNR_IIO, 2),
    ("uncore_irp", SPR_RAW, 2),
    ("uncore_pcu", SPR_RAW, 1),
    ("uncore_imc", SPR_RAW, 2),
    ("uncore_iio_free_running", FREE, 2),
    ("uncore_imc_free_running", FREE, 2),
]
_SPR = [
    *_SPR_COMMON,
    ("uncore_m2pcie", SPR_RAW, 2),
    ("uncore_m2m", SPR_RAW, 2),
    ("uncore_upi", SPR_RAW, 2),
    ("uncore_m3upi", SPR_RAW, 2),
    ("uncore_mdf", SPR_RAW, 2),
    ("uncore_cxlcm", SPR_RAW, 2),
    ("uncore_cxldp", SPR_RAW, 2),
]
_GNR = [
    *_SPR_COMMON,
    ("uncore_ubox", SPR_RAW, 1),
    ("uncore_b2cmi", SPR_RAW, 2),
    ("uncore_b2cxl", SPR_RAW, 2),
    ("uncore_b2upi", SPR_RAW, 2),
    ("uncore_b2hot", SPR_RAW, 2),
    ("uncore_mdf_sbo", SPR_RAW, 2),
    ("uncore_upi", SPR_RAW, 2),
    ("uncore_cxlcm", SPR_RAW, 2),
    ("uncore_cxldp", SPR_RAW, 2),
]


def _core(formats: Formats) -> Pmus:
    return [("cpu", formats, 1)]


def _hybrid(core: Formats, atom: Formats, lowpower: bool = False) -> Pmus:
    pmus = [("cpu_core", core, 1), ("cpu_atom", atom, 1)]
    return [*pmus, ("cpu_lowpower", atom, 1)] if lowpower else pmus


# The PMUs each platform's kernel creates (Intel perfmon folder names).
INTEL: dict[str, Pmus] = {
    "BNL": _core(ARCH3),
    "NHM-EP": _core(CORE_V3),
    "NHM-EX": _core(CORE_V3),
    "WSM-EP-DP": _core(CORE_V3),
    "WSM-EP-SP": _core(CORE_V3),
    "WSM-EX": _core(CORE_V3),
    "SNB": _core(CORE_V3) + _SNB_CLIENT,
    "IVB": _core(CORE_V3) + _SNB_CLIENT,
    "HSW": _core(CORE_HSW) + _SNB_CLIENT,
    "BDW": _core(CORE_HSW) + _SNB_CLIENT,
    "SKL": _core(CORE_SKL) + _SKL_CLIENT,
    "ICL": _core(CORE_V5) + _ICL_CLIENT,
    "RKL": _core(CORE_V5) + _ICL_CLIENT,
    "TGL": _core(CORE_V5) + _ICL_CLIENT + _IMC_FREE,
    "ADL": _hybrid(CORE_V5, CORE_V5_ATOM) + _ADL_CLIENT,
    "MTL": _hybrid(CORE_V5, CORE_V5_ATOM) + _MTL_CLIENT,
    "ARL": _hybrid(CORE_V6, CORE_V6_ATOM, lowpower=True) + _MTL_CLIENT,
    "LNL": _hybrid(CORE_V6, CORE_V6_ATOM) + _LNL_CLIENT,
    "PTL": _hybrid(CORE_V6, CORE_V6_ATOM) + _PTL_CLIENT,
    "NVL": _hybrid(CORE_V6, CORE_V6_ATOM) + _PTL_CLIENT,
    "SLM": _core(CORE_V3),
    "GLM": _core(CORE_V3),
    "GLP": _core(CORE_V3),
    "EHL": _core(CORE_V5_ATOM),
    "JKT": _core(CORE_V3) + _JKT,
    "IVT": _core(CORE_V3) + _IVT,
    "HSX": _core(CORE_HSW) + _HSX,
    "BDX": _core(CORE_HSW) + _HSX,
    "BDW-DE": _core(CORE_HSW) + _HSX,
    "KNL": _core(CORE_V3) + _KNL,
    "SKX": _core(CORE_SKL) + _SKX,
    "CLX": _core(CORE_SKL) + _SKX,
    "SNR": _core(CORE_V5_ATOM) + _SNR,
    "ICX": _core(CORE_V5) + _ICX,
    "SPR": _core(CORE_V5) + _SPR,
    "EMR": _core(CORE_V5) + _SPR,
    "GNR": _core(CORE_V5) + _GNR,
    "SRF": _core(CORE_V5_ATOM) + _GNR,
    "GRR": _core(CORE_V5_ATOM) + _GNR,
    "CWF": _core(CORE_V6_ATOM) + _GNR,
}
OTHER: dict[str, Pmus] = {
    "amd-zen1": [("cpu", AMD_CORE, 1), ("amd_l3", AMD_L3_ZEN1, 1), ("amd_df", AMD_DF, 1)],
    "amd-zen3": [("cpu", AMD_CORE, 1), ("amd_l3", AMD_L3_ZEN3, 1), ("amd_df", AMD_DF, 1)],
    "amd-zen4": [
        ("cpu", AMD_CORE, 1),
        ("amd_l3", AMD_L3_ZEN3, 1),
        ("amd_df", AMD_DF_V2, 1),
        ("amd_umc", AMD_UMC, 2),
    ],
    "arm64-neoverse": [("armv8_pmuv3_0", ARM_PMUV3, 1)],  # ACPI: arm_pmu_acpi.c names it
    # HIP08: hisi_sccl<S>_<unit><N> (devm_kasprintf in each driver), two SCCLs' worth
    "arm64-hip08": [
        ("armv8_pmuv3_0", ARM_PMUV3, 1),
        *[(f"hisi_sccl{s}_ddrc{n}", HISI_DDRC_V1, 1) for s in (1, 3) for n in (0, 1)],
        *[(f"hisi_sccl{s}_hha{n}", HISI_V1, 1) for s in (1, 3) for n in (0, 1)],
        *[(f"hisi_sccl{s}_l3c{n}", HISI_V1, 1) for s in (1, 3) for n in (0, 1)],
    ],
}
PLATFORMS = INTEL | OTHER
# The tree of each AMD model (perf's amdzenN folders): the kernel picks formats by family and
# PerfMonV2, not by model (amd/uncore.c: ``boot_cpu_data.x86 >= 0x19`` -> the Fam 19h L3
# formats, ``X86_FEATURE_PERFMON_V2`` -> the DF umask/event of PerfMonV2 and the UMC PMU), so
# Fam 17h (Zen 1, 2) share one tree, Zen 3 (Fam 19h, no PerfMonV2) has its own, and Zen 4 (Fam
# 19h) and Zen 5, 6 (Fam 1Ah) share the PerfMonV2 one.
AMD_TREES = {
    "zen1": "amd-zen1",
    "zen2": "amd-zen1",
    "zen3": "amd-zen3",
    "zen4": "amd-zen4",
    "zen5": "amd-zen4",
    "zen6": "amd-zen4",
}
# Every Arm core has the same PMUv3 formats (arm_pmuv3.c), under its ACPI name; HIP08 has its
# HiSilicon uncore PMUs beside it.
ARM_TREES = {"hisilicon/hip08": "arm64-hip08"}


def arm_tree(model_folder: str) -> str:
    return ARM_TREES.get(model_folder, "arm64-neoverse")


# Core PMUs that serve a set of CPUs (a `cpus` file): hybrid x86 core types, Arm's.
_CPUS = {"cpu_core": "0", "cpu_atom": "1", "cpu_lowpower": "1", "armv8_pmuv3_0": "0-1"}


def files(pmus: Pmus) -> dict[str, str]:
    """A fake event_source/devices tree as {relative path: text}: per PMU `type`,
    `format/<term>`, and `cpumask` for uncore boxes (perf opens those system-wide on one CPU)
    or `cpus` for core PMUs of a set of CPUs (hybrid x86, Arm)."""
    out: dict[str, str] = {}
    next_type = 64  # above the kernel's fixed types, so no name clashes with real ones
    for name, formats, boxes in pmus:
        for box in range(boxes):
            folder = f"{name}_{box}" if boxes > 1 else name
            out[f"{folder}/type"] = f"{next_type}\n"
            next_type += 1
            for term, bits in formats.items():
                out[f"{folder}/format/{term}"] = bits + "\n"
            if name in _CPUS:
                out[f"{folder}/cpus"] = _CPUS[name] + "\n"
            elif not name.startswith(("cpu", "arm")):
                out[f"{folder}/cpumask"] = "0\n"
    return out


def write_tree(root: Path, pmus: Pmus) -> None:
    for relative, text in files(pmus).items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)


def write_all(root: Path) -> None:
    """Every platform's tree under `root/<platform>/`."""
    for platform, pmus in PLATFORMS.items():
        write_tree(root / platform, pmus)


if __name__ == "__main__":  # python -m autoprof.testing.kernel_formats tests/data/kernel-formats
    import shutil
    import sys

    out = Path(sys.argv[1])
    for platform in PLATFORMS:
        shutil.rmtree(out / platform, ignore_errors=True)
    write_all(out)
