"""Run each command N times under `perf stat` and keep wall, user and sys time and the counts
of every repetition.

Times come from perf's own tool events (`duration_time`, `user_time`, `system_time`), so they
cover the workload only, not perf's start-up. perf (6.1 `__run_perf_stat`) reads the start
clock just after it releases the workload, so when perf loses the CPU right then (the woken
workload preempts it on a busy machine) `duration_time` misses that moment: on the loaded
2-core development VM `sleep 0.05` read as little as 41 ms now and then, while a quiet machine
reads ~51 ms. It is perf's figure, kept as perf gives it; benchmark on a quiet machine.

perf 6.1 prints a tool event whose value is 0 as `<not counted>` with a run time of 0 (perf
sets a tool event's run time to its value): read as 0 s here, as one of the two rusage times
can be (the kernel splits a process's run time between user and system mode by the ticks that
met each, so a short process's time may all go to one). Every other event that was not
counted, not supported or counted only part of the time (multiplexed) stops the benchmark with
perf's words: a bench never reports such a number.

Wall time also holds the start of a process (exec, dynamic loading: about a millisecond), the
same for every command, which pulls ratios towards 1 (`sleep 0.1` / `sleep 0.05` reads 1.98).
As hyperfine subtracts its shell's start-up, `bench` measures an empty program (`true`) the
same way and subtracts its median wall time from every wall time (`startup_s` in the results;
`startup_correction=False` keeps perf's raw figure); a run shorter than that counts as 0 s, and
`analysis.bench.warnings` says it was too short to measure.

perf 6.1 also loses a workload that ends before perf waits for it: its SIGCHLD handler
(`skip_signal`) forgets the child's pid, so perf never calls wait4, exits 0 whatever the
workload's status, and prints a wall time of a few microseconds and no rusage at all (both
`user_time` and `system_time` `<not counted>`; a process that ran has a non-zero sum of the two).
On the loaded 2-core VM, pinned to one CPU, `sh -c 'exit 3'` met it twice in 200 runs. Such a
run's figures and exit status are perf's race, not the workload's: the repetition runs again
(its `--prepare` too), up to LOST_TRIES times, and `lost_runs` in the results counts them.

Each repetition's max RSS (`max_rss_kib`) is the rusage of perf's process tree, read by the
small helper of `benchmark.rusage`: perf's own peak (~14 MiB) bounds it from below, and
`rss_floor_kib` in the results is that floor, measured on `true`.

Where RAPL counts the package energy (`benchmark.energy`: power/energy-pkg/, system-wide
only), each repetition's perf runs inside a system-wide one that counts it: `energy_j`, Joules
per repetition, the machine's whole package over the repetition; elsewhere `energy_note` says
why there is none.

With `emulate` (`autoprof.emulate`) no perf runs: every repetition runs the command natively
from the helper (wall, user and sys time, max RSS), and each timed one runs it once more under
the emulator, for its exact counts (the events' PMU is the engine's name); the emulated runs'
wall times give the emulation's slowdown (`emulated_wall_s`).
"""

from __future__ import annotations

import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autoprof.benchmark import energy, rusage
from autoprof.catalog import host
from autoprof.catalog.model import Event
from autoprof.errors import AutoprofError
from autoprof.perf import command as perf_command
from autoprof.perf import labels as perf_labels
from autoprof.perf.process import Interrupted
from autoprof.run.planning import Planned
from autoprof.util.records import file_format, known_fields
from autoprof.util.status import CountState

FORMAT = 1  # of the to_json document (bench.json, --export-json)
TIME_EVENTS = {"duration_time": "wall_s", "user_time": "user_s", "system_time": "sys_s"}
TIMES = tuple(TIME_EVENTS.values())
MAX_RSS = "max_rss_kib"  # from rusage: the command's peak resident set, KiB
DEFAULT_EVENTS = ["task-clock", "context-switches", "cpu-migrations", "page-faults"]
LOST_TRIES = 5  # runs of one repetition that perf may lose (see the module docstring)


@dataclass
class BenchOptions:
    runs: int = 10
    warmup: int = 2
    prepare: str | None = None  # a shell command run before every repetition (warm-ups too)
    timeout: float | None = None
    startup_correction: bool = True
    emulate: bool = False  # count under an emulator (autoprof.emulate), not perf


