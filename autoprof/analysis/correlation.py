"""Which events move together: a correlation matrix over per-interval event series, clustered.

Each event becomes a time series (its mean over CPUs/boxes per interval, averaged over the runs
and repeats it was measured in, aligned by interval index); events that cannot correlate with
anything (no value, all zero, constant) are left out and listed. Correlation is pairwise over
the intervals both events have a number in; hierarchical clustering on ``1 - |r|`` orders the
matrix so that events that move together (or exactly against each other) sit side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from autoprof.analysis import data
from autoprof.analysis.choices import CORRELATION_FEWEST_OVERLAP as FEWEST_OVERLAP
from autoprof.analysis.choices import CORRELATION_METHODS as METHODS
from autoprof.analysis.choices import CORRELATION_MIN_OVERLAP as MIN_OVERLAP
from autoprof.analysis.tables import Table
from autoprof.errors import AutoprofError

LABEL_LIMIT = 60  # more events than this and the heatmap is unreadable: number them instead
# The heatmap's colours from r = -1 (blue) through 0 (near white) to +1 (red): ColorBrewer's
# RdBu, 11 classes, reversed (Matplotlib's RdBu_r). The PNG and the web page both draw with
# these stops, so one colour means one r in both.
COLOURS = ("#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7",
           "#fddbc7", "#f4a582", "#d6604d", "#b2182b", "#67001f")  # fmt: skip


def colour_scale() -> list[tuple[float, str]]:
    """COLOURS as (position 0..1 for r = -1..1, colour) stops: Plotly's colorscale."""
    return [(i / (len(COLOURS) - 1), c) for i, c in enumerate(COLOURS)]


SHOWN_PAIRS = 20  # the strongest pairs a terminal shows
SHORT_COLUMNS = ["event_a", "event_b", "common_intervals"]
TIE_DIGITS = 12  # Spearman: values equal to this many significant digits are ties


@dataclass
class Correlation:
    """The result: `matrix` in cluster order (rows = columns = events), the events left out
    with the reason, and how the series were built (for titles and file headers)."""

    matrix: pd.DataFrame
    excluded: pd.DataFrame  # columns: event, reason
    method: str
    intervals: int
    anchor: str | None = None
    # pairs of events (of different runs) with too few common intervals: no correlation
    short_pairs: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SHORT_COLUMNS))
    min_overlap: int = MIN_OVERLAP
    min_overlap_chosen: bool = False  # taken from the data: the user did not set it
    # attached profiles: the pairs no run measured together (see cross_run_pairs)
    cross_run: pd.DataFrame | None = None

    FIGURES: ClassVar[tuple[str, ...]] = ("correlation_heatmap.png",)

    @property
    def labelled(self) -> bool:
        return len(self.matrix) <= LABEL_LIMIT

    def index_table(self) -> pd.DataFrame:
        """Position of each event on the heatmap's axes (1-based), for unlabelled heatmaps."""
        return pd.DataFrame(
            {"position": np.arange(1, len(self.matrix) + 1), "event": self.matrix.index}
        )

    def strongest_pairs(self, k: int = SHOWN_PAIRS) -> pd.DataFrame:
        """The k pairs of events with the largest |r| (together or against each other)."""
        values = self.matrix.to_numpy()
        i, j = np.triu_indices(len(values), k=1)
        r = values[i, j]
        order = np.argsort(-np.nan_to_num(np.abs(r), nan=-1.0), kind="stable")[:k]
        names = np.asarray(self.matrix.index, dtype=object)
        return pd.DataFrame({"event_a": names[i[order]], "event_b": names[j[order]], "r": r[order]})

    def tables(self) -> list[Table]:
        found = [Table("correlation_matrix", self.matrix, index="event", float_format="%.6g")]
        if not self.labelled:
            found.append(Table("correlation_index", self.index_table()))
        for name, frame in (
            ("correlation_excluded", self.excluded),
            ("correlation_short_pairs", self.short_pairs),
            ("correlation_cross_run", self.cross_run),
        ):
            if frame is not None and len(frame):
                found.append(Table(name, frame))
        return found

    def shown(self) -> list[Table]:
        title = f"Strongest correlations ({self.method})"
        return [Table("correlation_pairs", self.strongest_pairs(), title)]

    def notes(self) -> list[str]:
        lines = []
        if self.min_overlap_chosen and self.min_overlap != MIN_OVERLAP:
            lines.append(
                f"--min-overlap {self.min_overlap} chosen from the data: the results have "
                f"{self.intervals} intervals, fewer than the default {MIN_OVERLAP} "
                "(set --min-overlap to change it)"
            )
        if len(self.excluded):
            shown = ", ".join(f"{e} ({r})" for e, r in self.excluded.head(10).to_numpy())
            more = f" and {len(self.excluded) - 10} more" if len(self.excluded) > 10 else ""
            lines.append(f"left out {len(self.excluded)} event(s): {shown}{more}")
        if len(self.short_pairs):
            lines.append(
                f"{len(self.short_pairs)} pair(s) of events share fewer than {self.min_overlap} "
                "intervals (runs of different lengths): no correlation, grey on the heatmap"
            )
        if self.cross_run is not None:
            lines.append(
                f"warning: attached profile: {len(self.cross_run)} pair(s) of events were "
                "measured in different runs, i.e. at different moments of the target; their "
                "correlation aligns intervals by index, not by time (listed in "
                "correlation_cross_run.csv)"
            )
        lines.append(
            f"{len(self.matrix)} events over {self.intervals} intervals, {self.method} correlation"
        )
        return lines


