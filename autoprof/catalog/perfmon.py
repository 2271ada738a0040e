"""One Intel perfmon JSON event -> the PMU it runs on and its encoding fields.

perfmon writes events the way Intel's tools read them; perf names them differently. These
functions make the translation once (perf's `create_perf_json.py` + `jevents.py` rules, the
kernel's uncore format definitions where the two disagree), so `encoding.spec` only has to
write the terms:
- fixed-counter core events keep perf's real codes (INST_RETIRED.ANY is event=0xc0,
  CPU_CLK_UNHALTED.THREAD event=0x3c; perfmon writes the pseudo-codes 0x0100/0x0200 for which
  the kernel has no constraint on many cores); only on a fixed counter: where the data puts the
  same name on generic counters (CPU_CLK_UNHALTED.REF 0x013c on Atom cores, INST_RETIRED.ANY_P
  0x01c0 on Nehalem/Westmere) its own code is what counts; a core UMaskExt (arch perfmon v6
  cores: Lion Cove, Skymont, Darkmont) is the high byte of ``umask``: where CPUID.23H.0.EBX
  enumerates umask2 the kernel's core ``umask`` format is config:8-15,40-47
  (arch/x86/events/intel/core.c ``umask2_show``; there is no ``umask2`` term), so
  ``umask = UMaskExt << 8 | UMask``;
- uncore ``umask = UMaskExt << 8 | UMask`` (the kernel's umask format spans config:8-15,32-...),
  also when UMask is 0 (the converter drops UMaskExt then); not on IIO boxes, where UMaskExt
  repeats PortMask/FCMask (umask config:8-15, ch_mask config:36-47, fc_mask config:48-50);
- ``ExtSel`` is bit 8 of the event where the kernel's format has ``event_ext``
  (config:0-7,21: the QPI boxes, SNB-EP's PCU); on IVT's PCU the whole config is written raw,
  as no term can carry bit 21 (the converter drops ExtSel); JKT's UBOX event mask drops bit 21,
  so those events are excluded (they would count their non-ExtSel twin);
- the PCU's UMask is its occupancy select: ``occ_sel`` (config:14-15) where the kernel's PCU
  format names it (SNB-EP .. BDX: snbep/ivbep_uncore_pcu_formats_attr), plain ``umask`` from
  SKX on (skx/snr_uncore_pcu_formats_attr have no occ_sel; the bits are the same);
- SKX/CLX CHA ``Filter1`` is the second filter MSR, which the kernel writes from config1 bits
  32-63 (skx_cha_formats_attr: filter_rem config1:32 .. filter_isoc config1:63), so
  ``config1=FILTER_VALUE << 32``; PortMask ``ch_mask``, FCMask ``fc_mask``;
- an LLC lookup's CBo state filter (``Filter: CBoFilter0[23:17]``, IVT..BDX) asks for every
  state in the range (``filter_state``, config1:17-23 on HSX/BDX, 17-22 on IVT): with no state
  bit set the box matches nothing;
- a UMaskExt wider than the kernel's ``umask`` format (umask_ext4 config:8-15,32-55 on SPR and
  later, umask_ext2 config:8-15,32-57 on ICX/SNR CHA) is written as a raw ``config=``;
- PMU names are the kernel's: perfmon units no kernel creates are left out with the reason
  (`MISSING_PMU`), renamed ones mapped (`KERNEL_PMU`);
- uncore fixed counters are event=0xff (UNC_CLOCK.SOCKET on uncore_cbox_0 on SNB..SKL clients,
  on uncore_clock later); free-running counters are event=0xff on
  ``uncore_<unit>_free_running[_N]`` with umask ``type << 4 | index``.
Bad values raise ValueError with the field named; the reader adds the file and event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from autoprof.catalog.encoding import CORE, RAW, UNCORE, UNCORE_CLIENT

# JSON "Unit" -> Linux PMU name, as perf's jevents.py maps them.
UNIT_TO_PMU = {
    "CBO": "uncore_cbox",
    "QPI LL": "uncore_qpi",
    "SBO": "uncore_sbox",
    "iMPH-U": "uncore_arb",
    "UPI LL": "uncore_upi",
}
# jevents' real_event: fixed-counter events written with the codes the kernel knows.
_PERF_FIXED = {
    "inst_retired.any": (0xC0, 0, False),
    "inst_retired.any_p": (0xC0, 0, False),
    "cpu_clk_unhalted.ref": (0x00, 0x03, False),
    "cpu_clk_unhalted.thread": (0x3C, 0, False),
    "cpu_clk_unhalted.core": (0x3C, 0, False),
    "cpu_clk_unhalted.thread_any": (0x3C, 0, True),
}
# (unit, platform or None for all) -> the kernel's PMU name where jevents' rule misses it:
# KNL's DCLK iMC is knl_uncore_imc_dclk .name = "imc"; MTL's hac cbox is mtl_uncore_hac_cbox
# "hac_cbox"; GNR-family's MDF is gnr_uncore_mdf_sbo "mdf_sbo" (uncore_snbep.c, uncore_snb.c).
KERNEL_PMU: dict[tuple[str, str | None], str] = {
    ("iMC_DCLK", None): "uncore_imc",
    ("HAC_CBO", None): "uncore_hac_cbox",
    **{("MDF", p): "uncore_mdf_sbo" for p in ("GNR", "SRF", "GRR", "CWF")},
}
# The uncore clock (UNC_CLOCK.SOCKET) from Meteor Lake on is the compute die's NCU fixed
# counter (uncore_snb.c mtl_uncore_cncu .name = "cncu"); no kernel creates uncore_clock there.
_CNCU_CLOCK = {"MTL", "ARL", "LNL", "PTL"}
# (unit, platform or None) -> why no kernel PMU counts that unit's events.
MISSING_PMU = {
    ("M2HBM", "SPR"): "spr_uncores[] (uncore_snbep.c) has no M2HBM box",
    ("M2HBM", "EMR"): "spr_uncores[] (uncore_snbep.c) has no M2HBM box",
    ("MCHBM", "SPR"): "spr_uncores[] (uncore_snbep.c) has no MCHBM box",
    ("MCHBM", "EMR"): "spr_uncores[] (uncore_snbep.c) has no MCHBM box",
    ("UBOX", "SPR"): "spr_uncores[] (uncore_snbep.c) has no UBOX box",
    ("UBOX", "EMR"): "spr_uncores[] (uncore_snbep.c) has no UBOX box",
    ("CHACMS", None): "no kernel uncore table has a CHACMS box",
    ("IRP", "JKT"): "snbep_pci_uncores[] (uncore_snbep.c) has no IRP box",
}
# Free-running counters the kernel's tables do not have: ICX/SNR IIO free-running counters
# are ioclk and bw_in only (icx/snr_iio_freerunning[], uncore_snbep.c).
_NO_FREERUN = {("ICX", "BANDWIDTH_OUT"), ("SNR", "BANDWIDTH_OUT")}
# Platforms whose PCU format names occ_sel (config:14-15) instead of umask.
_OCC_SEL = {"JKT", "IVT", "HSX", "BDX", "BDW-DE"}
# CBo state filter: platform -> (low bit, width) of the kernel's filter_state in config1.
_STATE_FILTER = {"IVT": (17, 6), "HSX": (17, 7), "BDX": (17, 7), "BDW-DE": (17, 7)}
_STATE_RANGE = re.compile(r"CBoFilter0\[(\d+):(\d+)\]")
# (unit or None for all, platforms) -> UMaskExt bits the kernel's umask format carries
# (umask_ext4 config:32-55: 24 bits; umask_ext2 config:32-57: 26 bits).
_SPR_FAMILY = ("SPR", "EMR", "GNR", "SRF", "GRR", "CWF")
_UMASK_EXT_BITS: dict[tuple[str | None, str], int] = {
    **{(None, p): 24 for p in _SPR_FAMILY},
    ("CHA", "ICX"): 26,
    ("CHA", "SNR"): 26,
}
# Units whose server units (any of these) make a platform's uncore "server" style.
_SERVER_UNITS = {"UBOX", "PCU", "CHA", "IRP", "M2M", "HA"}
# (unit, platform or None for all) whose kernel format spans config:0-7,21 (`event_ext`).
_EVENT_EXT = {("QPI LL", None), ("PCU", "JKT")}
# ... and those whose kernel event mask drops bit 21 even from a raw config
# (SNBEP_U_MSR_PMON_RAW_EVENT_MASK): such an event would count as its non-ExtSel twin.
_EXT_DROPPED = {("UBOX", "JKT")}
# Topdown metrics read from PERF_METRICS with TOPDOWN.SLOTS (event=0x00, umask=0x80 + i).
TOPDOWN_METRICS = (
    "RETIRING",
    "BAD_SPECULATION",
    "FRONTEND_BOUND",
    "BACKEND_BOUND",
    "HEAVY_OPERATIONS",
    "BRANCH_MISPREDICTS",
    "FETCH_LATENCY",
    "MEMORY_BOUND",
)
SLOTS = "TOPDOWN.SLOTS"


class NotEncodable(Exception):
    """An event the kernel cannot be told to count (the reader excludes it, saying why)."""


@dataclass(frozen=True)
class Platform:
    """Facts about a platform's uncore that decide term names."""

    name: str
    server: bool
    cbox: bool  # has CBo boxes: UNC_CLOCK.SOCKET is on uncore_cbox_0

    @classmethod
    def from_units(cls, name: str, units: set[str]) -> Platform:
        return cls(name, bool(units & _SERVER_UNITS), "CBO" in units)


