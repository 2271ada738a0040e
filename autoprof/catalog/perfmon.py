"""One Intel perfmon JSON event -> the PMU it runs on and its encoding fields.

perfmon writes events the way Intel's tools read them; perf names them differently. These
functions make the translation once (perf's `create_perf_json.py` + `jevents.py` rules, the
kernel's uncore format definitions where the two disagree), so `encoding.spec` only has to
write the terms:
- fixed-counter core events keep perf's real codes (INST_RETIRED.ANY is event=0xc0,
  CPU_CLK_UNHALTED.THREAD event=0x3c; perfmon writes the pseudo-codes 0x0100/0x0200 for which
  the kernel has no constraint on many cores); a core UMaskExt (arch perfmon v6 cores: Lion
  Cove, Skymont, Darkmont) is the high byte of ``umask``: where CPUID.23H.0.EBX enumerates
  umask2 the kernel's core ``umask`` format is config:8-15,40-47 (arch/x86/events/intel/core.c
  ``umask2_show``; there is no ``umask2`` term), so ``umask = UMaskExt << 8 | UMask``;
- uncore ``umask = UMaskExt << 8 | UMask`` (the kernel's umask format spans config:8-15,32-...),
  also when UMask is 0 (the converter drops UMaskExt then); not on IIO boxes, where UMaskExt
  repeats PortMask/FCMask (umask config:8-15, ch_mask config:36-47, fc_mask config:48-50);
- ``ExtSel`` is bit 8 of the event where the kernel's format has ``event_ext``
  (config:0-7,21: the QPI boxes, SNB-EP's PCU); on IVT's PCU the whole config is written raw,
  as no term can carry bit 21 (the converter drops ExtSel); JKT's UBOX event mask drops bit 21,
  so those events are excluded (they would count their non-ExtSel twin);
- the PCU's UMask is its occupancy select (``occ_sel``, config:14-15; the converter drops it);
- SKX/CLX CHA ``Filter1`` becomes ``config1=FILTER_VALUE``, PortMask ``ch_mask``, FCMask
  ``fc_mask``;
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
    if name.lower() in _PERF_FIXED:
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
        return "uncore_cbox_0" if platform.cbox else "uncore_clock"
    return UNIT_TO_PMU.get(unit, f"uncore_{unit.lower().replace(' ', '_')}")


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
    style = UNCORE if platform.server else UNCORE_CLIENT
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
    if str(raw.get("Filter") or "").strip() == "Filter1":
        terms.append(("config1", number(raw, "FILTER_VALUE")))
    ext = number(raw, "ExtSel")
    if ext and (unit, platform.name) in _EXT_DROPPED:
        raise NotEncodable(f"ExtSel: the kernel's {unit} event mask drops config bit 21")
    if ext and not ({(unit, None), (unit, platform.name)} & _EVENT_EXT):
        config = code | umask << 8 | fields["edge"] << 18 | ext << 21 | fields["inv"] << 23
        return {"pmu": pmu, "style": RAW, "terms": (("config", config | fields["cmask"] << 24),)}
    code |= ext << 8
    if unit == "PCU":
        terms += [("occ_sel", umask >> 6)] if umask >> 6 else []
        umask = 0
    return fields | {"code": code, "umask": umask, "terms": tuple(terms)}


def matrix_shift(responses: list[int]) -> int:
    """Where an old offcore matrix's response bits go: some files (GLM, GLP, KNL, SNB..BDX)
    write responses relative to bit 16 (their ANY_RESPONSE is 0x1 where the combined core
    events say 0x10000); others (SLM, JKT) write them in place. A response with any of the
    request's bits 0-15 set shows the relative form."""
    return 16 if any(v & 0xFFFF for v in responses) else 0
