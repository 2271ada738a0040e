"""The catalog of the live machine: the PMUs the kernel exposes, and the events perf can count
here that no vendor file lists (software events, tracepoints, msr/*, hardware breakpoints).

Reading the machine's identity and settings is `catalog.machine`'s (CPU id, SMT, CPU lists,
`read_facts`); this module assembles a Catalog from what it and the event data say.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from autoprof.catalog import (
    cache,
    embedded,
    encoding,
    formats,
    machine,
    modifiers,
    perfnames,
    vendor,
    yaml,
)
from autoprof.catalog import probe as counter_probe
from autoprof.catalog.model import Catalog, Event, Exclusion, Pmu, ReadOptions
from autoprof.errors import AutoprofError
from autoprof.perf import command as perf_command
from autoprof.perf import query as perf_query
from autoprof.util import xdg
from autoprof.util.suggest import close_matches

SYSFS_PMUS = machine.SYSFS_PMUS
TRACEFS = Path("/sys/kernel/tracing/events")
ENV_EVENTS_DIR = "AUTOPROF_EVENTS_DIR"
# Debug registers for hardware breakpoints (mem:ADDR) on x86; other architectures vary.
BREAKPOINT_SLOTS = {"x86_64": 4, "i686": 4, "i386": 4}
_BREAKPOINT = re.compile(r"^mem:(0x[0-9a-fA-F]+|\d+)(?:/\d+)?(?::[rwx]+)?$")
_TRACEPOINT = re.compile(r"[\w-]+:[\w-]+")  # subsystem:event


# The PMUs of every Linux machine, hardware counters or not (host_catalog adds their events).
HOST_PMUS = frozenset({"software", "tracepoint", "breakpoint", "msr"})


def tracepoints() -> list[str]:
    """``subsystem:event`` for every tracepoint of this machine, from tracefs; where nothing
    mounted tracefs yet (a fresh VM), perf's list: perf mounts it when it may (root), as it
    does for `perf stat -e sys:event`. Empty when neither can read them (`tracepoint_hint`)."""
    try:
        found = sorted(
            f"{sub.name}:{ev.name}"
            for sub in TRACEFS.iterdir()
            if sub.is_dir()
            for ev in sub.iterdir()
            if (ev / "id").exists()
        )
    except OSError:
        found = []
    return found or perf_query.tracepoints()


def tracepoint_hint() -> str:
    """Why this machine lists no tracepoint, and the fix; "" when it lists some."""
    if tracepoints():
        return ""
    root = TRACEFS.parent
    if not root.is_dir():
        return f"this kernel has no tracefs ({root}): it offers no tracepoints"
    if not os.access(root, os.R_OK | os.X_OK):
        return (
            f"tracepoints are read from tracefs ({root}), which only root may read: run as "
            f"root, or let this user read it (sudo chmod go+rx {root} {TRACEFS})"
        )
    return (
        f"tracefs is not mounted at {root}: as root, mount -t tracefs nodev {root} "
        "(perf does it itself when run as root)"
    )


def events_dir(explicit: str | Path | None = None, kind: str = vendor.INTEL) -> Path | None:
    """Where a vendor's event data lives: --events-dir, $AUTOPROF_EVENTS_DIR, the user's own copy
    (``$XDG_CACHE_HOME/autoprof/events/<vendor>``, written by `events update`), else the data
    autoprof ships (`embedded`); None when there is none for that vendor."""
    if explicit:
        path = Path(explicit)
        if not path.is_dir():
            raise AutoprofError(f"events directory {path} does not exist")
        return path
    env = os.environ.get(ENV_EVENTS_DIR)
    if env:
        return events_dir(env)
    path = user_events_dir(kind)
    return path if (path / vendor.MAPFILE).is_file() else embedded.directory(kind)


def user_events_dir(kind: str) -> Path:
    return xdg.cache_dir() / "events" / kind


def model_names(directory: Path, kind: str) -> dict[str, str]:
    """The model names a vendor's data knows (``SKX``, ``zen4``, ``neoverse-n1``) -> the name
    its reader takes."""
    from autoprof.catalog import amd, arm, intel  # the readers: not needed for this machine

    if kind == vendor.INTEL:
        names = list(intel.platform_cpu_ids(directory))
    else:
        names = list((amd if kind == vendor.AMD else arm).models(directory))
    return {n.lower(): n for n in names}


def choose_data(explicit: Path | None, cpu: str, named: bool) -> tuple[Path, str, str] | None:
    """(directory, vendor, CPU for its reader) of the data describing `cpu`, a CPU id or a
    model name; None when no data of the CPU id's vendor is at hand. An unknown model name the
    user `named` is an error listing close ones; this machine's, None."""
    if explicit is not None:
        kind = vendor.layout(explicit)
        return explicit, kind, model_names(explicit, kind).get(cpu.lower(), cpu)
    of_id = vendor.vendor_of(cpu)
    if of_id is not None:
        directory = events_dir(None, of_id)
        return None if directory is None else (directory, of_id, cpu)
    if not named:
        return None
    known: list[str] = []
    for kind in vendor.VENDORS:
        directory = events_dir(None, kind)
        names = model_names(directory, kind) if directory else {}
        if directory and cpu.lower() in names:
            return directory, kind, names[cpu.lower()]
        known += names.values()
    close = close_matches(cpu, known, n=5, cutoff=0.5)
    hint = f"; close names: {', '.join(close)}" if close else ""
    raise AutoprofError(f"unknown --cpu {cpu!r}: neither a CPU id nor a model name{hint}")


