"""Largest-Triangle-Three-Buckets (Steinarsson, 2013): keep `n` points of a series that still
look like the whole of it, so a million intervals reach the browser as a thousand points.

Pure numpy: each bucket keeps the point that spans the largest triangle with the point kept
in the previous bucket and the mean of the next bucket; the first and last points stay.
"""

from __future__ import annotations

import numpy as np


def lttb(x: np.ndarray, y: np.ndarray, n: int) -> np.ndarray:
    """Indices of the `n` points LTTB keeps (all of them when there are no more than `n`).
    NaN values are dropped first: a chart draws no point for them anyway."""
    keep = np.flatnonzero(~(np.isnan(x) | np.isnan(y)))
    if len(keep) <= max(n, 2):
        return keep
    if n < 3:
        return keep[[0, -1]][:n]
    x, y = x[keep], y[keep]
    edges = np.linspace(1, len(x) - 1, n - 1).astype(np.int64)  # n-2 buckets between the ends
    # mean point of each bucket, and of the last point as the bucket after the last one
    sizes = np.diff(np.append(edges, len(x)))
    mean_x = np.add.reduceat(x, edges) / sizes
    mean_y = np.add.reduceat(y, edges) / sizes
    chosen = np.empty(n, dtype=np.int64)
    chosen[0], chosen[-1] = 0, len(x) - 1
    previous = 0
    for b in range(n - 2):
        lo, hi = edges[b], edges[b + 1]
        px, py = x[previous], y[previous]
        nx, ny = mean_x[b + 1], mean_y[b + 1]
        area = np.abs((px - nx) * (y[lo:hi] - py) - (px - x[lo:hi]) * (ny - py))
        previous = lo + int(np.argmax(area))
        chosen[b + 1] = previous
    return keep[chosen]
