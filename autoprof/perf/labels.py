"""How perf prints an event's name in `perf stat` output, and back.

perf does not always print an event as it was given: an event given ``name=X`` inside a PMU's
slashes prints as ``pmu/X/`` (or ``X``); an uncore event prints once per box, naming the box
(``uncore_cha_3/event=0x0/``, ``UNC_CHA_CLOCKTICKS [uncore_cha_3]``) or, when it was given
``name=``, not naming it at all; and perf may append a modifier it chose itself (``task-clock:u``
in a rootless container). This module is the one place that knows those spellings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TypeVar

T = TypeVar("T")

# perf appends event modifiers it chose itself: `task-clock:u`, `msr/tsc/u`, and on tracepoints
# (whose names hold a colon already) without one: `syscalls:sys_enter_writeu`
_MODIFIER = re.compile(r"^[ukhIGHpPSDWe]{1,4}$")
_INSTANCE_SLASH = re.compile(r"^(?P<pmu>[A-Za-z0-9_.-]+?)_(?P<n>\d+)/(?P<rest>.*)$")
_INSTANCE_BRACKET = re.compile(r"^(?P<name>.*) \[(?P<inst>[^\]]+)\]$")


def printed_forms(pmu: str, label: str, spec: str) -> tuple[str, ...]:
    """Every text perf may print for an event of `pmu` given as `spec` with name= `label`."""
    return (f"{pmu}/{label}/", spec, label)


def first_clash(events: Iterable[tuple[str, str, str, T]]) -> tuple[str, T, T] | None:
    """The first text perf may print for two different events of one run, given as (pmu,
    label, spec, identity), with both identities: their counts could not be told apart."""
    owner: dict[str, T] = {}
    for pmu, label, spec, identity in events:
        for form in printed_forms(pmu, label, spec):
            other = owner.setdefault(form, identity)
            if other != identity:
                return form, other, identity
    return None


def inner_name(printed: str) -> str:
    """``uncore_cha/UNC_CHA_CLOCKTICKS/`` -> ``UNC_CHA_CLOCKTICKS`` (perf wraps a name= event)."""
    if printed.count("/") == 2 and printed.endswith("/"):
        return printed.split("/")[1]
    return printed


def resolve(printed: str, table: Mapping[str, T]) -> tuple[T | None, str]:
    """The entry of `table` (keyed by `printed_forms`) that perf printed as `printed`, and the
    modifier perf appended ('' if none); (None, '') when none matches."""
    for text in (printed, inner_name(printed)):
        if text in table:
            return table[text], ""
    for cut in range(1, 5):
        modifier, stem = printed[-cut:], printed[:-cut]
        if not _MODIFIER.match(modifier):
            break
        for text in (stem.removesuffix(":"), inner_name(stem)):
            if text in table:
                return table[text], modifier
    return None, ""


def split_instance(event: str) -> tuple[str, str | None]:
    """(event without instance, uncore instance) in both ways perf names a box:
    ``uncore_cha_3/event=0x0/`` and ``UNC_CHA_CLOCKTICKS [uncore_cha_3]``."""
    match = _INSTANCE_SLASH.match(event)
    if match:
        return f"{match['pmu']}/{match['rest']}", f"{match['pmu']}_{match['n']}"
    match = _INSTANCE_BRACKET.match(event)
    if match:
        return match["name"], match["inst"]
    return event, None


def box_name(pmu: str | None, nth: int) -> str:
    """The name of the `nth` box (0-based, in perf's print order) of an uncore PMU whose lines
    do not name their box (an event given name=): perf's own spelling, ``uncore_cha_3``."""
    return f"{'<NA>' if pmu is None else pmu}_{nth}"


def is_uncore(pmu: str | None) -> bool:
    """Whether perf counts `pmu` per box of a socket (read on one CPU of it), not per core."""
    return (pmu or "").startswith("uncore")