def number(raw: dict[str, Any], key: str, default: int = 0) -> int:
    """A numeric field as jevents reads it ("0x.." hex, else decimal; lists: the first)."""
    value = raw.get(key)
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "na", "null")):
        return default
    text = str(value).split(",")[0].strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        raise ValueError(f"{key} {value!r} is not a number") from None


def flag(raw: dict[str, Any], key: str) -> bool:
    return number(raw, key) != 0


def core_fields(raw: dict[str, Any], name: str) -> dict[str, Any]:
    """The encoding fields of a core event."""
    code = number(raw, "EventCode")
    umask = number(raw, "UMaskExt") << 8 | number(raw, "UMask")
    anythread = flag(raw, "AnyThread")
    on_fixed = str(raw.get("Counter") or "").strip().lower().startswith("fixed counter")
    if on_fixed and name.lower() in _PERF_FIXED:
        code, umask, anythread = _PERF_FIXED[name.lower()]
    return {
        "style": CORE,
        "code": code,
        "umask": umask,
        "cmask": number(raw, "CounterMask"),
        "edge": flag(raw, "EdgeDetect"),
        "inv": flag(raw, "Invert"),
        "anythread": anythread,
        "msr_value": number(raw, "MSRValue"),
    }


def uncore_pmu(unit: str, name: str, platform: Platform, freerun: bool, fixed: bool) -> str:
    """The Linux PMU an uncore event is opened on (perf expands uncore_cha to every box)."""
    if freerun:
        box = re.search(r"_MC(\d+)_", name)
        return f"uncore_{unit.lower()}_free_running" + (f"_{box.group(1)}" if box else "")
    if fixed and name == "UNC_CLOCK.SOCKET":
        if platform.cbox:
            return "uncore_cbox_0"
        return "uncore_cncu" if platform.name in _CNCU_CLOCK else "uncore_clock"
    for key in ((unit, platform.name), (unit, None)):
        if key in KERNEL_PMU:
            return KERNEL_PMU[key]
    return UNIT_TO_PMU.get(unit, f"uncore_{unit.lower().replace(' ', '_')}")