_find_events_dir = events_dir  # build_catalog's parameter has the same name


def breakpoint_pmu() -> Pmu:
    slots = BREAKPOINT_SLOTS.get(platform.machine(), 4)
    return Pmu("breakpoint", generic=slots, description="hardware breakpoints (debug registers)")


def breakpoint_event(spec: str) -> Event:
    """A hardware breakpoint event for a perf ``mem:ADDR[/LEN][:rwx]`` spec."""
    if not _BREAKPOINT.match(spec):
        raise AutoprofError(f"malformed breakpoint event {spec!r} (expected mem:ADDR[/LEN][:rwx])")
    slots = breakpoint_pmu().generic
    return Event(
        name=spec,
        pmu="breakpoint",
        spec=spec,
        counters=frozenset(range(slots)),
        description="hardware breakpoint",
    )


def _msr_catalog() -> Catalog:
    root = SYSFS_PMUS / "msr" / "events"
    names = sorted(p.name for p in root.iterdir() if "." not in p.name) if root.is_dir() else []
    events = [
        Event(name=f"msr/{n}/", pmu="msr", spec=f"msr/{n}/", description="free-running MSR")
        for n in names
    ]
    pmus = {"msr": Pmu("msr", unconstrained=True)} if events else {}
    return Catalog("", pmus, events, source="sysfs msr")


def _tracepoint_catalog() -> Catalog:
    """The tracepoints (--tracepoints); none, with a note saying why, where none are listed."""
    events = [
        Event(name=t, pmu="tracepoint", spec=t, description="tracepoint") for t in tracepoints()
    ]
    note = "" if events else f"--tracepoints: {tracepoint_hint()}"
    pmus = {"tracepoint": Pmu("tracepoint", unconstrained=True)}
    return Catalog("", pmus, events, source="tracefs", note=note)


def host_catalog(
    events_directory: Path | None = None,
    cpu: str | None = None,
    options: ReadOptions | None = None,
    with_tracepoints: bool = False,
) -> Catalog:
    """Every event of a machine: the vendor catalog for its CPU (Intel, AMD or Arm64 data, as
    its CPU id says, or the layout of an explicit directory) and the kernel's software events,
    plus, for this very machine, msr/*, breakpoints and (opt-in) tracepoints. A CPU of this
    machine that no data knows leaves a `note` (software events only); an unknown `cpu` asked
    for is an error.

    With `cpu` naming another machine, the vendor catalog and the software events apply: every
    Linux kernel counts those (so ``--anchor task-clock`` plans there); what else it offers is
    that machine's sysfs and tracefs.
    """
    here = machine.cpu_id()
    target = cpu or here
    if target == here:  # this machine's kernel: which uncore formats still carry ExtSel
        options = replace(options or ReadOptions(), event_ext=formats.event_ext_pmus(SYSFS_PMUS))
    catalog = Catalog(target, source="")
    chosen = choose_data(events_directory, target, named=bool(cpu))
    if chosen is None:
        if cpu:
            raise AutoprofError(
                f"no event data for --cpu {cpu}: pass --events-dir or set {ENV_EVENTS_DIR}"
            )
        catalog.note = f"no event data knows this machine's CPU id {here}: software events only"
    else:
        directory, kind, name = chosen
        if kind == vendor.INTEL and options is not None and options.counters:
            raise AutoprofError(
                "--counters applies to AMD and Arm data (Intel's lists each event's counters)"
            )
        try:
            catalog = cache.load(directory, name, options, kind)
        except vendor.UnknownCpu as err:
            if cpu:  # the user asked for this CPU: say it is unknown
                raise
            catalog.note = f"{err}: software events only"
    software = cache.load_yaml(yaml.BUILTIN_DIR / "software.yaml", target)
    if target != here and cpu:
        return catalog.merge(software)
    catalog = without_absent_pmus(catalog, SYSFS_PMUS)
    catalog = formats.without_misfits(catalog, SYSFS_PMUS)
    catalog = catalog.merge(software)
    catalog = catalog.merge(_msr_catalog())
    if with_tracepoints:
        catalog = catalog.merge(_tracepoint_catalog())
    catalog.pmus.setdefault("breakpoint", breakpoint_pmu())
    return catalog


