"""Loading a results file for analysis, and the per-event views every analysis builds on.

The contract of this package: `load()` turns a `results.csv` into a validated frame (the
`autoprof.results.csvfile` columns plus ``EVENT``, the label of an event); every analysis is a pure
function of such frames that returns frames or figures; only the CLI reads and writes files.

Two views cover all the analyses:

- `per_interval`: one row per (event, run, repeat, interval) with the mean and the sum of the
  count over the CPUs/boxes it was counted on (a per-process count has one location);
- `interval_series`: one column per event and one row per interval INDEX, so that events
  measured in different runs of the plan line up by interval index.

Rows whose STATUS is neither ``ok`` nor ``multiplexed`` have no SAMPLE_VALUE; they are kept in
the frame (the stats count them) and skipped by every mean and sum.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from autoprof.errors import AutoprofError
from autoprof.results import csvfile
from autoprof.results.sanity_report import Report, read_report
from autoprof.run import outdir

EVENT = "EVENT"  # column added by `load`: the event's label, unique per (PMU, EVENT_NAME)

# The columns each analysis needs: reading only those is several times faster on a large file.
SERIES_COLUMNS = ["EVENT_NAME", "INDEX", "TIME", "SAMPLE_VALUE", "RUN", "REPEAT", "PMU"]


def results_path(path: str | Path) -> Path:
    """The results file a command-line argument names: a results.csv itself, or the profile
    folder holding one (autoperf's `correlation.py ./out` convention)."""
    path = Path(path)
    if not path.is_dir():
        return path
    found = path / outdir.RESULTS
    if not found.is_file():
        hint = (
            f"run `autoprof aggregate {path}` first"
            if (path / outdir.MANIFEST).is_file()
            else "give a results.csv or a profile folder"
        )
        raise AutoprofError(f"{path}/ holds no {outdir.RESULTS}: {hint}")
    return found


def load(
    path: str | Path, columns: list[str] | None = None, region: str | None = None
) -> pd.DataFrame:
    """Read and validate a results file; every problem becomes one clear line. With `columns`,
    only those are read (the others are absent from the frame). `path` may be the profile
    folder (see `results_path`). The rows are the whole program's, or with `region` that
    region's (`profile --region`): a region's count of a run is one sample of it."""
    path = results_path(path)
    if not path.is_file():
        raise AutoprofError(f"{path}: no such results file")
    try:
        header = list(pd.read_csv(path, nrows=0).columns)
        missing = [c for c in csvfile.AUTOPERF_COLUMNS if c not in header]
        if missing:
            raise AutoprofError(
                f"{path}: not a results.csv: missing column(s) {', '.join(missing)} "
                f"(expected {','.join(csvfile.AUTOPERF_COLUMNS)},...)"
            )
        wanted = None if columns is None else [*columns, "REGION"]
        frame = csvfile.read_csv(path, columns=wanted, categorical=True)
    except pd.errors.EmptyDataError:
        raise AutoprofError(f"{path}: the file is empty, not a results.csv") from None
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise AutoprofError(f"{path}: not a readable results.csv ({first})") from None
    if frame.empty:
        raise AutoprofError(f"{path}: the results file has no rows")
    return prepare(of_region(frame, region, path))


def of_region(frame: pd.DataFrame, region: str | None, path: object = "results") -> pd.DataFrame:
    """The rows of `region` (None: the whole program's), without the REGION column; one line
    naming the regions there are when `region` has no row."""
    if "REGION" not in frame.columns:
        if region is not None:
            raise AutoprofError(f"{path}: no regions (profile with --region to count some)")
        return frame
    names = frame["REGION"].astype("string")
    keep = names.isna() if region is None else (names == region).fillna(False)
    if region is not None and not keep.any():
        there = ", ".join(csvfile.region_names(frame)) or "none"
        raise AutoprofError(f"{path}: no rows of region {region!r} (regions: {there})")
    return frame[keep.to_numpy(dtype=bool)].drop(columns="REGION")


WHOLE_PROGRAM = "(whole program)"


def region_totals(frame: pd.DataFrame) -> pd.DataFrame:
    """The whole program and each region side by side: per event (label), each one's total
    (mean over executions: runs and repeats) as a column; empty when the file has no region."""
    if "REGION" not in frame.columns or frame["REGION"].isna().all():
        return pd.DataFrame()
    region = frame["REGION"].astype("string").fillna(WHOLE_PROGRAM)
    order = [WHOLE_PROGRAM, *csvfile.region_names(frame)]
    return side_by_side(frame.assign(REGION=region), "REGION", order)


def thread_totals(frame: pd.DataFrame) -> pd.DataFrame:
    """The threads of a `--per-thread` profile side by side (UNIT is the thread, COMM-TID):
    per event, each thread's total (mean over executions) as a column, the whole program's
    rows only."""
    if "REGION" in frame.columns:
        frame = frame[frame["REGION"].isna().to_numpy(dtype=bool)]
    units = frame["UNIT"].astype("string")
    order = list(dict.fromkeys(units.dropna()))
    return side_by_side(frame.assign(UNIT=units), "UNIT", order)


def side_by_side(frame: pd.DataFrame, column: str, order: list[str]) -> pd.DataFrame:
    """Per event (label) and value of `column`, the total over a run's rows, averaged over
    executions (runs and repeats): one column per value of `column`, in `order`."""
    labels = event_labels(frame)
    totals = (
        frame.assign(EVENT=labels)
        .groupby(["EVENT", column, "RUN", "REPEAT"], observed=True)["SAMPLE_VALUE"]
        .sum(min_count=1)
        .groupby(level=["EVENT", column], observed=True)
        .mean()
        .unstack(column)
    )
    totals = totals.reindex(columns=[c for c in order if c in totals.columns])
    totals.index.name, totals.columns.name = "event", None
    return totals


def prepare(frame: pd.DataFrame) -> pd.DataFrame:
    """Normalize a results frame (all columns or some) for analysis: canonical dtypes with text
    as categories, RUN/REPEAT defaulting to 1 (autoperf files have neither), a SAMPLE_VALUE of
    ±inf missing (a run stored before `upload` refused them), and the EVENT label column."""
    dtypes = {c: csvfile.DTYPES[c] for c in frame.columns if c in csvfile.DTYPES}
    frame = frame.astype({c: "category" if t == "string" else t for c, t in dtypes.items()})
    keep = frame["EVENT_NAME"].notna() & frame["INDEX"].notna()
    if not keep.all():
        frame = frame[keep]
    for name in ("RUN", "REPEAT"):
        frame[name] = frame[name].fillna(1)
    if "SAMPLE_VALUE" in frame.columns:  # inf is no count (upload refuses it): not counted
        values = frame["SAMPLE_VALUE"]
        frame["SAMPLE_VALUE"] = values.mask(np.isinf(values.to_numpy(np.float64, na_value=0)))
    if (frame["INDEX"] < 0).any():
        raise AutoprofError("results file has a negative interval INDEX")
    frame[EVENT] = event_labels(frame)
    return frame.reset_index(drop=True)


def event_labels(frame: pd.DataFrame) -> pd.Categorical:
    """The label of each row's event (`pair_labels`). Categorical: millions of rows share a few
    hundred labels, and grouping by codes is what keeps the analyses fast."""
    name_codes, names = pd.factorize(frame["EVENT_NAME"])
    pmu_codes, pmus = pd.factorize(frame["PMU"])  # no PMU (autoperf): code -1, label ""
    pmu_codes, pmus = pmu_codes + 1, ["", *pmus]
    pair_codes, pairs = pd.factorize(name_codes.astype(np.int64) * len(pmus) + pmu_codes)
    pair_name = np.asarray(names, dtype=object)[pairs // len(pmus)]
    pair_pmu = np.asarray(pmus, dtype=object)[pairs % len(pmus)]
    labels = pair_labels(list(zip(pair_name, pair_pmu, strict=True)))
    return pd.Categorical.from_codes(pair_codes, categories=labels)


def pair_labels(pairs: list[tuple[str, str | None]]) -> list[str]:
    """The label of each distinct (event name, PMU) pair: its name, or ``pmu/name`` when the
    name alone is ambiguous (the same event name scheduled on two PMUs)."""
    uses = Counter(name for name, _ in pairs)
    return [f"{pmu}/{name}" if uses[name] > 1 and pmu else name for name, pmu in pairs]


def _slots(keys: list[np.ndarray], position: np.ndarray) -> tuple:
    """Number (series, position) cells densely, without sorting or hashing millions of rows.

    A series is a combination of the small non-negative integer `keys` (one event in one run
    and repeat); it gets a block of consecutive slots, one per position from 0 to its largest
    (interval indexes are dense). Returns each row's slot, the number of slots, and per slot
    the value of each key and the position, in key order then position order.
    """
    dims = tuple(int(k.max()) + 1 if len(k) else 1 for k in keys)
    series = np.ravel_multi_index(keys, dims)
    length = np.zeros(int(np.prod(dims)), dtype=np.int64)
    np.maximum.at(length, series, position + 1)
    start = np.cumsum(length) - length
    slots = int(length.sum())
    owner = np.repeat(np.arange(len(length)), length)
    return (
        start[series] + position,
        slots,
        np.unravel_index(owner, dims),
        np.arange(slots) - start[owner],
    )


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes 0..n-1 of a column with few distinct values, in value order (hashing, not sorting,
    the millions of rows)."""
    codes, uniques = pd.factorize(values)
    order = np.argsort(uniques)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[codes], uniques[order]


def _group_mean(group: np.ndarray, values: np.ndarray, groups: int) -> tuple:
    """Sum, count and mean of the non-NaN `values` per group (NaN mean where count is 0)."""
    present = ~np.isnan(values)
    sums = np.bincount(group, weights=np.where(present, values, 0.0), minlength=groups)
    counts = np.bincount(group, weights=present, minlength=groups).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / counts, np.nan)
    return sums, counts, means


def per_interval(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (EVENT, RUN, REPEAT, INDEX): TIME (the latest of the rows), MEAN and SUM of
    the counted values over the CPUs/boxes, and VALUES, how many locations gave a number
    (MEAN and SUM are NaN when none did)."""
    events = frame[EVENT].array
    runs, run_values = _codes(frame["RUN"].to_numpy(np.int64))
    repeats, repeat_values = _codes(frame["REPEAT"].to_numpy(np.int64))
    index, index_values = _codes(frame["INDEX"].to_numpy(np.int64))
    slot, slots, (event_code, run_code, repeat_code), index_code = _slots(
        [events.codes.astype(np.int64), runs, repeats], index
    )
    sums, counts, means = _group_mean(slot, frame["SAMPLE_VALUE"].to_numpy(np.float64), slots)
    time = np.full(slots, -np.inf)
    np.maximum.at(time, slot, frame["TIME"].to_numpy(np.float64, na_value=-np.inf))
    columns = {
        EVENT: event_code,
        "RUN": run_values[run_code],
        "REPEAT": repeat_values[repeat_code],
        "INDEX": index_values[index_code],
        "TIME": np.where(np.isinf(time), np.nan, time),
        "MEAN": means,
        "SUM": np.where(counts > 0, sums, np.nan),
        "VALUES": counts,
    }
    rows = np.bincount(slot, minlength=slots) > 0
    if not rows.all():  # an interval index missing from a run: no row for it
        columns = {name: values[rows] for name, values in columns.items()}
    columns[EVENT] = pd.Categorical.from_codes(columns[EVENT], dtype=events.dtype)
    # fresh arrays: consolidating them into one block would copy millions of rows
    return pd.DataFrame(columns, copy=False)


def normalize_by(intervals: pd.DataFrame, anchor: str) -> pd.DataFrame:
    """Divide each event's MEAN and SUM by the anchor event's count in the same run, repeat and
    interval, so that events of different runs compare per unit of work (e.g. per instruction)."""
    anchor_rows = intervals[intervals[EVENT] == anchor]
    if anchor_rows.empty:
        raise AutoprofError(f"anchor event {anchor!r} is not in the results")
    runs = set(intervals["RUN"].unique())
    anchor_runs = set(anchor_rows["RUN"].unique())
    lacking = sorted(int(r) for r in runs - anchor_runs)
    if lacking:
        raise AutoprofError(
            f"anchor event {anchor!r} is not measured in every run of the chosen events "
            f"(missing in run(s) {_few(lacking)}); choose an event measured in every run, or "
            f"narrow --events to events of run(s) {_few(sorted(int(r) for r in anchor_runs))}"
        )
    denominator = anchor_rows.set_index(["RUN", "REPEAT", "INDEX"])["SUM"].rename("ANCHOR")
    out = intervals.join(denominator, on=["RUN", "REPEAT", "INDEX"])
    anchor_value = out.pop("ANCHOR").replace(0, np.nan)
    out["MEAN"] = out["MEAN"] / anchor_value
    out["SUM"] = out["SUM"] / anchor_value
    return out


def _few(numbers: list[int], limit: int = 10) -> str:
    return ", ".join(str(n) for n in numbers[:limit]) + (" ..." if len(numbers) > limit else "")


def interval_series(intervals: pd.DataFrame, column: str = "MEAN") -> pd.DataFrame:
    """Wide series: rows = interval INDEX, columns = events, values = `column` averaged over
    runs and repeats (events of different runs align by interval index). NaN where an event has
    no number in that interval."""
    events = intervals[EVENT].array
    seen = np.bincount(events.codes, minlength=len(events.categories)) > 0
    used = np.flatnonzero(seen)
    col_of = (np.cumsum(seen) - 1)[events.codes]
    row_of, rows = _codes(intervals["INDEX"].to_numpy(np.int64))
    # the output is dense anyway: no grouping needed; column-major cells, because the
    # intervals come event by event and the sums then fill memory in order
    cell = col_of * len(rows) + row_of
    _, _, means = _group_mean(cell, intervals[column].to_numpy(np.float64), len(rows) * len(used))
    columns = pd.Index(np.asarray(events.categories)[used], name=EVENT)
    wide = means.reshape(len(used), len(rows)).T
    return pd.DataFrame(wide, index=pd.Index(rows, name="INDEX"), columns=columns)


def run_totals(intervals: pd.DataFrame) -> pd.DataFrame:
    """Total count of each event in each (RUN, REPEAT): the sum over intervals and locations.

    Each (run, repeat) is one execution of the program, so these totals are the samples a test
    across repetitions uses. NaN when the event had no number in the whole run.
    """
    grouped = intervals.groupby([EVENT, "RUN", "REPEAT"], sort=True, observed=True)["SUM"]
    totals = grouped.sum(min_count=1).rename("TOTAL")
    return totals.reset_index()


def filter_events(names: list[str] | pd.Index, pattern: str | None) -> list[str]:
    """The names that match `pattern` (a regular expression searched anywhere in the name)."""
    if not pattern:
        return list(names)
    try:
        regex = re.compile(pattern)
    except re.error as err:
        raise AutoprofError(
            f"--events {pattern!r} is not a valid regular expression ({err})"
        ) from None
    return [n for n in names if regex.search(n)]


def variability(series: pd.DataFrame) -> pd.Series:
    """Coefficient of variation (std / |mean|) of each event over the intervals: scale-free, so
    a large count and a small one rank by how much they move, not by their size."""
    mean = series.mean().abs()
    return (series.std(ddof=0) / mean.replace(0, np.nan)).fillna(0.0)


def short_label(name: str, limit: int) -> str:
    """`name` cut to `limit` characters for a plot, in the middle: event names differ at both
    ends (``OFFCORE_RESPONSE.DEMAND_DATA_RD.L3_MISS.REMOTE_HITM``); the CSVs keep full names."""
    if len(name) <= limit:
        return name
    head = (limit - 1) // 2
    return name[:head] + "…" + name[len(name) - (limit - 1 - head) :]


def read_manifest_beside(path: Path) -> outdir.Manifest | None:
    """The manifest of the profile a results file came from, when it sits beside it."""
    if not (path.parent / outdir.MANIFEST).is_file():
        return None
    return outdir.read_manifest(path.parent)


def read_report_beside(path: Path) -> Report | None:
    """The sanity report `aggregate` wrote beside a results file, if any."""
    report = path.parent / outdir.REPORT
    return read_report(report) if report.is_file() else None
