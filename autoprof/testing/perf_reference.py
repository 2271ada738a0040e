"""perf's own encoding of Intel perfmon events, rebuilt independently of autoprof's code, to
check autoprof's strings against (tests/test_encoding.py, bench/encodings.py).

Two steps, as in Linux: Intel's ``scripts/create_perf_json.py`` turns perfmon JSON into perf's
JSON (`perf_json`), and perf's ``tools/perf/pmu-events/jevents.py`` turns each perf JSON
event into ``pmu/terms/`` (`jevents_terms`). Written from reading those two scripts; the
uncore CSV rewrites of create_perf_json (new event names, extra filters) are not modelled, so
for the platforms without shipped JSON the comparison covers perfmon's own events.
"""

from __future__ import annotations

import csv
import json
import lzma
import re
from pathlib import Path

from autoprof.catalog import encoding
from autoprof.catalog.perfnames import spec_terms

# Platforms whose perf-converted JSON ships in ../shared/perf-encodings/, by folder name.
SHIPPED = {
    "SKX": "skylakex",
    "ICX": "icelakex",
    "SPR": "sapphirerapids",
    "ADL": "alderlake",
    "SKL": "skylake",
    "GLM": "goldmont",
}
_DROP = {"0", "0x0", "0x00", "na", "null", "tbd"}
_UNIT_FIXUPS = {"CBO": "CBOX", "SBO": "SBOX", "QPI LL": "QPI", "UPI LL": "UPI"}
_FILTER_REMOVED: tuple[str, ...] = (
    "cbofilter",
    "chafilter",
    "pcufilter",
    "qpimask",
    "uboxfilter",
    "fc, chnl",
)
_FILTER_REMOVED += ("chnl", "ctrctrl")
_FILTER_DROPS_EVENT = ("ha_addrmatch", "ha_opcodematch", "irpfilter")
_JEVENTS_UNITS = {"CBO": "uncore_cbox", "QPI LL": "uncore_qpi", "SBO": "uncore_sbox"}
_JEVENTS_UNITS |= {"iMPH-U": "uncore_arb", "UPI LL": "uncore_upi"}
_JEVENTS_UNITS |= {"cpu_core": "cpu_core", "cpu_atom": "cpu_atom"}
_JEVENTS_FIELDS = (
    ("AnyThread", "any"),
    ("PortMask", "ch_mask"),
    ("CounterMask", "cmask"),
    ("EdgeDetect", "edge"),
    ("FCMask", "fc_mask"),
    ("Invert", "inv"),
    ("SampleAfterValue", "period"),
    ("UMask", "umask"),
)
_MSR = {0x3F6: "ldlat", 0x1A6: "offcore_rsp", 0x1A7: "offcore_rsp", 0x3F7: "frontend"}
_REAL_EVENT = {
    "inst_retired.any": {"event": 0xC0, "period": 2000003},
    "inst_retired.any_p": {"event": 0xC0, "period": 2000003},
    "cpu_clk_unhalted.ref": {"event": 0, "umask": 3, "period": 2000003},
    "cpu_clk_unhalted.thread": {"event": 0x3C, "period": 2000003},
    "cpu_clk_unhalted.core": {"event": 0x3C, "period": 2000003},
    "cpu_clk_unhalted.thread_any": {"event": 0x3C, "any": 1, "period": 2000003},
}


def _get(raw: dict, key: str) -> str | None:
    value = raw.get(key)
    if not isinstance(value, str) or value.strip() in _DROP or not value.strip():
        return None
    return value.strip()


def _freerun_umask(shortname: str, unit: str, name: str) -> str:
    """create_perf_json's free-running (type, index) table, as ``0x..``."""
    kind, index = None, 0
    if unit.startswith("imc_free_running"):
        words: tuple[tuple[str, int], ...] = (
            (("CLOCKTICKS", 1),) if shortname in ("ICX", "SNR", "SPR", "EMR") else ()
        )
        words += (("TOTAL", 1), ("RDCAS", 2), ("WRCAS", 3))
        kind = next((k for w, k in words if w in name), None)
    elif unit.startswith("iio_free_running"):
        kind = next(
            (
                k
                for w, k in (("CLOCKTICKS", 1), ("BANDWIDTH_IN", 2), ("BANDWIDTH_OUT", 3))
                if w in name
            ),
            None,
        )
        part = re.search(r"PART(\d+)", name)
        index = int(part.group(1)) if part else 0
    if kind is None:
        raise ValueError(f"{shortname}: no free-running umask for {unit} {name}")
    return f"{kind << 4 | index:#x}"


