"""The analyses of `autoprof analyze` for the web pages: correlation, stats, compare and the
metrics' top-down tree over a run's results frame, as JSON-ready data.

They need the whole frame (`queries.export_frame`), so the run page asks for them after it has
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
from autoprof.analysis import metrics as metric_values
from autoprof.errors import AutoprofError
from autoprof.metrics import catalog as metric_catalog
from autoprof.metrics import constants
from autoprof.metrics.tree import tree_rows
from autoprof.store.engine import Store
from autoprof.store.queries import export_frame, find_run

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
            frame = export_frame(conn, uuid, partial=True)
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
        "colorscale": correlation.colour_scale(),  # the PNG's colours: red is r = +1
    }
    return result


def run_metrics(frame: pd.DataFrame, machine: dict[str, Any]) -> dict[str, Any]:
    """`analyze metrics` of a run, by the CPU id it recorded: the top-down tree as rows
    (depth, bottleneck path, group headings) and the notes; or why there is none."""
    cpu = str(machine.get("cpu_id") or "")
    if not cpu or frame.empty:
        return {"error": "no CPU id or no counts recorded"}
    try:
        found = metric_catalog.for_machine(None, cpu)
    except AutoprofError as err:
        return {"error": str(err)}
    metrics = list(found.metrics.values())
    names = {c for m in metrics for c in m.constants.values()}
    known, sources = constants.gather(machine, found.cpu, {}, names)
    values = metric_values.compute(frame, metrics, known)
    shown = metric_values.Metrics(values, found.title, refines=found.refines, sources=sources)
    rows = [
        {
            "name": row.node.shown,
            "depth": row.depth,
            "value": row.value,
            "group": row.node.group,
            "path": row.on_path,
            "bottleneck": row.last_on_path,
            "crossed": row.node.crossed,
            "scope": row.node.scope,
            "flag": row.node.flag,
        }
        for row in tree_rows(shown.nodes(), False, shown.thresholds)
    ]
    return {"cpu": found.title, "tree": rows, "notes": shown.notes()}


def compare_runs(frame_a: pd.DataFrame, frame_b: pd.DataFrame, test: str) -> list[dict[str, Any]]:
    """`analyze compare`'s table, largest changes first."""
    return _records(compare_mod.compare(frame_a, frame_b, test=test))
