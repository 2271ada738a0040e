"""From a metric's event text (``ICACHE_16B.IFDATA_STALL:c1:e1``, ``TSC``) to a catalog Event.

A modified event is derived from its base event with `dataclasses.replace`: the same counter
constraints, a perf string with the modifier's terms, and the metric's own spelling as its name
(perf prints a quoted ``name='...'`` term back as written, so results keep that name). Events
no vendor file lists come from perf's own events (`PERF_EVENTS`); the Top-down
``PERF_METRICS.*`` values are perf's ``topdown-*`` events, read with TOPDOWN.SLOTS (the
co-scheduler puts them in its run). `modify` is the one place that maps modifiers to terms.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from autoprof.catalog import host
from autoprof.catalog.model import Catalog, Event
from autoprof.errors import AutoprofError

# event text -> (perf event, PMU, factor turning perf's value into the formula's unit)
PERF_EVENTS = {
    "TSC": ("msr/tsc/", "msr", 1.0),
    # perf reports Joules; Intel's formulas count energy units of 61 uJ (package), 15.6 uJ (DRAM)
    "FREERUN_PKG_ENERGY_STATUS": ("power/energy-pkg/", "power", 1 / 61e-6),
    "UNC_PKG_ENERGY_STATUS": ("power/energy-pkg/", "power", 1 / 61e-6),
    "FREERUN_DRAM_ENERGY_STATUS": ("power/energy-ram/", "power", 1 / 15.6e-6),
}
TOPDOWN = {
    "PERF_METRICS.RETIRING": "topdown-retiring",
    "PERF_METRICS.BAD_SPECULATION": "topdown-bad-spec",
    "PERF_METRICS.FRONTEND_BOUND": "topdown-fe-bound",
    "PERF_METRICS.BACKEND_BOUND": "topdown-be-bound",
    "PERF_METRICS.HEAVY_OPERATIONS": "topdown-heavy-ops",
    "PERF_METRICS.BRANCH_MISPREDICTS": "topdown-br-mispredict",
    "PERF_METRICS.FETCH_LATENCY": "topdown-fetch-lat",
    "PERF_METRICS.MEMORY_BOUND": "topdown-mem-bound",
}
SLOTS = "TOPDOWN.SLOTS"
# modifiers that name the base event itself: perf_metrics (TOPDOWN.SLOTS read with the
# topdown-* events), percore (summed over SMT siblings: a per-process count already is),
# one_unit (one uncore box: the analysis takes the mean over boxes instead of the sum)
SAME_EVENT = {"perf_metrics", "percore", "one_unit"}
_TERM = re.compile(r"(?i)^(c|e|i|eq|u)(0x[0-9a-f]+|\d+)$")
_TERM_NAMES = {"c": "cmask", "e": "edge", "i": "inv", "eq": "eq", "u": "umask"}


@dataclass(frozen=True)
class Resolved:
    """What a metric event text stands for: a catalog event (with a factor for its value),
    a constant (retire latency), or nothing (`missing` says why)."""

    text: str
    event: Event | None = None
    factor: float = 1.0
    constant: float | None = None
    missing: str | None = None

    @property
    def name(self) -> str | None:
        return self.event.name if self.event is not None else None


def split(text: str) -> tuple[str, list[str]]:
    base, *mods = text.split(":")
    return base, mods


def modify(base: Event, text: str, modifiers: list[str]) -> Event:
    """The event `base` with perf modifiers, as explicit encoding fields (the catalog's
    encoding writes the string): ``cN eN iN uXX`` the counter mask, edge, invert and umask,
    ``eqN`` the uncore ``eq`` term, ``USER``/``SUP`` the ``u``/``k`` suffix, ``filter1=`` the
    CHA filter (config1 bits 32-63), ``ocr_msr_val=`` the offcore response value, ``opc=`` /
    ``tid=`` the C-box filters."""
    if not base.style:
        raise ValueError(f"{base.name} is not encoded by format terms: no modifiers apply")
    changes: dict = {}
    terms = dict(base.terms)
    for mod in modifiers:
        key, _, value = mod.partition("=")
        simple = _TERM.match(mod)
        if mod.lower() in SAME_EVENT:
            continue
        if simple:
            field, digits = _TERM_NAMES[simple.group(1).lower()], simple.group(2)
            number = int(digits, 16) if digits.lower().startswith("0x") else int(digits)
            if field == "eq":
                terms["eq"] = number
            else:
                changes[field] = bool(number) if field in ("edge", "inv") else number
        elif mod.lower() == "user":
            changes["suffix"] = "u"
        elif mod.lower() == "sup":
            changes["suffix"] = "k"
        elif key == "filter1":
            terms["config1"] = int(value, 0) << 32
        elif key == "ocr_msr_val":
            changes["msr_value"] = int(value, 0)
        elif key in ("opc", "tid"):  # Haswell/Broadwell-EP C-box filters
            terms[f"filter_{key}"] = int(value, 0)
        else:
            raise ValueError(f"unknown modifier {mod!r}")
    return dataclasses.replace(base, name=text, terms=tuple(terms.items()), **changes)


def resolve(
    text: str,
    catalog: Catalog,
    pmu: str = "cpu",
    retire_latency: dict[str, float] | None = None,
) -> Resolved:
    """Resolve one metric event text against a catalog (case-insensitive names)."""
    whole = catalog.find(text) if ":" in text else []  # tracepoints: sched:sched_switch
    if whole:
        return Resolved(text, whole[0])
    if text.startswith("mem:"):  # a hardware breakpoint: any address is an event
        try:
            return Resolved(text, host.breakpoint_event(text))
        except AutoprofError as err:
            return Resolved(text, missing=str(err))
    base_name, modifiers = split(text)
    upper = base_name.upper()
    if upper in PERF_EVENTS:
        spec, perf_pmu, factor = PERF_EVENTS[upper]
        found = [e for e in catalog.events if e.spec == spec]
        event = found[0] if found else Event(name=spec, pmu=perf_pmu, spec=spec)
        return Resolved(text, event, factor)
    if upper in TOPDOWN:
        listed = _find(catalog, base_name, pmu)
        if listed is not None:  # the catalog's own, led by TOPDOWN.SLOTS in perf's group
            return Resolved(text, listed)
        slots = _find(catalog, SLOTS, pmu)
        if slots is None:
            return Resolved(text, missing=f"{SLOTS} is not in the catalog")
        spec = f"{slots.pmu}/{TOPDOWN[upper]},name={base_name}/"
        return Resolved(text, Event(name=base_name, pmu=slots.pmu, spec=spec))
    mods = [m for m in modifiers if m.lower() != "retire_latency"]
    if len(mods) != len(modifiers):
        value = (retire_latency or {}).get(upper)
        if value is None:
            return Resolved(text, missing="retire latency: needs perf record sampling (TPEBS)")
        return Resolved(text, constant=value)
    base = _find(catalog, base_name, pmu)
    if base is None:
        left_out = next((x for x in catalog.excluded if x.name.upper() == upper), None)
        if left_out is not None:  # the data has it, the machine cannot count it: say why
            return Resolved(text, missing=f"left out of the catalog: {left_out.reason}")
        return Resolved(text, missing="no such event in the catalog")
    if all(m.lower() in SAME_EVENT for m in mods):
        return Resolved(text, base)
    try:
        return Resolved(text, modify(base, text, mods))
    except ValueError as err:
        return Resolved(text, missing=str(err))


def _find(catalog: Catalog, name: str, pmu: str) -> Event | None:
    found = catalog.find(name)
    return next((e for e in found if e.pmu == pmu), found[0] if found else None)


def result_name(text: str) -> tuple[str, float, bool]:
    """How results name the event `resolve` chose for `text`: (name, factor to apply, whether
    to take the mean over uncore boxes instead of their sum, for ``:one_unit``)."""
    base, mods = split(text)
    upper = base.upper()
    if upper in PERF_EVENTS:
        spec, _, factor = PERF_EVENTS[upper]
        return spec, factor, False
    if upper in TOPDOWN:
        return base, 1.0, False
    lowered = [m.lower() for m in mods]
    if all(m in SAME_EVENT for m in lowered):
        return base, 1.0, "one_unit" in lowered
    return text, 1.0, False
