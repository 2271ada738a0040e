"""Regression gates for CI: `bench --baseline B --fail-if 'instructions:u > +1%'` and
`analyze compare A B --fail-if ...` fail (exit 1) when a metric moved past its threshold.

A gate is `METRIC OP CHANGE%`: `>` fails when the metric grew by more than CHANGE (`wall >
+5%`), `<` when it fell below it (`instructions:u < -10%`: a change that is too good to be
true). METRIC is an event or a metric of `bench` (`wall`, `user`, `sys`, `max-rss`, `energy`,
or their names in the results: wall_s, user_s, sys_s, max_rss_kib, energy_j).

How a gate decides, per metric, from its samples on both sides (one per repetition):
- counted exactly (an emulator's counts, or the same value in every repetition on both sides,
  at least two each): the change itself is compared with the threshold, no statistics;
- noisy: it fails only when the whole confidence interval of the ratio (`analysis.bench.ratio`,
  Welch on the log scale) lies beyond the threshold, so the machine's noise does not fail a
  build, however large the point estimate; one whose estimate is beyond but whose interval is
  not holds, and says so.
Two sides measured in one bench (`bench --fail-if ... -- BASE -- NEW`) ran interleaved: their
ratio is paired, so a load that came or went during the bench falls on both alike. A baseline
measured earlier (`--baseline`) cannot tell a change of the machine from a change of the code:
a noisy time gate against one says so in the report's notes.
A count emulated on one side and counted by hardware on the other is refused: they differ (see
`autoprof.emulate`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from autoprof.emulate import EMULATED_PMUS
from autoprof.errors import AutoprofError

ALIASES = {"wall": "wall_s", "user": "user_s", "sys": "sys_s", "max-rss": "max_rss_kib"}
ALIASES |= {"energy": "energy_j"}
# what a machine's load moves (times, and the energy spent in them)
LOAD_BOUND = {"wall_s", "user_s", "sys_s", "energy_j", "task-clock", "cpu-clock", "duration_time"}
_EXPR = re.compile(r"^\s*(\S+)\s*([<>])\s*([+-]?\d+(?:\.\d*)?|[+-]?\.\d+)\s*%\s*$")


@dataclass(frozen=True)
class Gate:
    text: str  # as given
    metric: str  # as the results name it
    above: bool  # '>': fails when the change exceeds the threshold; '<': when below it
    threshold: float  # a fraction: +0.01 for +1%


def parse(text: str) -> Gate:
    """A gate from its text; AutoprofError (bad input) when it is not one."""
    found = _EXPR.match(text)
    if found is None:
        raise AutoprofError(
            f"--fail-if {text!r}: expected METRIC > +N% or METRIC < -N% "
            "(e.g. 'instructions:u > +1%', 'wall > +5%')"
        )
    name, op, number = found.groups()
    return Gate(text.strip(), ALIASES.get(name, name), op == ">", float(number) / 100)


@dataclass
class Sample:
    """One metric's values on one side (one per repetition), its unit, and what counted it
    (`time`, `rusage`, a PMU, or an emulator)."""

    values: list[float]
    unit: str = ""
    source: str = ""

    @property
    def emulated(self) -> bool:
        return self.source in EMULATED_PMUS

    @property
    def steady(self) -> bool:
        return len(self.values) >= 2 and float(np.ptp(self.values)) == 0


@dataclass
class Verdict:
    gate: str
    metric: str
    baseline: float  # mean
    now: float
    change: float  # now / baseline - 1
    low: float  # of the change: its confidence interval (equal to it when exact)
    high: float
    exact: bool
    failed: bool
    note: str = ""
    unit: str = ""
    emulated: bool = False


@dataclass
class GateReport:
    """Every gate's verdict, with what was compared (for the summary's title)."""

    verdicts: list[Verdict]
    baseline: str
    now: str
    confidence: float
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(v.failed for v in self.verdicts)


def evaluate(
    gate: Gate, base: Sample, now: Sample, confidence: float = 0.95, paired: bool = False
) -> Verdict:
    """The verdict of one gate on its metric's samples (see the module docstring); `paired`
    when the k-th values of both sides were measured together."""
    from autoprof.analysis.bench import ratio

    if base.emulated != now.emulated:
        which, engine = ("the baseline", base.source) if base.emulated else ("now", now.source)
        raise AutoprofError(
            f"--fail-if {gate.text!r}: {gate.metric} was emulated ({engine}) in {which} only; "
            "an emulated count differs from a hardware one: compare like with like"
        )
    mean_a, mean_b = float(np.mean(base.values)), float(np.mean(now.values))
    exact = (base.emulated and now.emulated) or (base.steady and now.steady)
    verdict = Verdict(gate.text, gate.metric, mean_a, mean_b, math.nan, math.nan, math.nan, exact,
                      False, unit=now.unit, emulated=now.emulated)  # fmt: skip
    if mean_a == 0:
        verdict.note = "baseline is 0: no relative change"
        verdict.failed = mean_b != 0 and gate.above == (mean_b > 0)
        return verdict
    verdict.change = mean_b / mean_a - 1
    if exact:
        verdict.low = verdict.high = verdict.change
        verdict.failed = _beyond(gate, verdict.change)
        return verdict
    found = ratio(gate.metric, base.values, now.values, confidence, paired)
    verdict.low, verdict.high = found.low - 1, found.high - 1
    if math.isnan(verdict.low):
        verdict.note = f"no interval ({found.note})"
        return verdict
    # significant beyond the threshold: the whole interval is past it
    verdict.failed = _beyond(gate, verdict.low if gate.above else verdict.high)
    if not verdict.failed and _beyond(gate, verdict.change):
        verdict.note = f"beyond the threshold, not significantly ({confidence * 100:g}% interval)"
    return verdict


def _beyond(gate: Gate, change: float) -> bool:
    return change > gate.threshold if gate.above else change < gate.threshold


def check(
    gates: list[Gate],
    base: dict[str, Sample],
    now: dict[str, Sample],
    names: tuple[str, str],
    confidence: float = 0.95,
    paired: bool = False,
) -> GateReport:
    """Every gate on the two sides' samples (metric -> Sample), `paired` when they ran
    interleaved in one bench; AutoprofError (bad input) when a metric is missing on a side."""
    verdicts = []
    for gate in gates:
        for side, samples in ((names[0], base), (names[1], now)):
            if gate.metric not in samples:
                raise AutoprofError(
                    f"--fail-if {gate.text!r}: {side} has no {gate.metric} (it has "
                    f"{', '.join(sorted(samples)) or 'nothing'})"
                )
        verdicts.append(evaluate(gate, base[gate.metric], now[gate.metric], confidence, paired))
    report = GateReport(verdicts, names[0], names[1], confidence)
    timed = [v.gate for v in verdicts if not v.exact and v.metric in LOAD_BOUND]
    if timed and not paired:
        report.notes.append(
            f"{', '.join(timed)}: the baseline ran at another time; a load that came or went "
            "since moves these times as a change of the code would. To gate time on a shared "
            "machine, run both builds in one bench: autoprof bench --fail-if ... -- BASE -- NEW"
        )
    return report


def bench_samples(result, index: int = 0) -> dict[str, Sample]:
    """The samples of one command of a `bench` result (`benchmark.measure.BenchResult`)."""
    command = result.commands[index]
    return {
        metric: Sample(
            [float(rep.value(metric)) for rep in command.repetitions],
            result.units.get(metric, ""),
            result.source(metric),
        )
        for metric in result.metrics
    }


def frame_samples(frame) -> dict[str, Sample]:
    """The samples of a results.csv frame (a profile's, a stored run's): each event's total per
    execution (run, repeat), its unit and PMU."""
    from autoprof.analysis import data

    totals = data.run_totals(data.per_interval(frame)).dropna(subset=["TOTAL"])
    first = frame.drop_duplicates(data.EVENT).set_index(data.EVENT)
    samples = {}
    for event, rows in totals.groupby(data.EVENT, observed=True):
        unit = first.at[event, "VALUE_UNIT"] if "VALUE_UNIT" in first else ""
        pmu = first.at[event, "PMU"] if "PMU" in first else ""
        samples[str(event)] = Sample(
            rows["TOTAL"].astype(float).tolist(),
            "" if unit != unit else str(unit),  # NaN: no unit
            "" if pmu != pmu else str(pmu),
        )
    return samples


def to_json(report: GateReport) -> dict:
    """The gates' verdicts as JSON (NaN as null)."""
    from dataclasses import asdict

    def clean(value):
        return None if isinstance(value, float) and math.isnan(value) else value

    return {
        "format": 1,
        "baseline": report.baseline,
        "now": report.now,
        "confidence": report.confidence,
        "failed": report.failed,
        "gates": [{k: clean(v) for k, v in asdict(v).items()} for v in report.verdicts],
    }
