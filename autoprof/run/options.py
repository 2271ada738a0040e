"""How a profile measures (`ProfileOptions`) and which events it picks (`EventSelection`), each
field declaring once (`autoprof.util.declared`) its command-line flags, help, type and range,
and where it travels (a job spec, the manifest).

The command line (`commands.common.profile_flags`, `selection_options`), the job spec
(`queue.spec`) and the manifest (`outdir`) are all derived from these declarations, so an
option the CLI accepts is one a job spec carries and a worker runs, and a bad value is refused
everywhere with the one message of `problem` (the CLI and the job spec both run it). Imports
nothing heavy: `autoprof --help` reads it.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass
from typing import Any

from autoprof.util.declared import Declared, declare, option_fields

__all__ = [
    "CORE_TYPES",
    "MAX_DURATION_S",
    "MAX_INTERVAL_MS",
    "MAX_REPEAT",
    "EventSelection",
    "ProfileOptions",
    "measuring_fields",
]

# The limits of every entry point (the CLI, a queue job, the web's form), declared once below:
# every repeat of every run is one perf stat: a million is days of work, most likely a typo;
# an interval past a minute is no time series (perf stat prints the totals at the end anyway);
# an attached group watches its target for at most an hour (split longer ones with --repeat).
MAX_REPEAT = 10_000
MAX_INTERVAL_MS = 60_000
MAX_DURATION_S = 3_600
# --core-type: the core PMU of each kind of core of a hybrid x86 CPU (its events, its CPUs)
CORE_TYPES = {"performance": "cpu_core", "efficiency": "cpu_atom"}


@dataclass(frozen=True)
class EventSelection(Declared):
    """Which of the catalog's events to measure, whatever the machine: the catalog commands'
    flags, and a job spec's `selection` (a worker reads its own machine's catalog)."""

    reserve: int = declare(
        0,
        flags=("--reserve",),
        low=0,
        high=8,
        spec=True,
        help="Generic counters taken by others in every run (1 with the NMI watchdog on).",
    )
    experimental: bool = declare(
        False, flags=("--experimental",), spec=True, help="Include experimental uncore events."
    )
    deprecated: bool = declare(
        False, flags=("--deprecated",), spec=True, help="Include deprecated events."
    )
    offcore_matrix: bool = declare(
        False,
        flags=("--offcore-matrix",),
        spec=True,
        help="Include every request x response of old offcore matrix files.",
    )
    tracepoints: bool = declare(
        False, flags=("--tracepoints",), spec=True, help="Include this machine's tracepoints."
    )

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ProfileOptions(Declared):
    """How a profile measures (and which part of it this machine runs).

    Built from the command line, a job spec or a manifest; `check` before running one that
    came from outside. `to_json` is what a manifest records, `from_json` reads any version of it.
    """

    interval_ms: int | None = declare(
        100,
        measures=True,
        flags=("--interval",),
        low=10,
        high=MAX_INTERVAL_MS,
        spec=True,
        help="perf stat -I interval in ms.",
    )
    repeat: int = declare(
        1,
        flags=("--repeat",),
        low=1,
        high=MAX_REPEAT,
        spec=True,
        help="Run every group this many times.",
    )
    system_wide: bool = declare(
        False,
        measures=True,
        flags=("-a", "--system-wide"),
        spec=True,
        help="Count on all CPUs (perf -a -A).",
    )
    cpu_list: str | None = declare(
        None,
        measures=True,
        flags=("--cpu-list",),
        spec=True,
        help="Count on these CPUs only (perf -C LIST -A).",
    )
    user: bool = declare(
        False,
        measures=True,
        flags=("--user",),
        spec=True,
        help="Count every event in user mode only (perf's :u, each event named NAME:u): what "
        "perf counts for a user who is not root when kernel.perf_event_paranoid is 2.",
    )
    emulate: bool = declare(
        False,
        measures=True,
        flags=("--emulate",),
        spec=True,
        help="Count under an emulator, exactly and without a PMU: valgrind's cachegrind for "
        "this machine's programs, QEMU user mode for another architecture's (slower; totals "
        "only, no intervals; see REFERENCE.md). Events: instructions:u, and with cachegrind "
        "loads, stores, branches and a cache model's misses (profile: all of them unless -e "
        "names some; bench: instructions:u unless -e adds more).",
    )
    timeout: float | None = declare(
        None,
        flags=("--timeout",),
        low=0,
        low_open=True,
        spec=True,
        help="Seconds after which a run is stopped.",
    )
    fail_fast: bool = declare(
        False,
        flags=("--fail-fast",),
        spec=True,
        recorded=False,
        help="Stop at the first run whose workload fails.",
    )
    # an unconstrained event (task-clock) counted in every run, so analyses can normalise by it
    anchor: str | None = declare(
        None,
        measures=True,
        flags=("--anchor",),
        metavar="EVENT",
        spec=True,
        help="Count this event in every run (task-clock; a hardware one holds a counter in "
        "every run), so analyses can normalise events of different runs by it.",
    )
    regions: tuple[str, ...] = declare(
        (),
        measures=True,
        flags=("--region",),
        metavar="NAME",
        spec=True,
        help="Count every planned event also while the program is inside region NAME (its "
        "markers: autoprof.h, autoprof.markers); repeatable; `all` for every region it enters. "
        "All regions come from the same runs as the whole program.",
    )
    per_thread: bool = declare(
        False,
        measures=True,
        flags=("--per-thread",),
        spec=True,
        help="Count every thread of the command's process tree apart, each with a perf of its "
        "own (results.csv's UNIT names the thread, COMM-TID).",
    )
    pin: str | None = declare(
        None,
        measures=True,
        flags=("--pin",),
        metavar="CPUS",
        spec=True,
        help="Run the command and its children on these CPUs only (its affinity, set before "
        "its exec), e.g. 0-3,6.",
    )
    core_type: str | None = declare(
        None,
        measures=True,
        flags=("--core-type",),
        choices=tuple(CORE_TYPES),
        spec=True,
        help="On a hybrid CPU: run the command on that kind of core only (pinned) and plan only "
        "that core PMU's events (cpu_core, cpu_atom).",
    )
    retries: int = declare(
        0,
        flags=("--retries",),
        low=0,
        high=10,
        spec=True,
        recorded=False,
        help="Run a failed run again up to N times (failed attempts are kept in OUT/attempts/).",
    )
    force: bool = declare(
        False, flags=("--force",), recorded=False, help="Run again the runs already finished."
    )
    # a profile split over `parts` machines: this one runs its share (outdir.planned); a job
    # spec carries them as its own fields
    part: int = declare(1, low=1)
    parts: int = declare(1, low=1)
    # attached profile (no command): each run watches these processes (perf -p), this cgroup,
    # or the whole system (system_wide) for `duration` seconds
    pids: str | None = declare(
        None, flags=("-p", "--pid"), metavar="PID[,PID...]", help="Attach to these processes."
    )
    cgroup: str | None = declare(
        None, flags=("--cgroup",), metavar="NAME", help="Attach to this cgroup (perf -a -G)."
    )
    duration: float | None = declare(
        None,
        measures=True,
        flags=("--duration",),
        low=0.01,
        high=MAX_DURATION_S,
        help="Seconds each group measures the attached target (or the system with -a).",
    )

    def __post_init__(self) -> None:
        if isinstance(self.regions, list):  # from JSON: a manifest, a job spec
            object.__setattr__(self, "regions", tuple(self.regions))
        if self.emulate and self.interval_ms is not None:  # an emulator gives totals only
            object.__setattr__(self, "interval_ms", None)

    @property
    def attached(self) -> bool:
        return self.duration is not None

    @property
    def system_scope(self) -> bool:
        """It counts every process on the CPUs it covers (-a, or --cpu-list), not only the
        command's: what a worker runs only with --allow-system-wide."""
        return self.system_wide or bool(self.cpu_list)

    def problem(self) -> str | None:
        """What is wrong with these options, in one line (None when nothing is): a value of the
        wrong type or out of its range, a part that is not one of the parts, or a --cpu-list
        that is not one (whether its CPUs exist is the machine's to say, when it runs)."""
        found = super().problem()
        if found is None and not self.part <= self.parts:
            found = f"part {self.part} of {self.parts} is not a valid part"
        for flag, text in (("--cpu-list", self.cpu_list), ("--pin", self.pin)):
            if found is None and text is not None:
                from autoprof.catalog.machine import cpu_list  # its one parser; only when given
                from autoprof.errors import AutoprofError

                try:
                    cpu_list(text)
                except AutoprofError as err:
                    found = f"{flag}: {err}"
        if found is None and self.regions:
            found = _regions_problem(self)
        if found is None and self.emulate:
            found = _emulate_problem(self)
        if found is None and self.per_thread and (self.attached or self.system_scope):
            found = "--per-thread counts the threads of a command: not with -p, --cgroup, -a"
            found += " or --cpu-list"
        return found

    def to_json(self) -> dict[str, Any]:
        """What a manifest records: the options that say what the numbers mean; the part only
        of a split profile, the target only of an attached one and --user only when set (how
        the runs were driven, --force, --fail-fast, --retries, is not the profile's)."""
        skip = set() if self.parts > 1 else {"part", "parts"}
        if not self.attached:
            skip |= {"pids", "cgroup", "duration"}
        # all modes, all threads together, anywhere: as every manifest written before says
        skip |= {
            name
            for name in ("user", "per_thread", "pin", "core_type", "regions", "emulate")
            if not getattr(self, name)
        }
        return {
            f.name: _json(getattr(self, f.name))
            for f, option in option_fields(ProfileOptions)
            if option.recorded and f.name not in skip
        }

    def as_flags(self) -> str:
        """What the manifest records, as the flags that give it (`--interval 100 --repeat 3
        --system-wide`): how a person reads a profile's options (the web's run page). A switch
        shows when on, an unset value not at all; a split profile adds its part."""
        recorded = self.to_json()
        words: list[str] = []
        for f, option in option_fields(ProfileOptions):
            value = getattr(self, f.name)
            if f.name not in recorded or not option.flags or value is None or value is False:
                continue
            flag = option.flags[-1]
            if value is True:
                words.append(flag)
            else:
                for one in value if isinstance(value, tuple) else (value,):
                    words += [flag, str(one)]
        text = shlex.join(words)
        return f"{text} (part {self.part} of {self.parts})" if self.parts > 1 else text

    def spec_json(self) -> dict[str, Any]:
        """What a job spec carries (`queue.spec`): the options a submitter may set."""
        fields = option_fields(ProfileOptions)
        return {f.name: _json(getattr(self, f.name)) for f, option in fields if option.spec}


