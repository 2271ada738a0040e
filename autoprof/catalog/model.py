"""The catalog model: events, the PMUs that count them, and their counter constraints.

A run of the program counts on every PMU of the machine at once. What limits one run is
per PMU: its generic counters (each event names the ones it may use), its fixed counters (an
event bound to one), shared registers (offcore-response MSRs, load-latency, frontend: each
holds one event per run), and TakenAlone events that leave no other generic counter in use.
Events with no counter at all (software events, tracepoints, free-running uncore counters) are
unconstrained. Everything the scheduler needs is in these records; nothing here knows a file
format.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from autoprof.catalog import encoding
from autoprof.errors import AutoprofError
from autoprof.util.suggest import close_matches


@dataclass(frozen=True)
class Event:
    """One countable event on one PMU.

    `counters` are the generic counters it may use; `fixed` the fixed counter it is bound to;
    `registers` the shared registers (e.g. ``{"0x1a6", "0x1a7"}``) of which it needs one.
    An event with neither counters nor a fixed counter needs no counter (unconstrained).

    How perf is told to count it: an event with a `style` (the kind of its PMU, see
    `autoprof.catalog.encoding`) is encoded by its explicit fields (`code`, `umask`, `cmask`,
    `edge`, `inv`, `anythread`, `msr_value`, extra format `terms`, the `suffix` of modifiers
    such as ``u``), and its `spec` is always
    derived from them, also after ``dataclasses.replace(event, cmask=1, ...)``. An event
    without a style (software events, tracepoints, breakpoints) is given by its `spec`.
    `leader` names the event that must lead any group holding this one (topdown metrics need
    TOPDOWN.SLOTS first). A `pair` event sits on an even counter of `counters` and takes its
    odd neighbour too (AMD's PMCx003 FLOPs events, see `autoprof.schedule.rules`).
    """

    name: str
    pmu: str
    spec: str = ""  # the argument for `perf stat -e`
    counters: frozenset[int] = frozenset()
    fixed: int | None = None
    registers: frozenset[str] = frozenset()
    taken_alone: bool = False
    description: str = ""
    errata: str | None = None
    deprecated: bool = False
    experimental: bool = False
    style: str = ""
    code: int = 0
    umask: int = 0
    cmask: int = 0
    edge: bool = False
    inv: bool = False
    anythread: bool = False
    msr_value: int = 0
    terms: tuple[tuple[str, int], ...] = ()
    leader: str | None = None
    suffix: str = ""  # perf's modifiers after the last slash: u (user only), k (kernel only)
    pair: bool = False  # needs an even counter and its odd neighbour (AMD's merge events)

    def __post_init__(self) -> None:
        if self.style:
            object.__setattr__(self, "spec", encoding.spec(self))
        elif not self.spec:
            object.__setattr__(self, "spec", self.name)

    @functools.cached_property
    def key(self) -> tuple[str, str]:
        """(pmu, name), made once: the scheduler compares keys millions of times."""
        return (self.pmu, self.name)

    @property
    def label(self) -> str:
        """What perf prints for this event (the `name=` term, or perf's own event name)."""
        if self.style:
            return encoding.printed_name(self)
        return self.name if ",name=" in self.spec else self.spec

    @property
    def constrained(self) -> bool:
        return bool(self.counters) or self.fixed is not None


@dataclass(frozen=True)
class Pmu:
    """A PMU (or uncore unit type) as a scheduling domain.

    `generic`: programmable counters available to autoprof (after `reserved`); `reserved`:
    counters taken by someone else in every run (the NMI watchdog) from the `generic +
    reserved` the hardware has; `reserved_fixed`: fixed counters taken so, not in `fixed` (Arm's
    cycle counter, which the watchdog's cycles event holds before any generic one); `slots`:
    an unconstrained PMU has none (None).
    `system_wide`: the kernel refuses task-bound events on it (Intel's uncore, AMD's
    L3/DF/UMC, Arm's uncore: no task context, ``task_ctx_nr = perf_invalid_context``, and
    ``event->cpu < 0`` is -EINVAL, e.g. uncore_snb.c:1038 and :928 of torvalds/linux at
    0401bbf56da5): only a system-wide profile (``-a``, ``--cpu-list``) counts them.
    """

    name: str
    generic: int = 0
    fixed: int = 0
    reserved: int = 0
    unconstrained: bool = False
    description: str = ""
    system_wide: bool = False
    reserved_fixed: int = 0

    @property
    def counters(self) -> int:
        """Hardware generic counters, including the reserved ones."""
        return self.generic + self.reserved


@dataclass(frozen=True)
class Exclusion:
    """An event left out of the plan, and why (deprecated, experimental, no counter data...)."""

    name: str
    pmu: str
    reason: str


@dataclass(frozen=True)
class ReadOptions:
    """How to read vendor data: SMT state, counters reserved by others, opt-in event sets, and
    counter numbers that replace a per-model table's (``--counters PMU=N``)."""

    smt: bool = True
    reserve: int = 0
    experimental: bool = False
    deprecated: bool = False
    offcore_matrix: bool = False
    counters: tuple[tuple[str, int], ...] = ()
    core_pmu: str = ""  # Arm: the core PMU's name on the machine planned for ("" = default)
    # Intel: PMUs whose live `event` format carries ExtSel (config bit 21), e.g. an old kernel's
    # uncore_pcu on JKT; empty when planning for another machine (today's kernels: none)
    event_ext: tuple[str, ...] = ()


@dataclass
class Catalog:
    """Every event a machine offers, the PMUs they run on, and what was left out."""

    cpu: str
    pmus: dict[str, Pmu] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    excluded: list[Exclusion] = field(default_factory=list)
    source: str = ""
    note: str = ""  # one line for the user (e.g. no vendor data knows this machine's CPU)

    def merge(self, other: Catalog) -> Catalog:
        """This catalog plus another's PMUs and events (e.g. Intel core + host software)."""
        pmus = dict(self.pmus)
        for name, pmu in other.pmus.items():
            pmus.setdefault(name, pmu)
        seen = {e.key for e in self.events}
        events = self.events + [e for e in other.events if e.key not in seen]
        source = " + ".join(s for s in (self.source, other.source) if s)
        note = self.note or other.note
        return Catalog(self.cpu, pmus, events, self.excluded + other.excluded, source, note)

    def find(self, name: str) -> list[Event]:
        """Events called `name` (case-insensitive); ``pmu/name`` picks one PMU's event."""
        wanted = name.lower()
        exact = [e for e in self.events if e.name.lower() == wanted]
        if exact:
            return exact
        pmu, sep, bare = name.partition("/")
        bare = bare.strip("/").lower()
        return [e for e in self.events if sep and e.pmu == pmu and e.name.lower() == bare]

    def select(self, names: list[str]) -> Catalog:
        """A catalog with only the named events (and the group leaders they need); a name left
        out of the catalog is an error with the reason, an unknown one with suggestions."""
        chosen: list[Event] = []
        for name in names:
            found = self.find(name)
            if not found:
                for x in self.excluded:
                    if name.lower() in (x.name.lower(), f"{x.pmu}/{x.name}".lower()):
                        raise AutoprofError(
                            f"{x.pmu}/{x.name} is left out for {self.cpu}: {x.reason}"
                        )
                close = close_matches(name, [e.name for e in self.events], n=3)
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise AutoprofError(f"unknown event {name!r} for {self.cpu}{hint}")
            chosen.extend(e for e in found if e not in chosen)
        keys = {e.key for e in chosen}
        leaders = {(e.pmu, e.leader) for e in chosen if e.leader} - keys
        chosen = [e for e in self.events if e.key in leaders] + chosen  # topdown needs slots
        pmus = {e.pmu: self.pmus[e.pmu] for e in chosen}
        return Catalog(self.cpu, pmus, chosen, [], self.source)