@dataclass
class Repetition:
    """One timed execution of a command: seconds, and each event's count in perf's unit."""

    index: int  # 1-based, warm-ups not counted
    wall_s: float
    user_s: float
    sys_s: float
    counts: dict[str, float] = field(default_factory=dict)
    max_rss_kib: float | None = None  # None in a bench.json of an older autoprof
    energy_j: float | None = None  # the packages' energy (benchmark.energy), where RAPL counts

    def value(self, metric: str) -> float:
        if metric in TIMES or metric in (MAX_RSS, energy.METRIC):
            return getattr(self, metric)
        return self.counts[metric]


@dataclass
class CommandResult:
    command: list[str]
    repetitions: list[Repetition] = field(default_factory=list)
    emulated_wall_s: list[float] = field(default_factory=list)  # --emulate: each timed run's


@dataclass
class BenchResult:
    events: list[Event]
    units: dict[str, str]  # metric -> unit ("s" for times, perf's unit for events)
    options: BenchOptions
    commands: list[CommandResult]
    startup_s: float = 0.0  # subtracted from every wall time (see the module docstring)
    lost_runs: int = 0  # runs perf lost (ended before perf waited) and that ran again
    rss_floor_kib: float | None = None  # max RSS of `true` measured the same way
    emulator: str | None = None  # the engine that counted the events (--emulate)
    energy_note: str | None = None  # why no energy was measured (benchmark.energy)

    @property
    def metrics(self) -> list[str]:
        reps = [r for c in self.commands for r in c.repetitions]
        rss = [MAX_RSS] if reps and all(r.max_rss_kib is not None for r in reps) else []
        joules = [energy.METRIC] if reps and all(r.energy_j is not None for r in reps) else []
        return [*TIMES, *rss, *joules, *(e.name for e in self.events)]

    def source(self, metric: str) -> str:
        """What measured `metric`: `time` (perf's tool events, or the helper's clock),
        `rusage`, `power` (RAPL's PMU), or the event's PMU (an emulator's name when emulated)."""
        if metric in TIMES:
            return "time"
        if metric == MAX_RSS:
            return "rusage"
        if metric == energy.METRIC:
            return "power"
        return next(e.pmu for e in self.events if e.name == metric)

    def slowdown(self, index: int) -> float | None:
        """--emulate: the median emulated run's wall time over the median native one's."""
        import statistics

        command = self.commands[index]
        if not command.emulated_wall_s or not command.repetitions:
            return None
        native = statistics.median(r.wall_s + self.startup_s for r in command.repetitions)
        return statistics.median(command.emulated_wall_s) / native if native > 0 else None


@dataclass(frozen=True)
class Joules:
    """Where a repetition's package energy is counted (`benchmark.energy`)."""

    event: energy.EnergyEvent
    output: Path


class LostWorkload(AutoprofError):
    """perf did not wait for the workload (see the module docstring): its figures are void."""


class BenchInterrupted(Interrupted):
    """A signal stopped the benchmark; `partial` holds the repetitions finished before it."""

    def __init__(self, signum: int, partial: BenchResult):
        super().__init__(signum)
        self.partial = partial

    @property
    def repetitions(self) -> int:
        return sum(len(c.repetitions) for c in self.partial.commands)


def one_run_events(planned: Planned) -> list[Event]:
    """The events of a plan (`run.planning`, with DEFAULT_EVENTS when none are named), refused
    when they do not fit one run of the counters (a benchmark never multiplexes: the plan says
    how many runs `profile` would need) or when this machine cannot count them (hardware
    events without a PMU), before any run."""
    catalog, plan = planned.catalog, planned.plan
    host.refuse_uncountable(catalog)
    if len(plan) > 1:
        raise AutoprofError(
            f"these {len(catalog.events)} events do not fit one run of the counters: they need "
            f"{len(plan)} runs (lower bound {plan.lower_bound}); a bench counts every event in "
            f"each repetition without multiplexing. Choose fewer events, or measure them all "
            f"with `autoprof profile` ({len(plan)} runs per repetition)"
        )
    return [e for run in plan.runs for e in run.events]


def _count(row, event: str) -> float:
    """The value of one parsed line; raises on anything but a full, trustworthy count."""
    state, value = row["STATE"], row["VALUE"]
    if event in TIME_EVENTS and state == CountState.NOT_COUNTED and row["RUN_TIME"] == 0:
        return 0.0  # perf 6.1: a zero rusage time prints as <not counted> (see above)
    if state != CountState.COUNTED:
        raise AutoprofError(f"perf says {event} is {state}: a bench cannot use it")
    if row["PERCENT_RUNNING"] < 100:
        raise AutoprofError(
            f"perf multiplexed {event} (counted {row['PERCENT_RUNNING']:.2f}% of the time): "
            "another user of the counters? A bench reports full counts only"
        )
    return float(value)


