"""perf's term names per PMU kind: the one place that writes `pmu/terms/`.

An event's encoding is held as explicit fields on `Event` (code, umask, cmask, edge, inv,
anythread, msr_value and extra format `terms`); `spec(event)` turns them into the string
`perf stat -e` gets, with the term names the kernel's sysfs ``format/`` directory of that kind
of PMU defines. The names and rules follow perf's own conversion of Intel's perfmon data
(``tools/perf/pmu-events/jevents.py`` over ``create_perf_json.py`` output); where that
converter loses bits the kernel's format can carry (ExtSel, UMaskExt with UMask 0, the PCU's
occupancy select) the kernel's format definitions (arch/x86/events/intel/uncore*.c) win.

Styles (the kind of PMU):
- ``core``: cpu / cpu_core / cpu_atom: event, umask, cmask, edge, inv, any, and one shared
  register term (offcore_rsp / ldlat / frontend) whose value is `msr_value`;
- ``uncore``: server uncore boxes: the counter mask is ``thresh``;
- ``uncore_client``: client uncore (cbox, arb, clock, imc): the counter mask is ``cmask``;
- ``raw``: the whole config given as ``config=`` (a box whose format cannot name a bit);
- ``jevents``: perf's own pmu-events data (AMD Zen, Arm64): the terms exactly as perf's
  jevents.py writes them (`jevents_terms`: ``event=`` or ``config=``/``eventid=`` first, then
  its fixed field order), held whole in `terms`.
Free-running and fixed uncore counters are ``uncore`` events with event=0xff (their PMU and
umask are chosen by the catalog reader).

Deriving an event (e.g. metrics with perf modifiers :c1 :e1 :i1): ``dataclasses.replace(event,
name="X.Y:c1", cmask=1, edge=True, inv=True, anythread=True, umask=...)``; the result's
``.spec`` (computed by `spec`, the single entry point) is its string, with a quoted ``name=``
when the name needs it. Counters stay the caller's business: a fixed-counter event given a
cmask must move to generic counters (``fixed=None, counters=...``).

`parse_terms` reads a ``pmu/terms/`` string back into (pmu, {term: value}), so strings can be
compared term by term (tests, and matching a user's raw event to a catalog event).
"""

from __future__ import annotations

import functools
import re
from typing import Protocol

CORE = "core"
UNCORE = "uncore"
UNCORE_CLIENT = "uncore_client"
RAW = "raw"
JEVENTS = "jevents"
STYLES = (CORE, UNCORE, UNCORE_CLIENT, RAW, JEVENTS)
# jevents.py `JsonEvent` (event_fields): the order of the terms after the event's code.
JEVENTS_ORDER = (
    "any",
    "ch_mask",
    "cmask",
    "edge",
    "fc_mask",
    "inv",
    "period",
    "umask",
    "type",
    "rdwrmask",
    "enallcores",
    "enallslices",
    "sliceid",
    "threadmask",
)
# The core PMUs of hybrid parts, one per core type (arch/x86/events/intel/core.c).
HYBRID_CORE_PMUS = frozenset({"cpu_core", "cpu_atom", "cpu_lowpower"})

# Shared-register MSR -> the core format term that carries the register's value.
MSR_TERM = {"0x1a6": "offcore_rsp", "0x1a7": "offcore_rsp", "0x3f6": "ldlat", "0x3f7": "frontend"}
_COUNTER_MASK = {CORE: "cmask", UNCORE: "thresh", UNCORE_CLIENT: "cmask"}
# Terms whose value is a label or a sampling setting, not part of what is counted.
LABEL_TERMS = frozenset({"name", "period"})


class Encoded(Protocol):
    """What the encoding reads of an event (`catalog.model.Event` has it all): its fields, not
    the record, so that the model can encode itself without the two importing each other."""

    @property
    def name(self) -> str: ...
    @property
    def pmu(self) -> str: ...
    @property
    def style(self) -> str: ...
    @property
    def code(self) -> int: ...
    @property
    def umask(self) -> int: ...
    @property
    def cmask(self) -> int: ...
    @property
    def edge(self) -> bool: ...
    @property
    def inv(self) -> bool: ...
    @property
    def anythread(self) -> bool: ...
    @property
    def msr_value(self) -> int: ...
    @property
    def terms(self) -> tuple[tuple[str, int], ...]: ...
    @property
    def registers(self) -> frozenset[str]: ...
    @property
    def suffix(self) -> str: ...


def number(value: int) -> str:
    """A value as perf's jevents writes it (printf ``%#llx``, small values in decimal)."""
    return str(value) if 0 <= value < 10 else hex(value)


def terms(event: Encoded) -> list[tuple[str, int]]:
    """The (term, value) pairs of an encoded event, in perf's order, without the name."""
    if event.style in (RAW, JEVENTS):
        return list(event.terms)
    out = [("event", event.code)]
    if event.umask:
        out.append(("umask", event.umask))
    if event.cmask:
        out.append((_COUNTER_MASK[event.style], event.cmask))
    out += [(t, 1) for t, on in (("edge", event.edge), ("inv", event.inv)) if on]
    if event.anythread:
        out.append(("any", 1))
    out += list(event.terms)
    if event.style == CORE and event.registers:
        out.append((MSR_TERM[min(event.registers)], event.msr_value))
    return out


