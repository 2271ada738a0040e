"""Package energy for `bench`, where RAPL counts it: `power/energy-pkg/`, in Joules.

RAPL's power PMU (Linux arch/x86/events/rapl.c) counts a whole package, never a task: the
kernel opens it system-wide only (perf -a; one CPU per package, its `cpumask`). So each
repetition's perf stat runs inside a second one, `perf stat -a -A -e power/energy-pkg/ --
perf stat ... -- COMMAND`, which counts while the first lives: the packages' energy over the
repetition, perf's own start and exit in it, and whatever else the machine did meanwhile (its
idle power, other processes). A benchmark on a quiet machine compares commands; a busy one
adds its load to every figure.

The event is read from sysfs (`find`): the power PMU's `events/energy-pkg` (its encoding,
`event=0x02` on Intel parts), `.scale` (2^-32 J there) and `.unit` (Joules). perf is given the
encoding (`power/event=0x02/`), so that it prints the raw count, which autoprof scales: perf's
CSV prints a scaled value with two decimals, 10 mJ steps. A machine without the event (a VM,
an Arm server, a part whose kernel does not offer it), or where this user may not count
system-wide, gets one note saying so and no energy figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autoprof.catalog import machine
from autoprof.errors import AutoprofError
from autoprof.perf import command as perf_command
from autoprof.util.status import CountState

SPEC = "power/energy-pkg/"
METRIC = "energy_j"  # the bench metric: Joules per repetition
UNIT = "Joules"


@dataclass(frozen=True)
class EnergyEvent:
    """The package energy event as sysfs describes it."""

    encoding: str  # events/energy-pkg: "event=0x02"
    scale: float  # a count times this is the energy in `unit`
    unit: str

    @property
    def spec(self) -> str:
        """The event for perf by its encoding: perf prints its raw count."""
        return f"power/{self.encoding}/"


def find(sysfs: Path = machine.SYSFS_PMUS) -> EnergyEvent | str:
    """This machine's package energy event, or why there is none (one line)."""
    events = sysfs / "power" / "events"
    encoding = machine.read_text(events / "energy-pkg")
    if not encoding:
        return f"energy not measured: this machine has no RAPL package counter ({SPEC})"
    unit = machine.read_text(events / "energy-pkg.unit")
    try:
        scale = float(machine.read_text(events / "energy-pkg.scale"))
    except ValueError:
        return f"energy not measured: {SPEC} has no readable scale in {events}"
    if unit != UNIT:
        return f"energy not measured: {SPEC} counts in {unit or 'no unit'!r}, not {UNIT}"
    return EnergyEvent(encoding, scale, unit)


def usable(sysfs: Path = machine.SYSFS_PMUS) -> EnergyEvent | str:
    """`find`, and that this user may count system-wide (`run.preflight`)."""
    from autoprof.run import preflight

    found = find(sysfs)
    if isinstance(found, str):
        return found
    findings = preflight.check(system_wide=True, kernel=False, counters=False)
    for finding in findings:
        if finding.severity == preflight.FATAL:
            fix = f" (fix: {finding.fix})" if finding.fix else ""
            return f"energy not measured: {SPEC} counts system-wide only: {finding.message}{fix}"
    return found


def around(argv: list[str], output: Path, event: EnergyEvent, perf: str) -> list[str]:
    """`argv` run inside a system-wide perf that counts the package energy into `output`."""
    return perf_command.stat_argv(
        [event.spec], argv, str(output), interval_ms=None, system_wide=True, perf=perf
    )


def read(output: bytes, event: EnergyEvent) -> float:
    """The Joules of every package (a line per package's CPU) from that perf's output."""
    from autoprof.perf import stat_csv

    frame = stat_csv.parse(output, ",", interval=False).frame
    rows = frame[frame["EVENT"] == event.spec]
    if rows.empty:
        raise AutoprofError(f"perf printed no count for {SPEC} ({event.spec})")
    if (rows["STATE"] != CountState.COUNTED).any():
        raise AutoprofError(f"perf says {SPEC} is {rows['STATE'].iloc[0]}: no energy figure")
    return float(rows["VALUE"].sum()) * event.scale