def _umask_ext_bits(unit: str, platform: str) -> int | None:
    """UMaskExt bits the kernel's umask format carries (None: no limit known)."""
    for key in ((unit, platform), (None, platform)):
        if key in _UMASK_EXT_BITS:
            return _UMASK_EXT_BITS[key]
    return None


def freerun_umask(name: str) -> int:
    """umask of a free-running counter: type << 4 | index (clockticks 1, total 1, reads or
    bandwidth in 2, writes or bandwidth out 3; index the IIO part)."""
    part = re.search(r"PART(\d+)", name)
    index = int(part.group(1)) if part else 0
    for words, kind in (
        (("CLOCKTICKS", "TOTAL"), 1),
        (("BANDWIDTH_IN", "RDCAS"), 2),
        (("BANDWIDTH_OUT", "WRCAS"), 3),
    ):
        if any(w in name for w in words):
            return kind << 4 | index
    raise ValueError(f"free-running counter {name} has no known umask")


def uncore_fields(raw: dict[str, Any], name: str, unit: str, platform: Platform) -> dict[str, Any]:
    """The PMU and encoding fields of an uncore event."""
    freerun = str(raw.get("CounterType") or "").upper() == "FREERUN"
    fixed = str(raw.get("Counter") or "").strip().lower() == "fixed"
    pmu = uncore_pmu(unit, name, platform, freerun, fixed)
    for key in ((unit, platform.name), (unit, None)):
        if key in MISSING_PMU:
            raise NotEncodable(
                f"no kernel PMU for unit {unit} on {platform.name}: {MISSING_PMU[key]}"
            )
    style = UNCORE if platform.server else UNCORE_CLIENT
    if freerun and any(p == platform.name and w in name for p, w in _NO_FREERUN):
        raise NotEncodable(
            f"not in the kernel's free-running counters of {platform.name} "
            "(icx/snr_iio_freerunning: ioclk and bw_in only)"
        )
    if freerun:
        return {"pmu": pmu, "style": style, "code": 0xFF, "umask": freerun_umask(name)}
    if fixed:
        return {"pmu": pmu, "style": style, "code": 0xFF}
    code, ext_umask = number(raw, "EventCode"), number(raw, "UMaskExt")
    if unit == "IIO":
        ext_umask = 0  # UMaskExt repeats ch_mask/fc_mask there; IIO's umask is config:8-15
    umask = ext_umask << 8 | number(raw, "UMask")
    fields: dict[str, Any] = {
        "pmu": pmu,
        "style": style,
        "cmask": number(raw, "CounterMask"),
        "edge": flag(raw, "EdgeDetect"),
        "inv": flag(raw, "Invert"),
    }
    terms = [
        (term, number(raw, key))
        for key, term in (("PortMask", "ch_mask"), ("FCMask", "fc_mask"))
        if number(raw, key)
    ]
    filter_ = str(raw.get("Filter") or "").strip()
    if filter_ == "Filter1":
        terms.append(("config1", number(raw, "FILTER_VALUE") << 32))
    state = _STATE_RANGE.fullmatch(filter_)
    if state and platform.name in _STATE_FILTER:
        low, width = _STATE_FILTER[platform.name]
        high = min(int(state.group(1)), low + width - 1)
        terms.append(("filter_state", ((1 << (high + 1)) - (1 << int(state.group(2)))) >> low))
    ext = number(raw, "ExtSel")
    carried = _umask_ext_bits(unit, platform.name)
    if carried is not None and ext_umask >> carried:  # the format cannot carry it
        return _raw(pmu, code, umask, ext, fields)
    if ext and (unit, platform.name) in _EXT_DROPPED:
        raise NotEncodable(f"ExtSel: the kernel's {unit} event mask drops config bit 21")
    if ext and not ({(unit, None), (unit, platform.name)} & _EVENT_EXT):
        return _raw(pmu, code, umask, ext, fields)
    code |= ext << 8
    if unit == "PCU" and platform.name in _OCC_SEL:
        terms += [("occ_sel", umask >> 6)] if umask >> 6 else []
        umask &= 0x3F
    return fields | {"code": code, "umask": umask, "terms": tuple(terms)}


def _raw(pmu: str, code: int, umask: int, ext: int, fields: dict[str, Any]) -> dict[str, Any]:
    """The whole PMON control value as ``config=`` (uncore guides: ev_sel 0-7, umask 8-15,
    edge_det 18, ev_sel_ext 21, invert 23, thresh 24-31, umask_ext from 32)."""
    config = code | (umask & 0xFF) << 8 | umask >> 8 << 32 | ext << 21
    config |= fields["edge"] << 18 | fields["inv"] << 23 | fields["cmask"] << 24
    return {"pmu": pmu, "style": RAW, "terms": (("config", config),)}


def matrix_shift(responses: list[int]) -> int:
    """Where an old offcore matrix's response bits go: some files (GLM, GLP, KNL, SNB..BDX)
    write responses relative to bit 16 (their ANY_RESPONSE is 0x1 where the combined core
    events say 0x10000); others (SLM, JKT) write them in place. A response with any of the
    request's bits 0-15 set shows the relative form."""
    return 16 if any(v & 0xFFFF for v in responses) else 0