def choose_min_overlap(series: pd.DataFrame) -> int:
    """--min-overlap when the user did not set it: MIN_OVERLAP, or fewer when the results have
    fewer intervals (autoperf's published results.csv has 4), but never below FEWEST_OVERLAP."""
    return max(FEWEST_OVERLAP, min(MIN_OVERLAP, len(series)))


def exclusions(series: pd.DataFrame, min_overlap: int = MIN_OVERLAP) -> pd.DataFrame:
    """Events with nothing to correlate: no value at all, only zeros, one value (to within
    rounding: a count divided by an anchor it is proportional to is constant), or values in
    fewer intervals than a correlation needs."""
    counted = series.notna().sum()
    low = series.min()
    high = series.max()
    reason = pd.Series("", index=series.columns, dtype=object)
    spread = (high - low) <= 1e-12 * np.maximum(high.abs(), low.abs())  # ratios: rounding
    reason[spread & (counted > 0)] = "constant"
    reason[(counted > 0) & (counted < min_overlap)] = f"fewer than {min_overlap} intervals"
    reason[(low == 0) & (high == 0)] = "all zero"
    reason[counted == 0] = "no value"
    reason = reason[reason != ""]
    return pd.DataFrame({"event": reason.index.astype(str), "reason": reason.to_numpy()})


