"""The control-register bits the vendors' event data asks for, computed from the JSON fields alone.

An oracle for `tests/test_kernel_formats.py`, written without autoprof's encoding code: the
PerfEvtSel layout of Intel's SDM (vol. 3B 20.2: event 0-7, umask 8-15, edge 18, any 21,
inv 23, cmask 24-31; umask2 40-47 on arch perfmon v6) and the uncore PMON control layout of
the uncore guides (ev_sel 0-7, umask 8-15, edge_det 18, ev_sel_ext 21, invert 23,
thresh 24-31, umask_ext from 32; IIO ch_mask/fc_mask). What it cannot know is None:
free-running and uncore fixed counters, whose codes the kernel's own tables choose.

Exceptions, each decided by the kernel:
- core fixed-counter events: perfmon writes pseudo-codes (0x00/0x01..0x03, 0x0A on Bonnell);
  the kernel knows them by the codes of its fixed-counter constraints
  (arch/x86/events/intel/core.c ``FIXED_EVENT_CONSTRAINT(0x00c0, 0)``, ``(0x003c, 1)``,
  ``(0x0300, 2)``, ``(0x0400, 3)`` TOPDOWN.SLOTS);
- SKX/CLX CHA ``Filter1``: the value is the second filter MSR, which the kernel writes from
  config1 bits 32-63 (uncore_snbep.c ``skx_cha_hw_config``/``snbep_cbox_enable_event``:
  ``wrmsrl(filter + 1, filter >> 32)``);
- CBo/CHA state filter of the LLC lookups (JKT ``CBoFilter[22:18]``, IVT..BDX
  ``CBoFilter0[23:17]``, SKX/CLX ``CHAFilter0[26:17]``): with no state bit set the lookup
  matches nothing ("One must ALWAYS ... select a state or states to match", Intel's
  descriptions); all states of the range are asked for, as far as the kernel's state filter
  reaches (uncore_snbep.c: snbep ``filter_state`` config1:18-22, ivbep ``filter_state2``
  17-22, so IVT's bit 23 is not there, hswep ``filter_state3`` 17-23, skx ``filter_state5``
  17-26);
- IIO's ``UMaskExt`` is the control's upper half from bit 32 (thresh 32-35, ch_mask, fc_mask);
  ``PortMask``/``FCMask`` repeat parts of it, and where they disagree (SPR's
  UNC_IIO_NUM_TGT_MATCHED_REQ_OF_CPU: UMaskExt 0x70000, FCMask 0) both are asked for.

AMD (perf's amdzenN data) and Arm (perf's arm64 data), from the hardware register layouts:
- AMD core PERF_CTL (PPR, Core::X86::Msr::PERF_CTL): EventSelect[7:0] bits 0-7, UnitMask
  8-15, Edge 18, Inv 23, CntMask 24-31, EventSelect[11:8] 32-35;
- AMD L3 PMC (ChL3PmcCfg): EventSel 0-7, UnitMask 8-15; Fam 17h SliceMask 48-51, ThreadMask
  56-63; Fam 19h and later CoreId 42-44, EnAllSlices 46, EnAllCores 47, SliceId 48-50,
  ThreadMask 56-57;
- AMD DF PMC (DF::DfPmcCfg): EventSel[7:0] 0-7, UnitMask[7:0] 8-15; with PerfMonV2 (Zen 4
  and later) EventSel[13:8] 32-37 and UnitMask[11:8] 24-27, before it EventSel[11:8] 32-35
  and EventSel[13:12] 59-60;
- AMD UMC PMC (UMC::PerfMonCtl, PerfMonV2): EventSel 0-7, RdWrMask 8-9;
- Arm PMEVTYPER<n>_EL0 (Arm ARM D23.5): evtCount bits 0-15 (PMUv3p1 and later; 0-9 before).
  A standard event (``ArchStdEvent``) has the code of the architecture's table, the model's
  own fields winning;
- HiSilicon HIP08 uncore (DDRC, HHA, L3C; hisi_uncore_*_pmu.c): an 8-bit event type per
  counter, the data's ``ConfigCode``.
"""

from __future__ import annotations

import re
from typing import Any

from autoprof.testing.perf_attrs import Attr

# core.c fixed-counter constraints, by the event they count
FIXED_CODES = {
    "INST_RETIRED.ANY": 0x00C0,
    "CPU_CLK_UNHALTED.THREAD": 0x003C,
    "CPU_CLK_UNHALTED.CORE": 0x003C,
    "CPU_CLK_UNHALTED.THREAD_ANY": 0x003C | 1 << 21,
    "CPU_CLK_UNHALTED.REF_TSC": 0x0300,
    "CPU_CLK_UNHALTED.REF": 0x0300,
    "TOPDOWN.SLOTS": 0x0400,
}
# IIO: (PortMask shift, FCMask shift): SKX/CLX ch_mask config:36-43, fc_mask 44-46; later 36/48
_IIO_SHIFT = {"SKX": (36, 44), "CLX": (36, 44)}
# the kernel's state filter field in config1, (first bit, last bit), per platform
_STATE_FIELD = {
    "JKT": (18, 22),
    "IVT": (17, 22),
    **{p: (17, 23) for p in ("HSX", "BDX", "BDW-DE")},
    **{p: (17, 26) for p in ("SKX", "CLX")},
}
_STATE = re.compile(r"(?:CBoFilter0?|CHAFilter0)\[(\d+):(\d+)\]")  # JKT's has no 0


