"""Largest-Triangle-Three-Buckets (Steinarsson, 2013): keep `n` points of a series that still
look like the whole of it, so a million intervals reach the browser as a thousand points.

Pure numpy: each bucket keeps the point that spans the largest triangle with the point kept
in the previous bucket and the mean of the next bucket; the first and last points stay. The
buckets are sequential (each choice needs the previous one), so `lttb_many` walks them once for
all the lines of a run together: a run's thousands of event timelines cost one walk, not one
each.
"""

from __future__ import annotations

import numpy as np


def lttb(x: np.ndarray, y: np.ndarray, n: int) -> np.ndarray:
    """Indices of the `n` points LTTB keeps (all of them when there are no more than `n`).
    NaN values are dropped first: a chart draws no point for them anyway."""
    return lttb_many([x], [y], n)[0]


def lttb_many(xs: list[np.ndarray], ys: list[np.ndarray], n: int) -> list[np.ndarray]:
    """`lttb` of each line (xs[i], ys[i])."""
    keeps = [np.flatnonzero(~(np.isnan(x) | np.isnan(y))) for x, y in zip(xs, ys, strict=True)]
    out: list[np.ndarray] = list(keeps)
    long = [i for i, keep in enumerate(keeps) if len(keep) > max(n, 2)]
    if not long:
        return out
    if n < 3:
        for i in long:
            out[i] = keeps[i][[0, -1]][:n]
        return out
    # lines of similar bucket widths walk together (a short line padded to a long one's width
    # would cost as much as the long one)
    width = {i: int(np.log2(max(len(keeps[i]) // (n - 2), 1))) for i in long}
    for group in sorted(set(width.values())):
        lines = [i for i in long if width[i] == group]
        x = [np.asarray(xs[i], np.float64)[keeps[i]] for i in lines]
        y = [np.asarray(ys[i], np.float64)[keeps[i]] for i in lines]
        for i, chosen in zip(lines, _walk(x, y, n), strict=True):
            out[i] = keeps[i][chosen]
    return out


def _walk(x: list[np.ndarray], y: list[np.ndarray], n: int) -> list[np.ndarray]:
    """LTTB's choices (indices) in each line, longer than `n`, all lines a bucket at a time."""
    lengths = np.array([len(v) for v in x])
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    flat_x, flat_y = np.concatenate(x), np.concatenate(y)
    # per line: n-2 buckets between the ends; edges[k] starts bucket k, edges[n-2] the end
    edges = np.empty((len(x), n - 1), np.int64)
    mean_x = np.empty((len(x), n - 1))
    mean_y = np.empty((len(x), n - 1))
    for row, (vx, vy) in enumerate(zip(x, y, strict=True)):
        starts = np.linspace(1, len(vx) - 1, n - 1).astype(np.int64)
        sizes = np.diff(np.append(starts, len(vx)))
        edges[row] = starts
        # mean of each bucket, and of the last point as the bucket after the last one
        mean_x[row] = np.add.reduceat(vx, starts) / sizes
        mean_y[row] = np.add.reduceat(vy, starts) / sizes
    edges += offsets[:, None]
    chosen = np.empty((len(x), n), np.int64)
    chosen[:, 0], chosen[:, -1] = offsets, offsets + lengths - 1
    previous = offsets.copy()
    rows = np.arange(len(x))
    for b in range(n - 2):
        lo, hi = edges[:, b], edges[:, b + 1]
        at = lo[:, None] + np.arange(int((hi - lo).max()))
        inside = at < hi[:, None]
        at = np.where(inside, at, lo[:, None])
        px, py = flat_x[previous][:, None], flat_y[previous][:, None]
        nx, ny = mean_x[:, b + 1][:, None], mean_y[:, b + 1][:, None]
        area = np.abs((px - nx) * (flat_y[at] - py) - (px - flat_x[at]) * (ny - py))
        area[~inside] = -1.0
        previous = at[rows, np.argmax(area, axis=1)]
        chosen[:, b + 1] = previous
    return list(chosen - offsets[:, None])
