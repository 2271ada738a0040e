"""An event perf refused to open in a run, with perf's own reason (`RunRecord.unsupported`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# keys older run.json files named the refused event by, the first one present wins
_NAME_KEYS = ("name", "event", "label", "spec")


@dataclass(frozen=True)
class Unsupported:
    """`name` is the catalog name of the event (or the text perf was given, when the event was
    not planned under a catalog name); `reason` is perf's message."""

    name: str = ""
    pmu: str = ""
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Unsupported:
        """Known keys only, missing ones defaulted; the event's name under any key it was ever
        written with."""
        name = next((str(data[k]) for k in _NAME_KEYS if data.get(k)), "")
        return cls(name, str(data.get("pmu") or ""), str(data.get("reason") or ""))