def no_pmu_note(sysfs: Path = SYSFS_PMUS) -> str:
    return (
        f"this machine's kernel offers no hardware PMU (no core PMU in {sysfs}: a VM without a "
        "virtual PMU?): only software events, breakpoints, msr and tracepoints count here"
    )


def hardware_events(catalog: Catalog) -> list[Event]:
    """The events of `catalog` that need a hardware PMU (core or uncore counters)."""
    return [e for e in catalog.events if e.pmu not in HOST_PMUS]


def uncountable(catalog: Catalog, sysfs: Path = SYSFS_PMUS) -> list[Event]:
    """The events of `catalog` (this machine's) that its kernel cannot count: every hardware
    event where it offers no core PMU (perf would answer <not supported> for each)."""
    return [] if machine.has_core_pmu(sysfs) else hardware_events(catalog)


def countable(catalog: Catalog, sysfs: Path = SYSFS_PMUS) -> Catalog:
    """Every event of this machine that its kernel counts, for a plan of "every event": the
    catalog less `uncountable`, each left out with the reason, and a note saying so (a VM
    without a virtual PMU profiles its software events, msr and breakpoints)."""
    dropped = uncountable(catalog, sysfs)
    if not dropped:
        return catalog
    gone = {e.key for e in dropped}
    kept = [e for e in catalog.events if e.key not in gone]
    reason = "no hardware PMU on this machine"
    excluded = catalog.excluded + [Exclusion(e.name, e.pmu, reason) for e in dropped]
    pmus = {n: p for n, p in catalog.pmus.items() if n in HOST_PMUS}
    note = f"{no_pmu_note(sysfs)}; {len(dropped)} hardware events left out"
    notes = "; ".join(n for n in (catalog.note, note) if n)
    return Catalog(catalog.cpu, pmus, kept, excluded, catalog.source, notes)


def refuse_uncountable(catalog: Catalog, sysfs: Path = SYSFS_PMUS) -> None:
    """Refuse, before any run and with the fix, a measurement of events this machine's kernel
    cannot count (hardware events asked for by name on a machine without a PMU)."""
    dropped = uncountable(catalog, sysfs)
    if dropped:
        others = f" and {len(dropped) - 1} other hardware events" if len(dropped) > 1 else ""
        raise AutoprofError(
            f"{no_pmu_note(sysfs)}; {dropped[0].name}{others} cannot be counted: measure "
            "software events (-e task-clock -e page-faults ...), or plan for another machine "
            "with: autoprof schedule --cpu NAME"
        )


def without_absent_pmus(catalog: Catalog, sysfs: Path) -> Catalog:
    """The catalog of this machine less the events of PMUs its kernel does not offer (an ARL-S
    has no cpu_lowpower, a smaller Xeon fewer uncore box types), each left out with the reason:
    perf would refuse them, at the cost of one retry in every run holding one. A PMU is there
    as perf finds it, by its own name or numbered boxes (``uncore_cha`` -> ``uncore_cha_3``).
    A kernel that shows none of the catalog's PMUs (a VM without counters) leaves it whole,
    and perf says what it cannot count."""
    here = {p.name for p in sysfs.iterdir()} if sysfs.is_dir() else set()
    boxes = {re.sub(r"_\d+$", "", name) for name in here}

    def present(pmu: str) -> bool:
        return pmu in here or pmu in boxes

    absent = {e.pmu for e in catalog.events if not present(e.pmu)}
    if not absent or not any(present(e.pmu) for e in catalog.events):
        return catalog
    kept = [e for e in catalog.events if e.pmu not in absent]
    reason = f"this machine has no such PMU (not in {sysfs})"
    dropped = [Exclusion(e.name, e.pmu, reason) for e in catalog.events if e.pmu in absent]
    pmus = {n: p for n, p in catalog.pmus.items() if n not in absent}
    excluded = catalog.excluded + dropped
    return Catalog(catalog.cpu, pmus, kept, excluded, catalog.source, catalog.note)


