"""Statistics of a benchmark (`autoprof bench`): per command and metric mean +- sd, min, max
and outliers, a warning when the first runs are slower, and each command's ratio to the first
with a confidence interval and the significance test of `analyze compare`.

Outliers are repetitions whose modified z-score (0.6745 (x - median) / MAD, Iglewicz and
Hoaglin) exceeds 3.5; the warning about disturbed runs takes hyperfine's 14.826 (ten standard
deviations' worth of MAD), so that the ordinary jitter of a busy machine does not raise it.
The ratio's interval is the delta method's on the log scale (log r = log mean_b - log mean_a,
whose variance is the two means' squared relative standard errors added) with
Welch-Satterthwaite degrees of freedom, mapped back by exp: it stays positive however wide it
is, where r +- half crossed zero for short, noisy commands; counts equal in every repetition
(hardware breakpoints) give an exact ratio. The difference of the means comes with Welch's
interval: what a change costs in seconds, which a fixed cost in every run does not bend.

Commands of one bench run interleaved (repetition k of every command, then k + 1), so their
k-th repetitions saw the same moment of the machine: their ratios and differences are paired
(`paired=True`): the covariance of the pairs comes off the variance (a load that slows both
sides of a pair alike cancels) and the degrees of freedom are the pairs' less one, and the test
is the paired t-test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from autoprof.analysis.compare import significance
from autoprof.benchmark.measure import BenchResult

OUTLIER_Z = 3.5
DISTURBED_Z = 14.826
RSS_FLOOR_MARGIN = 1.1  # a max RSS within 10% of an empty program's is the floor's


@dataclass
class Summary:
    metric: str
    n: int
    mean: float
    sd: float
    min: float
    max: float
    median: float
    outliers: list[int]  # 1-based repetitions


@dataclass
class Ratio:
    metric: str
    ratio: float  # mean of this command / mean of the first
    low: float
    high: float
    p_value: float  # NaN when there is nothing to test (see note)
    note: str
    # mean of this command - mean of the first, with its interval (Welch): a cost that every
    # run of both pays (a timer's overshoot, a process's start) pulls the ratio towards 1 but
    # leaves the difference alone
    difference: float = math.nan
    difference_low: float = math.nan
    difference_high: float = math.nan


def modified_z(values: np.ndarray) -> np.ndarray:
    """Iglewicz-Hoaglin modified z-scores; 0 everywhere when half the values are equal (MAD 0)."""
    median = np.median(values)
    mad = np.median(np.abs(values - median))
    if mad == 0:
        return np.zeros_like(values, dtype=float)
    return 0.6745 * (values - median) / mad


def summarize(metric: str, values: list[float]) -> Summary:
    array = np.asarray(values, dtype=float)
    outliers = [int(i) + 1 for i in np.flatnonzero(np.abs(modified_z(array)) > OUTLIER_Z)]
    return Summary(
        metric,
        len(array),
        float(array.mean()),
        float(array.std(ddof=1)) if len(array) > 1 else math.nan,
        float(array.min()),
        float(array.max()),
        float(np.median(array)),
        outliers,
    )


def cold_start(values: list[float]) -> bool:
    """The first repetition is a slow outlier: caches were cold (hyperfine's warning)."""
    array = np.asarray(values, dtype=float)
    return len(array) >= 3 and modified_z(array)[0] > OUTLIER_Z


def ratio(
    metric: str, a: list[float], b: list[float], confidence: float = 0.95, paired: bool = False
) -> Ratio:
    """mean(b) / mean(a) and mean(b) - mean(a), each with its `confidence` interval, and the
    test of the difference: Welch's, or with `paired` (a[k] and b[k] measured together, as
    many of each) the paired one (see the module docstring)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    paired = paired and len(x) == len(y)
    mean_a, mean_b = float(x.mean()), float(y.mean())
    p, note = significance(x, y, "paired" if paired else "welch")
    found = Ratio(metric, math.nan, math.nan, math.nan, p, note,
                  *_difference(x, y, confidence, paired))  # fmt: skip
    if mean_a == 0:
        found.note = note or "first command's mean is 0"
        return found
    found.ratio = r = mean_b / mean_a
    if len(x) < 2 or len(y) < 2 or mean_b <= 0 or mean_a < 0:
        found.note = note or "no interval: mean 0"
        return found
    # the variance of log r by the delta method: each mean's relative variance, less twice
    # the pairs' relative covariance when paired
    rel_a = x.var(ddof=1) / len(x) / mean_a**2
    rel_b = y.var(ddof=1) / len(y) / mean_b**2
    if paired:
        rel = rel_a + rel_b - 2 * float(np.cov(x, y)[0, 1]) / len(x) / (mean_a * mean_b)
        half = _t(confidence, len(x) - 1) * math.sqrt(max(rel, 0.0))
    else:
        half = _half_width(rel_a, rel_b, len(x), len(y), confidence)  # of log r
    found.low, found.high = r * math.exp(-half), r * math.exp(half)
    return found


def _difference(
    x: np.ndarray, y: np.ndarray, confidence: float, paired: bool
) -> tuple[float, float, float]:
    """mean(y) - mean(x) and its interval, Welch's or the pairs' (NaN bounds with fewer than 2
    values each)."""
    d = float(y.mean() - x.mean())
    if len(x) < 2 or len(y) < 2:
        return d, math.nan, math.nan
    if paired:
        half = _t(confidence, len(x) - 1) * math.sqrt((y - x).var(ddof=1) / len(x))
    else:
        var_a, var_b = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
        half = _half_width(var_a, var_b, len(x), len(y), confidence)
    return d, d - half, d + half


def _t(confidence: float, df: float) -> float:
    """Student's t quantile of a two-sided `confidence` interval."""
    return float(stats.t.ppf(0.5 + confidence / 2, df))


def _half_width(var_a: float, var_b: float, n_a: int, n_b: int, confidence: float) -> float:
    """Half the `confidence` interval of a sum of two independent means' variances, with
    Welch-Satterthwaite degrees of freedom (0 when both variances are 0: an exact result)."""
    if var_a + var_b == 0:
        return 0.0
    df = (var_a + var_b) ** 2 / (var_a**2 / (n_a - 1) + var_b**2 / (n_b - 1))
    return _t(confidence, df) * math.sqrt(var_a + var_b)


def summaries(result: BenchResult) -> list[list[Summary]]:
    """Per command, one Summary per metric (times first, then events)."""
    return [
        [summarize(m, [rep.value(m) for rep in c.repetitions]) for m in result.metrics]
        for c in result.commands
    ]


def ratios(result: BenchResult, confidence: float = 0.95) -> list[list[Ratio]]:
    """Per command after the first, one Ratio per metric against the first command, paired
    (the commands ran interleaved)."""
    first = result.commands[0]
    return [
        [
            ratio(
                m,
                [rep.value(m) for rep in first.repetitions],
                [rep.value(m) for rep in c.repetitions],
                confidence,
                paired=True,
            )
            for m in result.metrics
        ]
        for c in result.commands[1:]
    ]


def warnings(result: BenchResult) -> list[str]:
    """A max RSS no higher than an empty program's, runs shorter than the start-up subtracted,
    cold caches (first run slow) and outliers in wall time, per command."""
    found = []
    for c in result.commands:
        wall = [rep.wall_s for rep in c.repetitions]
        name = " ".join(c.command)
        rss = [rep.max_rss_kib for rep in c.repetitions if rep.max_rss_kib is not None]
        floor = result.rss_floor_kib
        if rss and floor and np.median(rss) <= RSS_FLOOR_MARGIN * floor:
            found.append(
                f"{name}: its max RSS ({np.median(rss):.0f} KiB) is about that of `true` run the "
                f"same way ({floor:.0f} KiB: the process that forked it): its own peak is lower "
                "and max-rss cannot see a change below that"
            )
        clamped = sum(w == 0 for w in wall)
        if clamped and result.startup_s > 0:
            found.append(
                f"{name}: {clamped} of {len(wall)} runs took less than a process's start-up "
                f"({result.startup_s * 1000:.2f} ms): too short to measure, their wall time "
                "counts as 0; time a longer run, or use --no-startup-correction"
            )
        if cold_start(wall):
            found.append(
                f"{name}: the first run was much slower ({wall[0]:.4g} s, median "
                f"{np.median(wall):.4g} s): cold caches? Use --warmup or --prepare"
            )
        z = modified_z(np.asarray(wall))
        outliers = [int(i) + 1 for i in np.flatnonzero(np.abs(z) > DISTURBED_Z)]
        if outliers and not (outliers == [1] and cold_start(wall)):
            found.append(
                f"{name}: {len(outliers)} wall-time outlier(s) (runs "
                f"{', '.join(map(str, outliers))}): other programs disturbed the benchmark?"
            )
    return found
