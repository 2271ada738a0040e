"""`autoprof analyze compare` and `analyze metrics` for the web page: two runs' results frames
compared, and a run's top-down tree, as JSON-ready data. They need the whole frames
(`store.export.frame`); those of the last few runs asked for stay in memory (a stored run never
changes). A run's own stats and correlation come from its stored summary (`store.summary`),
never from its frame.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import pandas as pd

from autoprof.analysis import compare as compare_mod
from autoprof.analysis import data
from autoprof.analysis import metrics as metric_values
from autoprof.errors import AutoprofError
from autoprof.metrics import catalog as metric_catalog
from autoprof.metrics import constants
from autoprof.metrics.tree import tree_rows
from autoprof.store import export
from autoprof.store.engine import Store
from autoprof.store.queries import find_run
from autoprof.store.summary import records

CACHED_FRAMES = 4


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
        if not frame.empty:  # the whole program's rows: a region's are shown apart
            frame = data.prepare(data.of_region(frame, None))
        with self.lock:
            self.frames[uuid] = frame
            while len(self.frames) > self.size:
                self.frames.popitem(last=False)
        return uuid, frame

    def forget(self, uuid: str) -> None:
        with self.lock:
            self.frames.pop(uuid, None)


def compare_runs(frame_a: pd.DataFrame, frame_b: pd.DataFrame, test: str) -> list[dict[str, Any]]:
    """`analyze compare`'s table, largest changes first."""
    return records(compare_mod.compare(frame_a, frame_b, test=test))


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
    shown = metric_values.Metrics(
        values,
        found.title,
        refines=found.refines,
        sources=sources,
        hardware=metric_values.counted_hardware(frame),
    )
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