def resolve_events(catalog: Catalog, specs: list[str]) -> Catalog:
    """The catalog restricted to `specs`: catalog names, ``pmu/name``, tracepoints,
    breakpoints ``mem:ADDR:w`` (which no catalog can list: any address is an event), and
    perf's generic, raw and sysfs-alias events (`perfnames.resolve`), each also in user or
    kernel mode only as perf spells it (``INST_RETIRED:u``, ``cpu/event=0x3c/k``:
    `modifiers`).

    The one check of events a user names, for every tool (profile, bench, record; the CLI, a
    worker, the web): what perf is then given is each event's `spec`, and a spec that is not
    exactly one event (`encoding.event_text_problem`: a second event, a BPF object) is refused."""
    chosen = Catalog(catalog.cpu, {}, [], source=catalog.source)
    # None: planning for another CPU
    sysfs = SYSFS_PMUS if catalog.cpu == machine.cpu_id() else None
    listed: list[set[str]] = []  # this machine's tracepoints, listed once when one is named

    def tracepoints_here(spec: str) -> set[str]:
        if not _TRACEPOINT.fullmatch(spec):
            return set()
        if not listed:
            listed.append(set(tracepoints()))
        return listed[0]

    for spec in specs:
        base, modifier = modifiers.split(spec)
        if modifier and (catalog.find(spec) or spec in tracepoints_here(spec)):
            base, modifier = spec, ""  # an event whose own name ends so
        extra = _resolve_one(catalog, base, sysfs, tracepoints_here)
        if modifier:
            events = [modifiers.with_modifier(e, modifier) for e in extra.events]
            extra = Catalog(extra.cpu, extra.pmus, events, [], extra.source)
        known = {e.key: e for e in chosen.events}
        for event in extra.events:
            same = known.get(event.key)
            if same is not None and same.spec != event.spec:
                raise AutoprofError(
                    f"{same.spec} and {event.spec} are both called {event.pmu}/{event.name}: "
                    "give each a name= of its own"
                )
        chosen = chosen.merge(extra)
    for event in chosen.events:
        problem = encoding.event_text_problem(event.spec)
        if problem:
            raise AutoprofError(f"refused event: {problem}")
    chosen.excluded = []
    return chosen


def _resolve_one(
    catalog: Catalog, spec: str, sysfs: Path | None, tracepoints_here: Callable[[str], set[str]]
) -> Catalog:
    """One event as typed, without a mode: a breakpoint, a tracepoint of this machine, a
    catalog event, perf's own name; else the catalog's one-line refusal (for a ``sys:event``
    that is no tracepoint here: the close ones, or why there are none)."""
    if spec.startswith("mem:"):
        return Catalog(catalog.cpu, {"breakpoint": breakpoint_pmu()}, [breakpoint_event(spec)])
    if spec in tracepoints_here(spec):
        return Catalog(
            catalog.cpu,
            {"tracepoint": Pmu("tracepoint", unconstrained=True)},
            [Event(name=spec, pmu="tracepoint", spec=spec)],
        )
    if catalog.find(spec):
        return catalog.select([spec])
    named = perfnames.resolve(catalog, spec, sysfs)
    if named is not None:
        return named
    if _TRACEPOINT.fullmatch(spec):
        raise _unknown_tracepoint(spec, sorted(tracepoints_here(spec)))
    return catalog.select([spec])


def _unknown_tracepoint(spec: str, known: list[str]) -> AutoprofError:
    """`sys:event` that is no tracepoint here: the close ones, or why there are none."""
    if not known:
        return AutoprofError(f"unknown event {spec!r}: no tracepoints here: {tracepoint_hint()}")
    close = close_matches(spec, known, n=3)
    subsystem = spec.partition(":")[0]
    hint = (
        f"did you mean {', '.join(close)}?"
        if close
        else f"list them with: autoprof events search --tracepoints '^{subsystem}:'"
    )
    return AutoprofError(f"unknown tracepoint {spec!r} ({hint})")