def perf_json(shortname: str, raw: dict, unit: str | None) -> dict | None:
    """create_perf_json's perf JSON for one perfmon event (None: the converter drops it).
    `unit` is ``cpu``, ``cpu_core``/``cpu_atom`` for hybrid core files, None for uncore."""
    out = {"EventName": _get(raw, "EventName")}
    umask = _get(raw, "UMask")
    if umask:
        umask = umask.split(",")[0]
        ext = _get(raw, "UMaskExt")
        if ext:
            umask = ext + umask[2:]
        umask = f"{int(umask, 16):#x}"
    box = _get(raw, "Unit")
    code = _get(raw, "EventCode")
    if box is None:
        box = None if unit == "cpu" else unit
    elif box in _UNIT_FIXUPS:
        box = _UNIT_FIXUPS[box]
    elif box == "NCU" and out["EventName"] == "UNC_CLOCK.SOCKET":
        box = "CLOCK"
    elif box == "PCU" and umask:
        umask = None
    if raw.get("CounterType") == "FREERUN":
        name = out["EventName"] or ""
        box = f"{(box or '').lower()}_free_running"
        mc = re.search(r"_MC(\d+)_", name)
        box += f"_{mc.group(1)}" if mc else ""
        code, umask = "0xff", _freerun_umask(shortname, box, name)
    if str(raw.get("Counter", "")).lower() == "fixed":
        code, umask = "0xff", None
    filt = _get(raw, "Filter")
    if filt and filt.lower().startswith(_FILTER_REMOVED):
        filt = None
    elif filt == "Filter1":
        filt = f"config1={_get(raw, 'FILTER_VALUE')}"
    if filt and filt.lower().startswith(_FILTER_DROPS_EVENT):
        return None
    for key in ("AnyThread", "CounterMask", "EdgeDetect", "FCMask", "Invert", "MSRIndex"):
        if _get(raw, key):
            out[key] = _get(raw, key)
    for key, value in (("EventCode", code), ("UMask", umask), ("Unit", box), ("Filter", filt)):
        if value:
            out[key] = value
    for key in ("MSRValue", "PortMask", "SampleAfterValue"):
        if _get(raw, key):
            out[key] = _get(raw, key)
    return out


def _int(text: str) -> int:
    return int(text, 16) if text.lower().startswith("0x") else int(text)


def jevents_terms(jd: dict) -> tuple[str, dict[str, int | str]]:
    """(pmu, {term: value}) of perf's string for one perf JSON event (jevents.py's rules)."""
    code = int(jd["EventCode"].split(",")[0], 0) if "EventCode" in jd else 0
    if "ExtSel" in jd:
        code |= int(jd["ExtSel"]) << 8
    values: dict[str, int | str] = {"event": code}
    for key, term in _JEVENTS_FIELDS:
        if key in jd and _int(jd[key]) != 0:
            values[term] = _int(jd[key])
    if jd.get("Filter"):
        values.update(spec_terms(f"x/{jd['Filter']}/"))
    if jd.get("MSRIndex"):
        msr = int(jd["MSRIndex"].split(",")[0], 0)
        values[_MSR.get(msr, f"msr_{msr:#x}")] = _int(jd.get("MSRValue", "0"))
    if jd["EventName"].lower() in _REAL_EVENT:
        values = dict(_REAL_EVENT[jd["EventName"].lower()])
    unit = jd.get("Unit")
    pmu = "cpu" if not unit else _JEVENTS_UNITS.get(unit, f"uncore_{unit.lower()}")
    return pmu, values


# The fields `jevents_terms` reads: all a compact copy of perf's JSON keeps.
COMPARED: tuple[str, ...] = (
    "EventName",
    "Unit",
    "EventCode",
    "ExtSel",
    "Filter",
    "MSRIndex",
    "MSRValue",
)
COMPARED += tuple(key for key, _ in _JEVENTS_FIELDS)


