"""User-only and kernel-only counting, as perf spells it: ``NAME:u`` / ``NAME:k``, and
``pmu/terms/u`` for an event string.

An event counted in one mode is an event of its own: `with_modifier` names it ``NAME:u`` (a
catalog event's ``name=`` term says so, so perf prints that very name) and gives perf the
modifier, so the plan, run.json, results.csv and the sanity report all keep the mode, and
``INST_RETIRED`` and ``INST_RETIRED:u`` can be counted in one run. `profile --user` applies
``:u`` to every event (`user_only`): what perf counts for a non-root user when
kernel.perf_event_paranoid is 2.

Tracepoints fire in the kernel: ``:u`` would count nothing and ``:k`` changes nothing, so a
modifier on one is refused (and a --user profile of every event leaves them out, saying why).
"""

from __future__ import annotations

import re
from dataclasses import replace

from autoprof.catalog import encoding
from autoprof.catalog.model import Catalog, Event, Exclusion
from autoprof.errors import AutoprofError

USER, KERNEL = "u", "k"
MODES = {USER: "user mode", KERNEL: "kernel mode"}
TRACEPOINTS = "tracepoint"
_COLON = re.compile(r"^(?P<base>.+):(?P<mod>[uk])$")
_SLASH = re.compile(r"^(?P<base>[\w.-]+/.*/)(?P<mod>[uk])$")
_NAME_TERM = re.compile(r",name=('[^']*'|[^,/]*)")


def split(text: str) -> tuple[str, str]:
    """(event, modifier) of an event as typed: ``INST_RETIRED:u`` -> (``INST_RETIRED``,
    ``u``), ``cpu/event=0x3c/k`` -> (``cpu/event=0x3c/``, ``k``); (text, "") without one."""
    for pattern in (_SLASH, _COLON):
        match = pattern.match(text)
        if match:
            return match["base"], match["mod"]
    return text, ""


def named(name: str, modifier: str) -> str:
    """An event's name in `modifier`'s mode: ``INST_RETIRED:u``, ``msr/tsc/u``."""
    if name.endswith((f":{modifier}", f"/{modifier}")):
        return name
    return f"{name}{modifier}" if name.endswith("/") else f"{name}:{modifier}"


def with_modifier(event: Event, modifier: str) -> Event:
    """`event` counted in `modifier`'s mode only, named ``NAME:u`` (or ``:k``); the same event
    when it counts in that mode already."""
    name = named(event.name, modifier)
    if name == event.name:
        return event
    if event.pmu == TRACEPOINTS:
        raise AutoprofError(
            f"{event.name}:{modifier}: a tracepoint fires in the kernel, so :u would count "
            "nothing and :k changes nothing"
        )
    held = event.suffix or _held(event)
    if held:
        raise AutoprofError(f"{event.name} counts in {MODES.get(held, held)} only already")
    leader = named(event.leader, modifier) if event.leader else None
    if event.style:  # the spec is derived: name='NAME:u' and the modifier after the slash
        return replace(event, name=name, suffix=modifier, leader=leader)
    spec = event.spec
    if spec.endswith("/"):  # pmu/terms/: a name= term must say the mode too, perf prints it
        spec = _NAME_TERM.sub(
            lambda m: "," + encoding.name_term(_unquoted(m[1]) + f":{modifier}"), spec
        )
        spec += modifier
    else:
        spec += f":{modifier}"
    return replace(event, name=name, spec=spec, leader=leader)


def _unquoted(value: str) -> str:
    return value[1:-1] if value.startswith("'") and value.endswith("'") else value


def _held(event: Event) -> str:
    """The modifier an unencoded event's string carries already (``page-faults:u``)."""
    return split(event.spec)[1] if not event.style else ""


def user_only(catalog: Catalog) -> Catalog:
    """Every event of `catalog` counted in user mode only (`profile --user`); its tracepoints
    are left out with the reason."""
    kept = [e for e in catalog.events if e.pmu != TRACEPOINTS]
    dropped = [
        Exclusion(e.name, e.pmu, "a tracepoint fires in the kernel: nothing to count with --user")
        for e in catalog.events
        if e.pmu == TRACEPOINTS
    ]
    events = [with_modifier(e, USER) for e in kept]
    return Catalog(
        catalog.cpu,
        {e.pmu: catalog.pmus[e.pmu] for e in events},
        events,
        catalog.excluded + dropped,
        catalog.source,
        catalog.note,
    )