def _num(raw: dict[str, Any], key: str) -> int:
    text = str(raw.get(key) or "0").split(",")[0].strip()
    if text.lower() in ("", "na", "null"):
        return 0
    return int(text, 16) if text.lower().startswith("0x") else int(text)


def core(raw: dict[str, Any]) -> Attr:
    """config/config1 of a core event (type left 0)."""
    name = raw["EventName"]
    if str(raw.get("Counter", "")).startswith("Fixed counter") and name in FIXED_CODES:
        return Attr(0, FIXED_CODES[name])
    config = (
        _num(raw, "EventCode")
        | _num(raw, "UMask") << 8
        | _num(raw, "EdgeDetect") << 18
        | _num(raw, "AnyThread") << 21
        | _num(raw, "Invert") << 23
        | _num(raw, "CounterMask") << 24
        | _num(raw, "UMaskExt") << 40
    )
    msr = str(raw.get("MSRIndex") or "0").split(",")[0].strip().lower()
    config1 = _num(raw, "MSRValue") if msr not in ("0", "0x00", "") else 0
    if msr == "0x3f6":
        config1 &= 0xFFFF  # ldlat: config1:0-15
    return Attr(0, config, config1)


def uncore(raw: dict[str, Any], platform: str) -> Attr | None:
    """config/config1 of a programmable uncore event; None for free-running/fixed ones."""
    if str(raw.get("CounterType") or "").upper() in ("FREERUN", "FIXED"):
        return None
    if str(raw.get("Counter") or "").strip().lower() == "fixed":
        return None
    config = (
        _num(raw, "EventCode")
        | _num(raw, "UMask") << 8
        | _num(raw, "EdgeDetect") << 18
        | _num(raw, "ExtSel") << 21
        | _num(raw, "Invert") << 23
        | _num(raw, "CounterMask") << 24
    )
    config |= _num(raw, "UMaskExt") << 32
    if raw.get("Unit") == "IIO":
        port, fc = _IIO_SHIFT.get(platform, (36, 48))
        config |= _num(raw, "PortMask") << port | _num(raw, "FCMask") << fc
    config1 = 0
    filter_ = str(raw.get("Filter") or "").strip()
    if filter_ == "Filter1":
        config1 = _num(raw, "FILTER_VALUE") << 32
    # the first range named, when it lies in the state field (JKT's NID lookups add
    # ", CBoFilter[17:10]", the node; CBoFilter[31:23] is JKT's opcode, CHAFilter0[12:0] SKX's TID)
    state = _STATE.match(filter_)
    first, last = _STATE_FIELD.get(platform, (-1, -1))
    if state and first <= int(state.group(2)) <= last:
        high, low = min(int(state.group(1)), last), int(state.group(2))
        config1 = ((1 << (high - low + 1)) - 1) << low
    return Attr(0, config, config1)


# AMD model -> (family, PerfMonV2): PPR of each family; PerfMonV2 is CPUID 0x80000022 EAX[0],
# set from Zen 4 on.
ZEN = {
    "zen1": (0x17, False),
    "zen2": (0x17, False),
    "zen3": (0x19, False),
    "zen4": (0x19, True),
    "zen5": (0x1A, True),
    "zen6": (0x1A, True),
}


def _bits(value: int, low: int, high: int, at: int) -> int:
    """Bits low..high of `value`, placed from bit `at`."""
    return (value >> low & (1 << (high - low + 1)) - 1) << at


def amd(raw: dict[str, Any], model: str) -> Attr:
    """config of an AMD event (core, L3, DF or UMC, told by its Unit) on a Zen model."""
    family, perfmon_v2 = ZEN[model]
    code, umask = _num(raw, "EventCode"), _num(raw, "UMask")
    unit = str(raw.get("Unit") or "")
    if unit == "UMCPMC":
        return Attr(0, _bits(code, 0, 7, 0) | _bits(_num(raw, "RdWrMask"), 0, 1, 8))
    low = _bits(code, 0, 7, 0) | _bits(umask, 0, 7, 8)
    if unit == "DFPMC":
        if perfmon_v2:
            return Attr(0, low | _bits(code, 8, 13, 32) | _bits(umask, 8, 11, 24))
        return Attr(0, low | _bits(code, 8, 11, 32) | _bits(code, 12, 13, 59))
    if unit == "L3PMC":
        if family == 0x17:
            return Attr(0, low | _bits(_num(raw, "ThreadMask"), 0, 7, 56))
        return Attr(
            0,
            low
            | _num(raw, "EnAllSlices") << 46
            | _num(raw, "EnAllCores") << 47
            | _bits(_num(raw, "SliceId"), 0, 2, 48)
            | _bits(_num(raw, "ThreadMask"), 0, 1, 56),
        )
    return Attr(0, low | _bits(code, 8, 11, 32))


def arm(raw: dict[str, Any], standard: dict[str, dict[str, Any]]) -> Attr:
    """config of an Arm event; `standard` are the architecture's events by lower-case name."""
    name = raw.get("ArchStdEvent")
    merged = standard[str(name).lower()] | raw if name else raw
    if str(merged.get("Unit") or "").startswith("hisi_"):
        return Attr(0, _bits(_num(merged, "ConfigCode"), 0, 7, 0))
    return Attr(0, _bits(_num(merged, "EventCode"), 0, 15, 0))