def _json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _regions_problem(options: ProfileOptions) -> str | None:
    """--region counts the command's own process tree, read from perf's per-task counters."""
    from autoprof.markers import NAME_MAX

    for name in options.regions:
        if not name or len(name.encode()) > NAME_MAX or any(c < " " or c == "\x7f" for c in name):
            return (
                f"--region {name!r}: a region's name is 1 to {NAME_MAX} bytes, no control character"
            )
    if options.attached:
        return "--region counts a command's regions: it cannot attach (-p, --cgroup, --duration)"
    if options.system_scope:
        return "--region counts the command's own processes: not with -a or --cpu-list"
    if options.per_thread:
        return (
            "--region counts the whole process tree while a thread is inside: not with --per-thread"
        )
    return None


def _emulate_problem(options: ProfileOptions) -> str | None:
    """--emulate runs the command under an emulator that counts that command's user-mode code,
    the same on any CPU: no target to attach to, no CPUs, threads or regions."""
    clashes = {
        "-p, --cgroup, --duration": options.attached,
        "-a, --cpu-list": options.system_scope,
        "--per-thread": options.per_thread,
        "--region": bool(options.regions),
        "--pin, --core-type": bool(options.pin or options.core_type),
        "--anchor": bool(options.anchor),
    }
    given = [flags for flags, on in clashes.items() if on]
    if not given:
        return None
    return f"--emulate counts a command's own user-mode code under an emulator: not with {given[0]}"


def measuring_fields() -> tuple[str, ...]:
    """The ProfileOptions that change what the numbers mean: a resumed profile keeps them."""
    return tuple(f.name for f, option in option_fields(ProfileOptions) if option.measures)