def read_counts(output: bytes, events: list[Event]) -> tuple[dict[str, float], dict[str, str]]:
    """(metric -> value, metric -> unit) from one `perf stat -x,` total-mode output: the three
    times in seconds, the events under their catalog names in perf's units. LostWorkload when
    perf printed no rusage at all (it never waited for the workload: see the module docstring)."""
    import pandas as pd

    from autoprof.perf import stat_csv

    frame = stat_csv.parse(output, ",", interval=False).frame
    rusage = frame[frame["EVENT"].isin(["user_time", "system_time"])]
    if len(rusage) == 2 and (rusage["STATE"] == CountState.NOT_COUNTED).all():
        raise LostWorkload("perf did not wait for the workload: no rusage, no exit status")
    wanted = {t: t for t in TIME_EVENTS}  # perf's printed name -> metric
    for e in events:  # a catalog event prints as its name= label, not as its spec
        wanted |= dict.fromkeys(perf_labels.printed_forms(e.pmu, e.label, e.spec), e.name)
    values: dict[str, float] = {}
    units: dict[str, str] = {}
    for _, row in frame.iterrows():
        name, _modifier = perf_labels.resolve(str(row["EVENT"]), wanted)
        if name is None or name in values:
            continue
        values[name] = _count(row, name)
        units[name] = "" if pd.isna(row["UNIT"]) else str(row["UNIT"])
    missing = [n for n in dict.fromkeys(wanted.values()) if n not in values]
    if missing:
        raise AutoprofError(f"perf printed no count for {', '.join(missing)}")
    for event, metric in TIME_EVENTS.items():
        if units[event] != "ns":
            raise AutoprofError(f"perf gave {event} in {units[event]!r}, not ns")
        values[metric] = values.pop(event) / 1e9
        units.pop(event)
        units[metric] = "s"
    return values, units


