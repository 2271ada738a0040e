"""`autoprof analyze compare` for the web page: two runs' results frames, compared, as
JSON-ready data. It needs the whole frames (`store.export.frame`); those of the last few runs
asked for stay in memory (a stored run never changes). A run's own stats and correlation come
from its stored summary (`store.summary`), never from its frame.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import pandas as pd

from autoprof.analysis import compare as compare_mod
from autoprof.analysis import data
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


def compare_runs(frame_a: pd.DataFrame, frame_b: pd.DataFrame, test: str) -> list[dict[str, Any]]:
    """`analyze compare`'s table, largest changes first."""
    return records(compare_mod.compare(frame_a, frame_b, test=test))