def shipped(folder: Path) -> list[dict]:
    """Every event of perf's converted JSON for a platform (metrics files left out): a folder
    of perf's files, or its compact copy ``<folder>.json.xz`` (`compact`, tests/data)."""
    packed = folder.with_name(folder.name + ".json.xz")
    if not folder.is_dir() and packed.is_file():
        return json.loads(lzma.decompress(packed.read_bytes()))
    events: list[dict] = []
    for path in sorted(folder.glob("*.json")):
        events += [e for e in json.loads(path.read_text()) if "EventName" in e]
    return events


def compact(folder: Path) -> bytes:
    """perf's converted JSON of a platform folder, only the compared fields, xz-compressed."""
    events = [{k: e[k] for k in COMPARED if k in e} for e in shipped(folder)]
    return lzma.compress(json.dumps(events, separators=(",", ":")).encode())


def converted(events_dir: Path, platform: str) -> list[dict]:
    """create_perf_json's perf JSON for every core and uncore event of a perfmon platform."""
    rows = [r for r in csv.DictReader((events_dir / "mapfile.csv").open())]
    rows = [r for r in rows if r["Filename"].split("/")[1] == platform]
    hybrid = any(r["EventType"] == "hybridcore" for r in rows)
    out: list[dict] = []
    seen: set[str] = set()
    for row in rows:
        kind = row["EventType"]
        if kind not in ("core", "hybridcore", "uncore", "uncore experimental"):
            continue
        if row["Filename"] in seen:
            continue
        seen.add(row["Filename"])
        unit = None
        if kind in ("core", "hybridcore"):
            role = row.get("Core Role Name") or ""
            unit = ("cpu_core" if role == "Core" else "cpu_atom") if hybrid else "cpu"
            if hybrid and role not in ("Core", "Atom"):
                continue  # the converter knows only core + atom files
        data = json.loads((events_dir / row["Filename"].lstrip("/")).read_text())
        names: set[str] = set()
        for raw in data["Events"] if isinstance(data, dict) else data:
            name = raw.get("EventName", "")
            if platform != "SPR" and name.startswith("UNC_IIO_BANDWIDTH_OUT."):
                continue
            if name in names:
                continue
            names.add(name)
            jd = perf_json(platform, raw, unit)
            if jd is not None:
                if hybrid and unit and "Unit" not in jd:
                    jd["Unit"] = unit
                out.append(jd)
    return out


