"""Correlation over a large results file: 500 events x 10,000 intervals (target: < 10 s).

Builds a synthetic per-process profile the size of a long run on a big catalog (25 plan runs
of 20 events, each run with its own length and idle intervals, as real profiles have), writes
it as results.csv, then times each step of `autoprof analyze correlation` and prints a table.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from autoprof.analysis import correlation, data
from autoprof.analysis.renderers import png
from autoprof.results import csvfile
from autoprof.util.status import RowStatus

EVENTS = 500
INTERVALS = 10_000
RUNS = 25
TARGET_S = 10.0


def synthetic(events: int = EVENTS, intervals: int = INTERVALS, runs: int = RUNS) -> pd.DataFrame:
    """A results frame: 8 latent signals mixed into the events, per-process counts, runs of
    slightly different lengths and a few `<not counted>` intervals per run."""
    rng = np.random.default_rng(1)
    latent = rng.gamma(2.0, 1.0, size=(intervals, 8)).cumsum(axis=0) % 50 + 1
    mix = rng.random((8, events)) * (rng.random((8, events)) < 0.3)
    counts = np.round((latent @ mix + rng.random((intervals, events))) * 1000)
    run_of = np.arange(events) % runs + 1
    frames = []
    for run in range(1, runs + 1):
        cols = np.flatnonzero(run_of == run)
        length = intervals - int(rng.integers(0, 20))
        values = counts[:length, cols].copy()
        values[rng.integers(0, length, size=5), :] = np.nan  # the task did not run then
        n = values.size
        frames.append(
            pd.DataFrame(
                {
                    "EVENT_NAME": np.repeat([f"event.{c:03d}" for c in cols], length),
                    "INDEX": np.tile(np.arange(length), len(cols)),
                    "TIME": np.tile(np.arange(1, length + 1) * 0.1, len(cols)),
                    "SOCKET": pd.NA,
                    "CORE": pd.NA,
                    "CPU": pd.NA,
                    "NODE": pd.NA,
                    "UNIT": "software",
                    "SAMPLE_VALUE": values.T.reshape(n),
                    "RUN": run,
                    "REPEAT": 1,
                    "PMU": "software",
                    "VALUE_UNIT": "",
                    "PERCENT_RUNNING": 100.0,
                }
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    frame["STATUS"] = np.where(frame["SAMPLE_VALUE"].isna(), RowStatus.NOT_COUNTED, RowStatus.OK)
    frame.loc[frame["STATUS"] != RowStatus.OK, "PERCENT_RUNNING"] = np.nan
    return csvfile.normalize(frame)


def main() -> None:
    rows = []

    def step(name, fn):
        start = time.perf_counter()
        value = fn()
        rows.append((name, time.perf_counter() - start))
        return value

    frame = synthetic()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "results.csv"
        csvfile.write_csv(frame, path)
        size_mb = path.stat().st_size / 1e6
        # the stages of `correlation.analyse`, as `autoprof analyze correlation` runs them
        loaded = step("read + validate results.csv", lambda: data.load(path, data.SERIES_COLUMNS))
        intervals = step("per-interval means", lambda: data.per_interval(loaded))
        series = step("interval series (wide)", lambda: data.interval_series(intervals))
        excluded = step("exclusions", lambda: correlation.exclusions(series))
        usable = series.drop(columns=excluded["event"])
        matrix = step("Pearson matrix", lambda: correlation.correlate(usable, "pearson"))
        order = step("clustering", lambda: correlation.cluster_order(matrix))
        result = correlation.Correlation(
            matrix.iloc[order, order], excluded, "pearson", len(series)
        )
        step("heatmap PNG", lambda: png.heatmap(result).savefig(Path(tmp) / "h.png"))
        total = sum(t for _, t in rows)
        step("Spearman matrix", lambda: correlation.correlate(usable, "spearman"))
    print(
        f"correlation: {EVENTS} events x {INTERVALS} intervals, {len(frame):,} rows, "
        f"{size_mb:.0f} MB results.csv, {RUNS} runs"
    )
    print(f"{'stage':<36} {'seconds':>8}")
    for name, seconds in rows:
        print(f"{name:<36} {seconds:8.2f}")
    pearson, spearman = dict(rows)["Pearson matrix"], dict(rows)["Spearman matrix"]
    for label, seconds in (
        ("total, Pearson", total),
        ("total, Spearman", total - pearson + spearman),
    ):
        verdict = "met" if seconds < TARGET_S else "MISSED"
        print(f"{label:<36} {seconds:8.2f}   (target < {TARGET_S:.0f} s: {verdict})")


if __name__ == "__main__":
    main()
