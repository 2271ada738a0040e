"""speedscope's file format (https://www.speedscope.app/file-format-schema.json).

One "sampled" profile per process (or thread, with --pid/--tid), whose samples are the distinct
folded stacks weighted by their folded weight; frames are shared between profiles. The unit is
nanoseconds for the clock events (their period is in ns), "none" otherwise.
"""

from __future__ import annotations

import json

from autoprof import __version__
from autoprof.flame.fold import Folded
from autoprof.flame.renderer import FlameRenderer, clean

SCHEMA = "https://www.speedscope.app/file-format-schema.json"
NANOSECOND_EVENTS = {"cpu-clock", "task-clock"}


class SpeedscopeRenderer(FlameRenderer):
    def __init__(self, name: str = "autoprof") -> None:
        self.name = name

    def render(self, folded: Folded) -> str:
        index: dict[str, int] = {}
        frames: list[dict[str, str]] = []
        by_root: dict[str, tuple[list[list[int]], list[int]]] = {}
        for stack in sorted(folded.stacks):
            ids = []
            for name in stack[1:]:
                i = index.get(name)
                if i is None:
                    i = index[name] = len(frames)
                    frames.append({"name": clean(name)})
                ids.append(i)
            samples, weights = by_root.setdefault(stack[0] if stack else "", ([], []))
            samples.append(ids)
            weights.append(folded.stacks[stack])
        event = (folded.event or "").split(":")[0]
        unit = "nanoseconds" if event in NANOSECOND_EVENTS else "none"
        profiles = [
            {
                "type": "sampled",
                "name": clean(root),
                "unit": unit,
                "startValue": 0,
                "endValue": sum(weights),
                "samples": samples,
                "weights": weights,
            }
            for root, (samples, weights) in sorted(by_root.items())
        ]
        document = {
            "$schema": SCHEMA,
            "shared": {"frames": frames},
            "profiles": profiles,
            "name": self.name,
            "activeProfileIndex": 0,
            "exporter": f"autoprof {__version__}",
        }
        return json.dumps(document, separators=(",", ":")) + "\n"
