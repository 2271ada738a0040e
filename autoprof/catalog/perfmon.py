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
  (config:0-7,21: the QPI boxes); elsewhere no term carries bit 21 and the kernel's event mask
  drops it from a raw config too (uncore_snbep.c: JKT's PCU and UBOX, SNBEP_PCU_ and
  SNBEP_U_MSR_PMON_RAW_EVENT_MASK; IVT's PCU, IVBEP_PCU_MSR_PMON_RAW_EVENT_MASK), so such an
  event is left out (it would count its non-ExtSel twin). JKT's PCU had ``event_ext`` in older
  kernels: where the live ``uncore_pcu/format/event`` still carries bit 21
  (`Platform.event_ext`), its ExtSel events are kept;
- the PCU's UMask is its occupancy select: ``occ_sel`` (config:14-15) where the kernel's PCU
  format names it (SNB-EP .. BDX: snbep/ivbep_uncore_pcu_formats_attr), plain ``umask`` from
  SKX on (skx/snr_uncore_pcu_formats_attr have no occ_sel; the bits are the same);
- SKX/CLX CHA ``Filter1`` is the second filter MSR, which the kernel writes from config1 bits
  32-63 (skx_cha_formats_attr: filter_rem config1:32 .. filter_isoc config1:63), so
  ``config1=FILTER_VALUE << 32``; PortMask ``ch_mask``, FCMask ``fc_mask``;
- an LLC lookup's state filter (``Filter: CBoFilter[22:18]`` JKT, ``CBoFilter0[23:17]``
  IVT..BDX, ``CHAFilter0[26:17]`` SKX/CLX) asks for every state in the range, as far as the
  kernel's ``filter_state`` reaches (config1:18-22 JKT, 17-22 IVT, 17-23 HSX/BDX, 17-26 SKX):
  with no state bit set the box matches nothing (Intel: "One must ALWAYS ... select a state or
  states to match. Otherwise, the event will count nothing");
- IIO's ``UMaskExt`` is the control's upper half (ch_mask, fc_mask); ``PortMask``/``FCMask``
  repeat it, and where they disagree (SPR's UNC_IIO_NUM_TGT_MATCHED_REQ_OF_CPU: UMaskExt
  0x70000, FCMask 0) both are kept;
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
from collections.abc import Iterable
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
# Lunar Lake has none (MISSING_PMU); Panther Lake's kernels add cncu back (ptl_msr_uncores).
_CNCU_CLOCK = {"MTL", "ARL", "PTL"}
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
    ("SANTA", "LNL"): (
        "lnl_msr_uncores[] (uncore_snb.c:750) is cbox and arb only: no cncu or santa box "
        "counts the socket's UCLK"
    ),
}
# Free-running counters the kernel's tables do not have: ICX/SNR IIO free-running counters
# are ioclk and bw_in only (icx/snr_iio_freerunning[], uncore_snbep.c).
_NO_FREERUN = {("ICX", "BANDWIDTH_OUT"), ("SNR", "BANDWIDTH_OUT")}
# Platforms whose PCU format names occ_sel (config:14-15) instead of umask.
_OCC_SEL = {"JKT", "IVT", "HSX", "BDX", "BDW-DE"}
# CBo state filter: platform -> (low bit, width) of the kernel's filter_state in config1.
_STATE_FILTER = {
    "JKT": (18, 5),
    "IVT": (17, 6),
    **{p: (17, 7) for p in ("HSX", "BDX", "BDW-DE")},
    **{p: (17, 10) for p in ("SKX", "CLX")},
}
_STATE_RANGE = re.compile(r"(?:CBoFilter0?|CHAFilter0)\[(\d+):(\d+)\]")  # JKT's has no 0
# IIO UMaskExt (from config bit 32): platform -> (ch_mask width, fc_mask shift); thresh is 0-3
_IIO_EXT = {"SKX": (8, 12), "CLX": (8, 12)}
_IIO_EXT_DEFAULT = (12, 16)
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
# Units whose kernel format spans config:0-7,21 (`event_ext`) on every platform.
_EVENT_EXT = {"QPI LL"}
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
    event_ext: frozenset[str] = frozenset()  # PMUs whose live `event` format carries bit 21

    @classmethod
    def from_units(cls, name: str, units: set[str], event_ext: Iterable[str] = ()) -> Platform:
        return cls(name, bool(units & _SERVER_UNITS), "CBO" in units, frozenset(event_ext))


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
    fields: dict[str, Any] = {
        "pmu": pmu,
        "style": style,
        "cmask": number(raw, "CounterMask"),
        "edge": flag(raw, "EdgeDetect"),
        "inv": flag(raw, "Invert"),
    }
    terms: list[tuple[str, int]] = []
    if unit == "IIO":  # IIO's umask is config:8-15; UMaskExt is its ch_mask and fc_mask
        terms = [(t, v) for t, v in _iio_masks(raw, ext_umask, platform.name) if v]
        ext_umask = 0
    umask = ext_umask << 8 | number(raw, "UMask")
    filter_ = str(raw.get("Filter") or "").strip()
    if filter_ == "Filter1":
        terms.append(("config1", number(raw, "FILTER_VALUE") << 32))
    state = _state_filter(filter_, platform.name)
    if state:
        terms.append(("filter_state", state))
    ext = number(raw, "ExtSel")
    carried = _umask_ext_bits(unit, platform.name)
    if carried is not None and ext_umask >> carried:  # the format cannot carry it
        return _raw(pmu, code, umask, ext, fields)
    if ext and unit not in _EVENT_EXT and pmu not in platform.event_ext:
        raise NotEncodable(
            f"ExtSel: the kernel's {pmu} event format is config:0-7 (perf refuses "
            f"event={code | 0x100:#x}: value too big for format, maximum is 255) and its event "
            "mask drops config bit 21 from a raw config too (uncore_snbep.c); a kernel whose "
            f"{pmu}/format/event is config:0-7,21 counts it"
        )
    code |= ext << 8
    if unit == "PCU" and platform.name in _OCC_SEL:
        terms += [("occ_sel", umask >> 6)] if umask >> 6 else []
        umask &= 0x3F
    return fields | {"code": code, "umask": umask, "terms": tuple(terms)}


def _iio_masks(raw: dict[str, Any], ext: int, platform: str) -> list[tuple[str, int]]:
    """(ch_mask, fc_mask) of an IIO event: PortMask/FCMask with what UMaskExt adds."""
    width, fc_shift = _IIO_EXT.get(platform, _IIO_EXT_DEFAULT)
    if ext & 0xF or ext >> (fc_shift + 3):
        raise NotEncodable(f"UMaskExt {ext:#x} is not an IIO channel/function mask")
    ch_mask = number(raw, "PortMask") | ext >> 4 & ((1 << width) - 1)
    return [("ch_mask", ch_mask), ("fc_mask", number(raw, "FCMask") | ext >> fc_shift)]


def _state_filter(filter_: str, platform: str) -> int:
    """``filter_state`` of an LLC lookup: every state bit of the Filter's range that the
    kernel's field holds; 0 when the Filter names no state range (JKT's CBoFilter[17:10] is
    the node, [31:23] the opcode; SKX's CHAFilter0[12:0] the thread)."""
    found = _STATE_RANGE.match(filter_)
    if not found or platform not in _STATE_FILTER:
        return 0
    low, width = _STATE_FILTER[platform]
    first = int(found.group(2))
    if not low <= first < low + width:
        return 0
    high = min(int(found.group(1)), low + width - 1)
    return ((1 << (high + 1)) - (1 << first)) >> low


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