def _patterns(present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct columns of a boolean (rows, columns) mask, as a (rows, patterns) mask, and
    each column's pattern number. Hashing each column's bytes: np.unique(axis=0) sorts them."""
    number: dict[bytes, int] = {}
    pattern_of = np.array(
        [number.setdefault(column.tobytes(), len(number)) for column in present.T], dtype=np.int64
    )
    firsts = np.unique(pattern_of, return_index=True)[1]
    return present[:, firsts], pattern_of


def common_intervals(series: pd.DataFrame) -> np.ndarray:
    """How many intervals each pair of events both have a number in (events of runs of
    different lengths share only the shorter run's intervals)."""
    patterns, pattern_of = _patterns(series.notna().to_numpy())
    patterns = patterns.astype(np.float64)
    return (patterns.T @ patterns)[np.ix_(pattern_of, pattern_of)].astype(np.int64)


def short_pairs(series: pd.DataFrame, min_overlap: int = MIN_OVERLAP) -> pd.DataFrame:
    """The pairs of events that share fewer than `min_overlap` intervals (see SHORT_COLUMNS)."""
    common = common_intervals(series)
    i, j = np.nonzero(np.triu(common < min_overlap, k=1))
    names = np.asarray(series.columns, dtype=object)
    return pd.DataFrame(
        {"event_a": names[i], "event_b": names[j], "common_intervals": common[i, j]},
        columns=SHORT_COLUMNS,
    )


def cross_run_pairs(frame: pd.DataFrame, events: list[str]) -> pd.DataFrame:
    """The pairs of `events` that no run measured together: in an attached profile (`profile
    -p`) such a pair compares different moments of the target, aligned by interval index only.
    `frame` has EVENT and RUN columns: the results, or their per-interval view."""
    rows = frame[frame[data.EVENT].isin(events)]
    runs = rows.groupby(data.EVENT, observed=True)["RUN"].agg(lambda r: frozenset(r.unique()))
    pairs = [
        (a, b, " ".join(map(str, sorted(runs[a]))), " ".join(map(str, sorted(runs[b]))))
        for i, a in enumerate(events)
        for b in events[i + 1 :]
        if a in runs and b in runs and not runs[a] & runs[b]
    ]
    return pd.DataFrame(pairs, columns=["event_a", "event_b", "runs_a", "runs_b"])


def _pearson(values: np.ndarray, min_overlap: int) -> np.ndarray:
    """Pairwise-complete Pearson correlation of the columns of `values` (NaN = no value) from
    sums, sums of squares and cross products over the rows each pair shares. Columns are first
    centred and scaled over their own values, which keeps the sums small and the subtraction
    below exact enough for |r| = 1 to show. Columns fall into few patterns of present rows (one
    per run, in practice), so every sum but the cross products is a product with those
    patterns, not with the whole mask."""
    present = ~np.isnan(values)
    patterns, pattern_of = _patterns(present)
    patterns = patterns.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nanmean(values, axis=0)
        scale = np.nanstd(values, axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    x = np.where(present, (values - mean) / scale, 0.0)
    n = (patterns.T @ patterns)[np.ix_(pattern_of, pattern_of)]
    sums = (x.T @ patterns)[:, pattern_of]  # [i, j]: sum of column i over the rows i, j share
    squares = ((x * x).T @ patterns)[:, pattern_of]
    products = x.T @ x
    with np.errstate(invalid="ignore", divide="ignore"):
        var_i = squares - sums * sums / n
        var_j = var_i.T
        r = (products - sums * sums.T / n) / np.sqrt(var_i * var_j)
    flat = (var_i <= 1e-12 * n) | (var_j <= 1e-12 * n)  # constant over the shared rows
    r[(n < min_overlap) | flat] = np.nan
    return r


class _SubsetRanks:
    """Average ranks (ties share their mean rank) of each column over any subset of its rows.

    Pairwise-complete Spearman ranks a column once per set of rows it shares with another
    column; re-sorting for each set is what makes it slow. Sorting each column once gives every
    row its tie group (rows of equal value, numbered in value order); over any subset, a row's
    rank is then the count of chosen rows in the groups up to its own, less half the ties: a
    bincount and a cumulative sum, in linear time.
    """

    def __init__(self, values: np.ndarray):
        columns = np.ascontiguousarray(values.T)  # one row per column: contiguous sorts
        order = np.argsort(columns, axis=1, kind="stable")  # NaN sorts last
        ordered = np.take_along_axis(columns, order, axis=1)
        new_value = np.ones(ordered.shape, dtype=bool)
        new_value[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        self.tie_group: np.ndarray = np.empty(columns.shape, dtype=np.int64)
        np.put_along_axis(self.tie_group, order, np.cumsum(new_value, axis=1) - 1, axis=1)

    def ranks(self, columns: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Ranks (1-based) of `columns` over the rows where `rows` is true: (rows, columns)."""
        k, n = len(columns), self.tie_group.shape[1]
        group = self.tie_group[columns][:, rows] + (np.arange(k) * n)[:, None]
        counts = np.bincount(group.ravel(), minlength=k * n)
        mean_rank = np.cumsum(counts.reshape(k, n), axis=1).ravel() - (counts - 1) / 2
        return mean_rank[group].T


def _unit_columns(block: np.ndarray) -> np.ndarray:
    """Columns centred and scaled to unit norm; a column with no variance becomes NaN so that
    its correlations are NaN, not a division error."""
    centred = block - block.mean(axis=0)
    norm = np.sqrt((centred * centred).sum(axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return centred / np.where(norm > 1e-12 * np.sqrt(len(block)), norm, np.nan)


def _significant(values: np.ndarray, digits: int) -> np.ndarray:
    """`values` rounded to `digits` significant digits (NaN stays NaN)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        magnitude = np.floor(np.log10(np.abs(values)))
    scale = 10.0 ** (digits - 1 - np.nan_to_num(magnitude, nan=0.0, posinf=0.0, neginf=0.0))
    return np.round(values * scale) / scale


def _spearman(values: np.ndarray, min_overlap: int) -> np.ndarray:
    """Pairwise-complete Spearman correlation: ranks depend on which rows a pair shares, so
    columns are grouped by their pattern of missing rows (in practice: by run) and each pair of
    groups is ranked over the rows both have and correlated as one matrix product. Values
    that agree to TIE_DIGITS significant digits tie: the same mean summed in another order
    differs in the last bits, and ranks must not depend on that."""
    patterns, group_of = _patterns(~np.isnan(values))
    patterns = patterns.T
    groups = [np.flatnonzero(group_of == g) for g in range(len(patterns))]
    ranker = _SubsetRanks(_significant(values, TIE_DIGITS))
    own: dict[int, np.ndarray] = {}  # ranks over all of a group's rows, needed once per group

    def ranked(group: int, rows: np.ndarray) -> np.ndarray:
        if not np.array_equal(rows, patterns[group]):  # ranks for one pair only: not kept
            return _unit_columns(ranker.ranks(groups[group], rows))
        if group not in own:
            own[group] = _unit_columns(ranker.ranks(groups[group], rows))
        return own[group]

    k = values.shape[1]
    out = np.full((k, k), np.nan)
    for a in range(len(groups)):
        for b in range(a, len(groups)):
            rows = patterns[a] & patterns[b]
            if rows.sum() < min_overlap:
                continue
            block = ranked(a, rows).T @ ranked(b, rows)
            out[np.ix_(groups[a], groups[b])] = block
            out[np.ix_(groups[b], groups[a])] = block.T
    return out


def correlate(
    series: pd.DataFrame, method: str = "pearson", min_overlap: int = MIN_OVERLAP
) -> pd.DataFrame:
    """Pairwise-complete correlation of the columns of `series` (NaN = no value): the same
    numbers as pandas' `DataFrame.corr`, computed with matrix products so that 500 events take
    about a second instead of minutes. NaN where two events share fewer than `min_overlap`
    intervals or one of them is constant over the intervals they share."""
    if method not in METHODS:
        raise AutoprofError(f"unknown correlation method {method!r} (choose {', '.join(METHODS)})")
    values = series.to_numpy(dtype=np.float64)
    compute = _pearson if method == "pearson" else _spearman
    out = compute(values, max(min_overlap, 2))
    np.clip(out, -1.0, 1.0, out=out)
    return pd.DataFrame(out, index=series.columns.copy(), columns=series.columns.copy())


def clustering() -> tuple[Any, Any]:
    """scipy's `hierarchy` and `squareform`, imported here, not at the top: the web app imports
    this module, and scipy.cluster costs 0.28 s of CPU (a third of a 1 M-row run page's first
    open); the server imports it in the background once it is up (`web.app`)."""
    from scipy.cluster import hierarchy
    from scipy.spatial.distance import squareform

    return hierarchy, squareform


def cluster_order(matrix: pd.DataFrame) -> list[int]:
    """Leaf order of an average-linkage clustering on the distance ``1 - |r|`` (no common
    intervals counts as unrelated), with optimal leaf ordering so that neighbours are similar."""
    if len(matrix) < 3:
        return list(range(len(matrix)))
    hierarchy, squareform = clustering()
    distance = 1.0 - np.abs(matrix.to_numpy())
    distance = np.nan_to_num(distance, nan=1.0)
    np.fill_diagonal(distance, 0.0)
    condensed = squareform((distance + distance.T) / 2, checks=False)
    linkage = hierarchy.linkage(condensed, method="average")
    linkage = hierarchy.optimal_leaf_ordering(linkage, condensed)
    return [int(i) for i in hierarchy.leaves_list(linkage)]


def analyse(
    frame: pd.DataFrame,
    method: str = "pearson",
    anchor: str | None = None,
    events: str | None = None,
    top: int | None = None,
    repeat: int | None = None,
    min_overlap: int | None = None,
    attached: bool = False,
) -> Correlation:
    """Series, exclusions, correlation and clustering of a loaded results frame.

    `events` is a regular expression on event labels, `top` keeps the K events whose series vary
    most (coefficient of variation), `repeat` uses one repetition instead of their mean,
    `anchor` divides every count by the anchor event's count in the same run and interval, and
    `min_overlap` is the fewest common intervals a pair needs for a correlation (None: chosen
    from the data by `choose_min_overlap`). `attached` (a `profile -p` folder) lists the pairs
    no run measured together.
    """
    intervals = data.per_interval(frame)
    return analyse_intervals(intervals, method, anchor, events, top, repeat, min_overlap, attached)


def analyse_intervals(
    intervals: pd.DataFrame,
    method: str = "pearson",
    anchor: str | None = None,
    events: str | None = None,
    top: int | None = None,
    repeat: int | None = None,
    min_overlap: int | None = None,
    attached: bool = False,
) -> Correlation:
    """`analyse` from the per-interval view of the results (`data.per_interval`), all it needs:
    a store builds that view a chunk of rows at a time."""
    if repeat is not None:
        intervals = intervals[intervals["REPEAT"] == repeat]
        if intervals.empty:
            raise AutoprofError(f"no results for repeat {repeat}")
    chosen = data.filter_events([str(c) for c in intervals[data.EVENT].cat.categories], events)
    if not chosen:
        raise AutoprofError(f"no event matches --events {events!r}")
    if anchor is not None:  # only the runs of the chosen events need the anchor
        intervals = intervals[intervals[data.EVENT].isin([*chosen, anchor])]
        intervals = data.normalize_by(intervals, anchor)
    series = data.interval_series(intervals)
    series = series[[c for c in series.columns if c in set(chosen)]]
    chosen_overlap = min_overlap is None
    if min_overlap is None:
        min_overlap = choose_min_overlap(series)
    excluded = exclusions(series, min_overlap)
    usable = series.drop(columns=excluded["event"])
    if top is not None:
        usable = usable[data.variability(usable).nlargest(top).index]
    if usable.shape[1] < 2:
        left = ", ".join(usable.columns) or "none"
        raise AutoprofError(
            f"correlation needs at least 2 events that vary; {usable.shape[1]} left ({left}) "
            f"after leaving out {len(excluded)} with no value, all zero, constant or "
            f"in fewer than {min_overlap} intervals"
        )
    matrix = correlate(usable, method, min_overlap)
    order = cluster_order(matrix)
    matrix = matrix.iloc[order, order]
    return Correlation(
        matrix,
        excluded,
        method,
        intervals=len(series),
        anchor=anchor,
        short_pairs=short_pairs(usable, min_overlap),
        min_overlap=min_overlap,
        min_overlap_chosen=chosen_overlap,
        cross_run=cross_run_pairs(intervals, list(matrix.index)) if attached else None,
    )