def justification(pmu: str, ours: dict, theirs: dict) -> str | None:
    """Why autoprof's terms may differ from perf's converted JSON (None: they may not).

    The converter loses bits the kernel's formats carry; autoprof follows the kernel:
    - ``umask_ext``: UMaskExt with UMask 0 (create_perf_json drops UMaskExt when UMask is 0;
      the kernel's umask format spans config:8-15,32-... on uncore boxes, config:8-15,40-47
      on arch perfmon v6 cores);
    - ``extsel``: ExtSel (config bit 21 via ``event_ext`` config:0-7,21, or a raw config
      where the box's format has no such term); the converter drops it;
    - ``occ_sel``: the PCU's UMask is its occupancy select, config:14-15; the PCU format has
      no ``umask`` term (newer create_perf_json drops the UMask, older ones keep it);
    - ``iio_masks``: on IIO boxes UMaskExt repeats PortMask/FCMask (ch_mask config:36-47,
      fc_mask config:48-50) and the umask format is config:8-15: it is not folded into umask
      (the shipped SPR JSON does not fold it either); where UMaskExt holds a mask PortMask/
      FCMask lack (SPR's UNC_IIO_NUM_TGT_MATCHED_REQ_OF_CPU, fc 7) the converter drops it;
    - ``state_filter``: an LLC lookup's state filter (Filter ``CHAFilter0[26:17]``...), without
      which the box matches nothing; the converter drops the Filter field;
    - ``filter1``: SKX's CHA Filter1 value is the second filter MSR, written by the kernel from
      config1 bits 32-63 (skx_cha format filter_rem config1:32 .. filter_isoc config1:63);
      the converter puts it in bits 0-31 (the first filter: TID and state);
    - ``umask_wide``: a UMaskExt beyond the kernel's umask format (umask_ext4 config:32-55)
      is written as a raw config; perf's umask= would be refused ("value too big");
    - ``generic_ref``: CPU_CLK_UNHALTED.REF on generic counters (0x013c, Atom cores);
      jevents rewrites the name to the fixed counter's 0x0300, which generic counters do not
      count (core.c: 0x0300 is only FIXED_EVENT_CONSTRAINT(0x0300, 2)).
    """
    if theirs == {"umask": 3} and ours == {"event": 0x3C, "umask": 1}:
        return "generic_ref"
    if "filter_state" in ours and "filter_state" not in theirs:
        same = dict(ours, filter_state=0) == dict(theirs, filter_state=0)
        return "state_filter" if same else None
    if pmu == "uncore_iio" and {k for k in ours if k not in theirs} <= {"ch_mask", "fc_mask"}:
        kept = {k: v for k, v in ours.items() if k in theirs}
        if kept == theirs and set(ours) != set(theirs):
            return "iio_masks"
    if set(ours) == {"config"} and set(theirs) <= {"event", "umask"} and ours["config"] >> 40:
        umask = int(theirs.get("umask", 0))  # 0: the converter dropped UMaskExt (UMask 0)
        low = int(theirs.get("event", 0)) | (umask & 0xFF) << 8
        same = ours["config"] & 0xFFFF == low and (
            not umask >> 8 or ours["config"] >> 32 == umask >> 8
        )
        return "umask_wide" if same else None
    if "config1" in ours and ours["config1"] == int(theirs.get("config1", -1)) << 32:
        ours, theirs = dict(ours, config1=0), dict(theirs, config1=0)
        return "filter1" if ours == theirs else None
    skip = ("umask", "event", "occ_sel", "config")
    rest = {k: v for k, v in ours.items() if k not in skip}
    if rest != {k: v for k, v in theirs.items() if k not in ("umask", "event")}:
        return None
    umask, their_umask = ours.get("umask", 0), theirs.get("umask", 0)
    if "config" in ours and theirs.get("event") == ours["config"] & 0xFF:
        return "extsel" if ours["config"] >> 21 & 1 else None
    if ours.get("event") != theirs.get("event"):
        same_low = ours.get("event", 0) & 0xFF == theirs.get("event", 0)
        return "extsel" if same_low and ours["event"] >> 8 == 1 and umask == their_umask else None
    if pmu == "uncore_pcu" and "occ_sel" in ours:
        return "occ_sel" if not umask and their_umask in (0, ours["occ_sel"] << 6) else None
    if pmu == "uncore_iio" and their_umask >> 8 and umask == their_umask & 0xFF:
        return "iio_masks"
    if umask > 0xFF and not umask & 0xFF and not their_umask:
        return "umask_ext"
    return None


def compare(events, reference: list[dict]) -> dict:
    """autoprof's events against perf's JSON events, term by term: counts of ``equal``
    strings, ``justified`` differences by reason, the ``different`` ones (pmu, name, ours,
    theirs), and the reference events autoprof lacks (``missing``)."""
    ours = {(e.pmu, e.name): e for e in events}
    equal = 0
    justified: dict[str, int] = {}
    different: list[tuple] = []
    missing: list[tuple[str, str]] = []
    for jd in reference:
        pmu, theirs = jevents_terms(jd)
        event = ours.get((pmu, jd["EventName"]))
        if event is None and jd["EventName"] == "UNC_CLOCK.SOCKET":
            # the converter's uncore_clock/uncore_arb/uncore_santa: the kernel has the socket
            # clock on cbox 0 before Ice Lake, on the clock box after
            event = next((e for e in events if e.name == "UNC_CLOCK.SOCKET"), None)
            justified["clock_pmu"] = justified.get("clock_pmu", 0) + 1
            continue
        if event is None:
            missing.append((pmu, jd["EventName"]))
            continue
        mine = encoding.counted(spec_terms(event.spec))
        theirs = encoding.counted(theirs)
        if mine == theirs:
            equal += 1
            continue
        reason = justification(pmu, mine, theirs)
        if reason:
            justified[reason] = justified.get(reason, 0) + 1
        else:
            different.append((pmu, jd["EventName"], mine, theirs))
    return {"equal": equal, "justified": justified, "different": different, "missing": missing}
