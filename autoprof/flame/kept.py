"""A trace flame graph kept as a folder (`flamegraph --trace ... --save DIR`): `trace.json` says
what was traced and what the weights count, `stacks.folded` holds the stacks.

Kept inside a profile's folder, it travels like a sampled recording: `upload` stores its
per-function rows with the profile, `report DIR` prints them, and `flamegraph DIR` draws it
again without the trace, which may be gigabytes, or the binaries.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from autoprof import __version__
from autoprof.errors import AutoprofError
from autoprof.flame.fold import Folded, folded_lines
from autoprof.util.records import file_format, known_fields, write_json

TRACE_INFO = "trace.json"
STACKS = "stacks.folded"


@dataclass
class TraceInfo:
    """trace.json: the trace and binaries a kept flame graph came from."""

    FORMAT: ClassVar[int] = 1

    trace: str
    binaries: list[str]
    event: str  # what the weights count: "cycles" or "instructions"
    total: int
    inline: bool = False
    autoprof_version: str = __version__
    created: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"format": self.FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any], path: object = TRACE_INFO) -> TraceInfo:
        file_format(data, cls.FORMAT, path)
        return cls(**known_fields(cls, data))


def is_kept(folder: Path) -> bool:
    return (folder / TRACE_INFO).is_file() and (folder / STACKS).is_file()


def save(folder: Path, folded: Folded, trace: Path, binaries: list[Path], inline: bool) -> None:
    """Write `folded` (of `trace`) into `folder`, created if needed."""
    info = TraceInfo(
        trace=str(trace),
        binaries=[str(b) for b in binaries],
        event=folded.event or "instructions",
        total=folded.total,
        inline=inline,
        created=datetime.now(UTC).isoformat(),
    )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / STACKS).open("w", errors="surrogateescape") as out:
            out.writelines(folded_lines(folded))
        write_json(folder / TRACE_INFO, info.to_json())
    except OSError as err:
        raise AutoprofError(f"cannot save the trace flame graph in {folder}: {err}") from None


def read_info(folder: Path) -> TraceInfo:
    """The TraceInfo of a kept folder; one line when it is not readable."""
    path = folder / TRACE_INFO
    try:
        return TraceInfo.from_json(json.loads(path.read_text()), path)
    except (OSError, ValueError, TypeError) as err:
        raise AutoprofError(f"{path}: not a kept trace flame graph: {err}") from None
