"""From a metric's event text (``ICACHE_16B.IFDATA_STALL:c1:e1``, ``TSC``,
``cpu/de_no_dispatch_per_slot.no_ops_from_frontend,cmask=0x6/``) to a catalog Event.

A modified event is derived from its base event with `dataclasses.replace`: the same counter
constraints, a perf string with the modifier's terms, and the metric's own spelling as its name
(perf prints a quoted ``name='...'`` term back as written, so results keep that name). perf's
``pmu/event,term=value/`` form is that event with the terms as modifiers, named
``event:term=value`` (`derived_name`); a ``pmu/event=0x201d/`` of raw terms only is an event of
its own on that PMU's counters, named as written. Events no vendor file lists come from perf's
own events (`PERF_EVENTS`) or its generic ones (``instructions``, `perfnames`); the Top-down
``PERF_METRICS.*`` values are perf's ``topdown-*`` events, read with TOPDOWN.SLOTS (the
co-scheduler puts them in its run). `modify` is the one place that maps modifiers to terms.
``source_count(EVENT)`` (perf's expressions) reads EVENT: how many counters gave its value.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from autoprof.catalog import encoding, host, perfnames
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
# terms perf's formats define (a bare one is a flag, not an event name): kernel format names
_FORMAT_TERMS = frozenset(encoding.JEVENTS_ORDER) | {"event", "config", "config1", "config2"}
SOURCE_COUNT = re.compile(r"^source_count\((.+)\)$")


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


def counted(text: str) -> str | None:
    """The event of a ``source_count(EVENT)`` text (None for any other text)."""
    match = SOURCE_COUNT.match(text)
    return match.group(1) if match else None


def pmu_form(text: str) -> tuple[str, str | None, list[str]] | None:
    """perf's ``pmu/event,term=value/`` text as (pmu, event or None, ["term=value", ...]);
    None for any other text."""
    parsed = encoding.parse_terms(text) if "/" in text and not text.startswith("mem:") else None
    if parsed is None:
        return None
    pmu, body = text.split("/", 1)
    parts = [p.strip() for p in body.rstrip("/").split(",") if p.strip()]
    event = parts[0] if parts and "=" not in parts[0] and parts[0] not in _FORMAT_TERMS else None
    return pmu, event, parts[1:] if event else parts


def derived_name(text: str) -> str:
    """How results name the event of a ``pmu/event,term=value/`` text: ``event:term=value``
    (perf's quoted name= term keeps it); a raw ``pmu/terms/`` text keeps its spelling, or the
    value of its own ``name=`` term."""
    form = pmu_form(text)
    if form is None:
        return text
    _, event, terms = form
    if event is None:
        named = [t.partition("=")[2] for t in terms if t.startswith("name=")]
        return named[0].strip("'") if named else text
    return ":".join([event, *terms])


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
    jevents = base.style == encoding.JEVENTS
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
        elif jevents and value:  # perf's own data: any term of the PMU's format
            terms[key] = int(value, 0)
        else:
            raise ValueError(f"unknown modifier {mod!r}")
    if jevents:  # the whole string is in `terms`, in jevents' order
        for field in ("cmask", "edge", "inv", "umask"):
            if field in changes:
                terms[field] = int(changes.pop(field))
        code = next(iter(base.terms), ("event", 0))
        order = [code[0], *encoding.JEVENTS_ORDER]
        kept = [(t, terms[t]) for t in order if terms.get(t)]
        kept += [(t, v) for t, v in terms.items() if t not in order]
        terms = dict(kept)
    return dataclasses.replace(base, name=text, terms=tuple(terms.items()), **changes)


def resolve(
    text: str,
    catalog: Catalog,
    pmu: str = "cpu",
    retire_latency: dict[str, float] | None = None,
) -> Resolved:
    """Resolve one metric event text against a catalog (case-insensitive names)."""
    whole = catalog.find(text) if ":" in text or "/" in text else []  # sched:sched_switch
    if whole:
        return Resolved(text, whole[0])
    of = counted(text)
    if of is not None:
        inner = resolve(of, catalog, pmu, retire_latency)
        return dataclasses.replace(inner, text=text, constant=None)
    form = pmu_form(text)
    if form is not None:
        return _resolve_form(text, form, catalog)
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
        generic = perfnames.resolve(catalog, text, None) if text in perfnames.GENERIC else None
        if generic is not None:  # perf's own name (AMD's metrics read `instructions`)
            return Resolved(text, generic.events[0])
        left_out = next((x for x in catalog.excluded if x.name.upper() == upper), None)
        if left_out is not None:  # the data has it, the machine cannot count it: say why
            return Resolved(text, missing=f"left out of the catalog: {left_out.reason}")
        return Resolved(text, missing="no such event in the catalog")
    if all(m.lower() in SAME_EVENT for m in mods):
        return Resolved(text, base)
    return _derived(base, text, mods, catalog)


def _derived(base: Event, name: str, mods: list[str], catalog: Catalog) -> Resolved:
    """`base` with perf modifiers, named `name`; off the fixed counter, which counts its own
    event only, onto the PMU's generic counters."""
    try:
        event = modify(base, name, mods)
    except ValueError as err:
        return Resolved(name, missing=str(err))
    if event.fixed is not None and event.pmu in catalog.pmus:
        generic = frozenset(range(catalog.pmus[event.pmu].counters))
        event = dataclasses.replace(event, fixed=None, counters=generic)
    return Resolved(name, event)


def _resolve_form(text: str, form: tuple[str, str | None, list[str]], catalog: Catalog) -> Resolved:
    """perf's ``pmu/event,term=value/``: `event` of `pmu` with the terms as modifiers, or, with
    raw terms only, an event of its own on the PMU's counters, given to perf as written."""
    pmu, name, terms = form
    unit = catalog.pmus.get(pmu)
    if unit is None:
        return Resolved(text, missing=f"no PMU {pmu} on this machine")
    if name is None:
        counters = frozenset() if unit.unconstrained else frozenset(range(unit.counters))
        event = Event(name=derived_name(text), pmu=pmu, spec=text, counters=counters)
        return Resolved(text, event)
    base = next((e for e in catalog.find(name) if e.pmu == pmu), None)
    if base is None:
        return Resolved(text, missing=f"no such event {name} on {pmu}")
    mods = []
    for term in terms:
        key, _, value = term.partition("=")
        short = {v: k for k, v in _TERM_NAMES.items()}.get(key)
        mods.append(f"{short}{value or 1}" if short and key != "eq" else term)
    return _derived(base, derived_name(text), mods, catalog)


def _find(catalog: Catalog, name: str, pmu: str) -> Event | None:
    found = catalog.find(name)
    return next((e for e in found if e.pmu == pmu), found[0] if found else None)


def result_name(text: str) -> tuple[str, float, bool]:
    """How results name the event `resolve` chose for `text`: (name, factor to apply, whether
    to take the mean over uncore boxes instead of their sum, for ``:one_unit``)."""
    of = counted(text)
    if of is not None:
        return result_name(of)
    if pmu_form(text) is not None:
        return derived_name(text), 1.0, False
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