def jevents_terms(code_term: str, code: int, fields: dict[str, int]) -> tuple[tuple[str, int], ...]:
    """perf's string for a pmu-events JSON event: the code term (``event``, or ``config`` /
    ``eventid``) then every non-zero field in jevents' order (an unknown field is an error)."""
    unknown = sorted(set(fields) - set(JEVENTS_ORDER))
    if unknown:
        raise ValueError(f"no perf term {unknown[0]!r} in jevents' fields")
    return ((code_term, code), *((t, fields[t]) for t in JEVENTS_ORDER if fields.get(t)))


_BARE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
_QUOTED_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_*?\-,.\[\]:=]*$")


def name_term(name: str) -> str:
    """perf's ``name=`` term: bare for perfmon-style names, quoted (``name='X.Y:c1'``) for names
    with characters perf's lexer only takes inside quotes (``:``, ``-``, ``=``, ``,``)."""
    if _BARE_NAME.match(name):
        return f"name={name}"
    if _QUOTED_NAME.match(name):
        return f"name='{name}'"
    raise ValueError(f"event name {name!r} cannot be given to perf as a name= term")


def printed_name(event: Encoded) -> str:
    """The name= value of an event: what perf prints for it. perf prints a configured name as
    given, whatever the PMU (tools/perf/util/stat-display.c, uniquify_event_name: "If user
    configs the name, we still use the user specified name"), and a hybrid part's core types
    share event names (INST_RETIRED.ANY on cpu_core and on cpu_atom, often in one run), so
    there the name says its PMU: ``cpu_atom.INST_RETIRED.ANY``."""
    return f"{event.pmu}.{event.name}" if event.pmu in HYBRID_CORE_PMUS else event.name


def spec(event: Encoded) -> str:
    """The exact argument for ``perf stat -e``: ``pmu/term=value,...,name=NAME/``."""
    if event.style not in STYLES:
        raise ValueError(f"unknown encoding style {event.style!r} for {event.name}")
    body = ",".join(f"{t}={number(v)}" for t, v in terms(event))
    return f"{event.pmu}/{body},{name_term(printed_name(event))}/{event.suffix}"


_SPEC = re.compile(r"^([\w.-]+)/(.*)/$")
# One event as perf's parser reads it (tools/perf/util/parse-events.l), in the forms autoprof
# writes or resolves: a name (task-clock, cycles, r01c2), a tracepoint, a hardware breakpoint,
# or pmu/term=value,.../ with perf's modifiers. No commas or braces outside the terms (two
# events, a group), no slash inside them.
_TERM = r"[\w.-]+(?:=(?:[\w.?-]+|'[\w.:=-]*'))?"
_ONE_EVENT = (
    r"[\w.-]+|[\w-]+:[\w-]+|mem:(?:0x[0-9a-fA-F]+|\d+)(?:/\d+)?(?::[rwx]{1,3})?"
    rf"|[\w.-]+/(?:{_TERM}(?:,{_TERM})*)?/[ukhpPGHSDIW]*"
)  # compiled when first used (`_one_event`): ~3 ms, and most starts check no event text


@functools.cache
def _one_event() -> re.Pattern[str]:
    return re.compile(_ONE_EVENT)


# perf (before 6.6) loads a BPF object, or compiles C, for an event whose text (or a prefix of
# it, up to a comma or brace) names a file ending .o, .obj, .c or .bpf* (parse-events.l:
# bpf_object, bpf_source, isbpf_suffix): no piece of an event text may end so.
_BPF_NAME = re.compile(r"\.(?:o|obj|c)(?=$|[,{}/=':])|\.bpf")


def event_text_problem(text: str) -> str | None:
    """Why `text` cannot go to ``perf -e`` as one event (None when it can): a second event
    after a comma, a group, a path, or a name perf would read as a BPF program."""
    if not _one_event().fullmatch(text):
        return f"{text!r} is not one event as perf writes it"
    if _BPF_NAME.search(text):
        return f"{text!r} names a file perf would load as a BPF program"
    return None


def parse_terms(text: str) -> tuple[str, dict[str, int | str]] | None:
    """(pmu, {term: value}) of a ``pmu/t=v,.../`` string (values as ints where numeric, a bare
    term as 1); None when `text` is not of that form."""
    match = _SPEC.match(text.strip())
    if not match:
        return None
    values: dict[str, int | str] = {}
    for part in filter(None, match.group(2).split(",")):
        key, sep, raw = part.partition("=")
        key = key.strip()
        if not sep:
            values[key] = 1
            continue
        try:
            values[key] = int(raw.strip(), 0)
        except ValueError:
            values[key] = raw.strip().strip("'")
    return match.group(1), values


def counted(values: dict[str, int | str]) -> dict[str, int | str]:
    """The terms that decide what is counted: zero values and labels dropped."""
    return {k: v for k, v in values.items() if k not in LABEL_TERMS and v != 0}
