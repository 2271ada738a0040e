"""The analyses of `autoprof analyze` for the web pages: correlation, stats and compare over a
run's results frame, as JSON-ready data.

They need the whole frame (`store.export.frame`), so the run page asks for them after it has
opened; frames of the last few runs asked for stay in memory (a stored run never changes).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import pandas as pd

from autoprof.analysis import compare as compare_mod
from autoprof.analysis import correlation, data, stats
from autoprof.errors import AutoprofError
from autoprof.store import export
from autoprof.store.engine import Store
from autoprof.store.queries import find_run

CACHED_FRAMES = 4
HEATMAP_EVENTS = 60  # the most variable events when a run has more


class FrameCache:
    """Results frames (prepared for analysis) of the runs looked at last, keyed by uuid."""

    def __init__(self, size: int = CACHED_FRAMES):
        self.size = size
        self.frames: OrderedDict[str, pd.DataFrame] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, store: Store, ident: str) -> tuple[str, pd.DataFrame]:
        with store.read() as conn:
            uuid = find_run(conn, ident).uuid
            with self.lock:
                if uuid in self.frames:
                    self.frames.move_to_end(uuid)
                    return uuid, self.frames[uuid]
            frame = export.frame(conn, uuid, partial=True)
        if not frame.empty:
            frame = data.prepare(frame)
        with self.lock:
            self.frames[uuid] = frame
            while len(self.frames) > self.size:
                self.frames.popitem(last=False)
        return uuid, frame

    def forget(self, uuid: str) -> None:
        with self.lock:
            self.frames.pop(uuid, None)


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-safe dicts (NaN and infinities as None, numpy scalars as Python)."""
    out = []
    for row in table.to_dict(orient="records"):
        clean = {}
        for key, value in row.items():
            if isinstance(value, np.generic):
                value = value.item()
            if value is pd.NA or (isinstance(value, float) and not math.isfinite(value)):
                value = None
            clean[str(key)] = value
        out.append(clean)
    return out


def run_analyses(frame: pd.DataFrame) -> dict[str, Any]:
    """Stats per event and the clustered correlation matrix (or why there is none)."""
    table = stats.event_table(frame) if not frame.empty else pd.DataFrame()
    result: dict[str, Any] = {"stats": _records(table.reset_index()) if len(table) else []}
    try:
        found = correlation.analyse(frame, top=HEATMAP_EVENTS)
    except AutoprofError as err:
        result["correlation"] = {"error": str(err)}
        return result
    matrix = found.matrix
    result["correlation"] = {
        "events": [str(e) for e in matrix.index],
        "matrix": [
            [None if np.isnan(v) else round(float(v), 4) for v in row] for row in matrix.to_numpy()
        ],
        "method": found.method,
        "intervals": found.intervals,
        "excluded": _records(found.excluded),
    }
    return result


def compare_runs(frame_a: pd.DataFrame, frame_b: pd.DataFrame, test: str) -> list[dict[str, Any]]:
    """`analyze compare`'s table, largest changes first."""
    return _records(compare_mod.compare(frame_a, frame_b, test=test))