def planned_smt(smt: str | None, cpu: str | None) -> bool:
    """The SMT state a plan is for: --smt on|off, else this machine's, or on for another --cpu."""
    return machine.smt_active() if smt is None and not cpu else smt != "off"


def build_catalog(
    events_dir: str | None = None,
    cpu: str | None = None,
    smt: str | None = None,
    reserve: int = 0,
    experimental: bool = False,
    deprecated: bool = False,
    offcore_matrix: bool = False,
    tracepoints: bool = False,
    counters: tuple[str, ...] = (),
    probe: bool = True,
) -> Catalog:
    """The catalog the command-line options describe (shared by the CLI and the queue worker).
    For this machine the counters of its AMD or Arm core PMU are the probed ones
    (`probed_counters`), unless `probe` is off (--no-probe)."""
    smt_on = planned_smt(smt, cpu)
    options = ReadOptions(
        smt=smt_on,
        reserve=reserve,
        experimental=experimental,
        deprecated=deprecated,
        offcore_matrix=offcore_matrix,
        counters=counter_numbers(counters),
        core_pmu=machine.arm_core_pmu() if not cpu and platform.machine() == "aarch64" else "",
    )
    given = events_dir or os.environ.get(ENV_EVENTS_DIR)
    directory = _find_events_dir(given) if given else None  # else: the CPU's vendor's data
    catalog = host_catalog(directory, cpu, options, tracepoints)
    if probe and cpu is None and vendor.vendor_of(catalog.cpu) in (vendor.AMD, vendor.ARM64):
        tables = {n: p.counters for n, p in catalog.pmus.items()}
        found, notes = counter_decision(tables, probed_counters(catalog), dict(options.counters))
        if found:
            numbers = dict(options.counters) | found
            options = replace(options, counters=tuple(sorted(numbers.items())))
            catalog = host_catalog(directory, cpu, options, tracepoints)
            catalog.note = "; ".join(filter(None, [catalog.note, *notes]))
    return catalog


def probed_counters(catalog: Catalog) -> dict[str, int]:
    """The generic counters of this machine's core PMUs that `probe` finds (remembered or
    probed now): none without perf or a core PMU."""
    perf = perf_command.installed()
    if perf is None or not machine.has_core_pmu():
        return {}
    found = {}
    for name, pmu in catalog.pmus.items():
        if pmu.unconstrained or pmu.system_wide or counter_probe.probe_event(name) is None:
            continue
        probed = counter_probe.counters(perf, name, pmu.counters)
        if probed is not None:
            found[name] = probed.counters
    return found


def counter_decision(
    tables: dict[str, int], probed: dict[str, int], given: dict[str, int]
) -> tuple[dict[str, int], list[str]]:
    """The counter numbers to plan this machine with where the probe differs from the model
    table (`tables`), and a note naming both for each; a `given` (--counters) number above the
    probe is refused with both numbers, one at or below it is kept."""
    changed, notes = {}, []
    for name, counters in sorted(probed.items()):
        if name in given and given[name] > counters:
            raise AutoprofError(
                f"--counters {name}={given[name]} is more than the {counters} generic "
                f"counters this machine's {name} has (probed: the kernel counts a group of "
                f"{counters} events and refuses {counters + 1}); --counters is for planning "
                "another machine (--cpu), or with --no-probe"
            )
        if name not in given and tables.get(name) != counters:
            changed[name] = counters
            notes.append(
                f"{name}: the model table's {tables.get(name)} generic counters are refused: "
                f"this machine counts {counters} at once (probed); planning with {counters}"
            )
    return changed, notes


def counter_numbers(given: tuple[str, ...] | list[str]) -> tuple[tuple[str, int], ...]:
    """``--counters amd_df=4`` (repeatable) -> (("amd_df", 4),); malformed is a one-line error."""
    found = {}
    for text in given:
        pmu, sep, number = text.partition("=")
        if not sep or not pmu.strip() or not number.strip().isdigit() or int(number) > 64:
            raise AutoprofError(f"--counters {text!r}: expected PMU=N (N from 0 to 64)")
        found[pmu.strip()] = int(number)
    return tuple(sorted(found.items()))