def _prepare(command: str) -> None:
    proc = subprocess.run(command, shell=True, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AutoprofError(
            f"--prepare command exited {proc.returncode}: {command} "
            f"({proc.stderr.strip()[-200:] or 'no output'})"
        )


def run_once(
    command: list[str],
    events: list[Event],
    output: Path,
    timeout: float | None,
    perf: str,
    joules: Joules | None = None,
) -> tuple[dict[str, float], dict[str, str]]:
    """One `perf stat` of `command` (from the rusage helper, for its max RSS); the workload's
    output is discarded (as hyperfine does). With `joules`, inside a system-wide perf that
    counts the package energy into its file (`benchmark.energy`)."""
    specs = [*TIME_EVENTS, *(e.spec for e in events)]
    argv = perf_command.stat_argv(specs, command, str(output), interval_ms=None, perf=perf)
    if joules is not None:
        argv = energy.around(argv, joules.output, joules.event, perf)
    # perf leads a process group of its own with the workload, so that a timeout or a signal
    # (Ctrl-C, SIGTERM, SIGHUP: Interrupted under a Stopper) stops both, never leaving them run
    usage = rusage.run(argv, timeout, shlex.join(command))
    stderr = usage.stderr
    failure = perf_command.open_failure(stderr)
    if failure:
        raise AutoprofError(f"perf could not open {failure.event}: {failure.reason}")
    killed = perf_command.workload_signal(stderr, command[0])
    if killed is not None:  # perf exits 0 then
        raise AutoprofError(f"{shlex.join(command)} was killed by {signal.Signals(killed).name}")
    _check_status(command, usage)
    values, units = read_counts(output.read_bytes(), events)
    values[MAX_RSS], units[MAX_RSS] = float(usage.max_rss_kib), "KiB"
    if joules is not None:
        found = energy.read(joules.output.read_bytes(), joules.event)
        values[energy.METRIC], units[energy.METRIC] = found, "J"
    return values, units


def _check_status(command: list[str], usage: rusage.Usage) -> None:
    if usage.returncode < 0:
        name = signal.Signals(-usage.returncode).name
        raise AutoprofError(f"{shlex.join(command)} was killed by {name}")
    if usage.returncode != 0:
        stderr = usage.stderr.strip()
        raise AutoprofError(
            f"{shlex.join(command)} exited with status {usage.returncode}"
            f"{': ' + stderr.splitlines()[-1][:200] if stderr else ''}"
        )


def run_native(
    command: list[str], timeout: float | None
) -> tuple[dict[str, float], dict[str, str]]:
    """One run of `command` without perf (--emulate): its wall, user and sys time and max RSS
    from the rusage helper; another architecture's program runs under QEMU (without its log)."""
    from autoprof import emulate

    usage = rusage.run(emulate.engine_for(command).plain(command), timeout, shlex.join(command))
    _check_status(command, usage)
    values = {m: float(getattr(usage, m)) for m in (*TIMES, MAX_RSS)}
    return values, {**dict.fromkeys(TIMES, "s"), MAX_RSS: "KiB"}


def run_emulated(
    command: list[str], events: list[Event], timeout: float | None
) -> tuple[dict[str, float], float]:
    """One run of `command` under its emulator: the events' exact counts and its wall time."""
    from autoprof import emulate

    engine = emulate.engine_for(command)
    names = [e.name for e in events]
    with tempfile.TemporaryDirectory(prefix="autoprof-emulate-") as tmp:
        argv = engine.argv(command, names, Path(tmp))
        engine.begin(Path(tmp))
        try:
            usage = rusage.run(argv, timeout, shlex.join(command))
        finally:
            counts = _read_quietly(engine, Path(tmp), names)
        _check_status(command, usage)
        if isinstance(counts, AutoprofError):
            raise counts
    return counts, usage.wall_s


def _read_quietly(engine, folder: Path, names: list[str]) -> dict[str, float] | AutoprofError:
    """The engine's counts, or its error: an emulator that failed says more in the command's
    exit status, which comes first."""
    try:
        return engine.read(folder, names)
    except AutoprofError as err:
        return err


def emulated_events(commands: list[list[str]], names: list[str]) -> list[Event]:
    """--emulate: the events `names` (the engine's default when none) as counted by the one
    engine every command needs; refused in one line when they need different ones or it
    cannot count an event."""
    from autoprof import emulate

    engines = {emulate.engine_for(c).name: emulate.engine_for(c) for c in commands}
    if len(engines) > 1:
        raise AutoprofError(
            f"--emulate: these commands need different emulators ({', '.join(engines)}): "
            "their counts would not compare; benchmark them apart"
        )
    engine = next(iter(engines.values()))
    return [Event(n, engine.name, n) for n in emulate.check_names(engine, names)]


def _repetition(
    command: list[str],
    events: list[Event],
    output: Path,
    options: BenchOptions,
    perf: str,
    joules: Joules | None = None,
) -> tuple[dict[str, float], dict[str, str], int]:
    """One repetition (after its `--prepare`), run again while perf loses it: its values,
    units and the number of runs lost (`joules`: see `run_once`)."""
    for lost in range(LOST_TRIES):
        if options.prepare:
            _prepare(options.prepare)
        if options.emulate:  # no perf to lose the command
            return (*run_native(command, options.timeout), 0)
        try:
            return (*run_once(command, events, output, options.timeout, perf, joules), lost)
        except LostWorkload:
            continue
    raise AutoprofError(
        f"perf lost {shlex.join(command)} {LOST_TRIES} times in a row: it ended before perf "
        "waited for it (perf 6.1's stat then reports no exit status and no rusage); "
        "benchmark on a less loaded machine"
    )


def bench(
    commands: list[list[str]],
    events: list[Event],
    options: BenchOptions,
    on_run: Callable[[int, int, bool], None] | None = None,
) -> BenchResult:
    """Every command `options.warmup` times untimed, then `options.runs` times timed,
    interleaved (one repetition of each command in turn).

    Under a `perf.process.Stopper`, a signal stops the perf running (and its workload) and
    raises BenchInterrupted with the repetitions finished so far.

    `on_run(command_index, repetition, warmup)` is called after each execution.
    """
    perf = perf_command.installed() or ""
    if not perf and not options.emulate:
        raise AutoprofError("perf not found (apt-get install linux-perf), or count with --emulate")
    for command in commands:
        if shutil.which(command[0]) is None:
            raise AutoprofError(f"command not found: {command[0]}")
    results = [CommandResult(list(c)) for c in commands]
    result = BenchResult(events, {}, options, results, emulator=_emulator(events, options))
    package = energy.usable() if not options.emulate else "energy not measured under --emulate"
    if isinstance(package, str):
        result.energy_note = package
    try:
        with tempfile.TemporaryDirectory(prefix="autoprof-bench-") as tmp:
            output = Path(tmp) / "perf.csv"
            joules = None if isinstance(package, str) else Joules(package, Path(tmp) / "e.csv")
            _startup(result, output, perf)
            # interleaved: repetition k of every command, then k + 1, so that a change of the
            # machine's load falls on every command alike (their ratios are then paired)
            for rep in range(options.warmup + options.runs):
                for i, entry in enumerate(result.commands):
                    warm = rep < options.warmup
                    values, units, lost = _repetition(
                        entry.command, events, output, options, perf, joules
                    )
                    result.units, result.lost_runs = units, result.lost_runs + lost
                    if not warm and options.emulate:
                        counts, emulated_wall = run_emulated(entry.command, events, options.timeout)
                        values |= counts
                        result.units |= dict.fromkeys(counts, "")
                        entry.emulated_wall_s.append(emulated_wall)
                    if not warm:
                        index = rep - options.warmup + 1
                        others = (*TIMES, MAX_RSS, energy.METRIC)
                        counts = {k: v for k, v in values.items() if k not in others}
                        times = {k: values[k] for k in TIMES}
                        # shorter than an empty program: 0, not a negative time (hyperfine)
                        times["wall_s"] = max(0.0, times["wall_s"] - result.startup_s)
                        rss, joule = values.get(MAX_RSS), values.get(energy.METRIC)
                        entry.repetitions.append(
                            Repetition(
                                index, **times, counts=counts, max_rss_kib=rss, energy_j=joule
                            )
                        )
                    if on_run:
                        on_run(i, rep + 1 if warm else rep - options.warmup + 1, warm)
    except Interrupted as stop:
        raise BenchInterrupted(stop.signum, result) from None
    return result


def _emulator(events: list[Event], options: BenchOptions) -> str | None:
    return events[0].pmu if options.emulate and events else None


def _startup(result: BenchResult, output: Path, perf: str) -> None:
    """With `startup_correction`, an empty program (`true`) run as the commands are: its median
    wall time is a process's start and exit, which every command's wall time holds too (then
    subtracted); its median max RSS is the floor under every command's."""
    options = result.options
    if not options.startup_correction:
        return
    empty = [shutil.which("true") or "/bin/true"]
    plain = BenchOptions(timeout=options.timeout, emulate=options.emulate)  # no --prepare
    runs = [
        _repetition(empty, [], output, plain, perf) for _ in range(options.warmup + options.runs)
    ]
    timed = runs[options.warmup :]
    middle = (len(timed) - 1) // 2
    result.lost_runs += sum(lost for _, _, lost in runs)
    result.startup_s = float(sorted(values["wall_s"] for values, _, _ in timed)[middle])
    result.rss_floor_kib = float(sorted(values[MAX_RSS] for values, _, _ in timed)[middle])


CSV_COLUMNS = ["command", "repetition", "metric", "value", "unit"]


def to_json(result: BenchResult) -> dict:
    """Everything measured, in a JSON-able dict (`from_json` reads it back)."""
    return {
        "format": FORMAT,
        "events": [{"name": e.name, "pmu": e.pmu, "spec": e.spec} for e in result.events],
        "units": result.units,
        "options": asdict(result.options),
        "startup_s": result.startup_s,
        "lost_runs": result.lost_runs,
        "rss_floor_kib": result.rss_floor_kib,
        "emulator": result.emulator,
        "energy_note": result.energy_note,
        "commands": [
            {
                "command": c.command,
                "repetitions": [asdict(r) for r in c.repetitions],
                "emulated_wall_s": c.emulated_wall_s,
            }
            for c in result.commands
        ],
    }


def from_json(data: dict, path: object = "bench.json") -> BenchResult:
    """The BenchResult of a `to_json` document; NewerFormat for one from a newer autoprof,
    unknown keys ignored and missing ones defaulted (a file from an older one still reads)."""
    file_format(data, FORMAT, path)
    return BenchResult(
        [Event(e["name"], e["pmu"], e["spec"]) for e in data["events"]],
        dict(data["units"]),
        BenchOptions(**known_fields(BenchOptions, data.get("options", {}))),
        [
            CommandResult(
                c["command"],
                [Repetition(**known_fields(Repetition, r)) for r in c["repetitions"]],
                list(c.get("emulated_wall_s") or []),
            )
            for c in data["commands"]
        ],
        data.get("startup_s", 0.0),
        data.get("lost_runs", 0),
        data.get("rss_floor_kib"),
        data.get("emulator"),
        data.get("energy_note"),
    )


def rows(result: BenchResult) -> list[list]:
    """Long format, one row per (command, repetition, metric): CSV_COLUMNS."""
    return [
        [shlex.join(c.command), rep.index, metric, rep.value(metric), result.units.get(metric, "")]
        for c in result.commands
        for rep in c.repetitions
        for metric in result.metrics
    ]
