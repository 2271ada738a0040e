"""The live view of a running profile: the `perf stat -I` intervals perf has written so far.

The runner has perf write its CSV to `runs/<run>/perf.csv` as it counts (one block of lines per
interval), so the live view reads what each file gained since the last look, up to its last
complete line, and parses that with perf/stat_csv like any other perf output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from autoprof.perf import stat_csv
from autoprof.run import outdir
from autoprof.util.status import CountState


@dataclass
class Tail:
    """Points read so far from one profile folder's perf.csv files, oldest first."""

    out: Path
    offsets: dict[Path, int] = field(default_factory=dict)
    points: list[dict] = field(default_factory=list)

    def poll(self) -> int:
        """Read what perf added since the last poll; returns how many points came."""
        before = len(self.points)
        runs = self.out / outdir.RUNS
        if not runs.is_dir():
            return 0
        for path in sorted(runs.glob(f"run*/{outdir.PERF_OUTPUT}")):
            self.points += _new_points(path, self.offsets)
        return len(self.points) - before


def _new_points(path: Path, offsets: dict[Path, int]) -> list[dict]:
    start = offsets.get(path, 0)
    try:
        with path.open("rb") as fh:
            fh.seek(start)
            data = fh.read()
    except OSError:
        return []
    end = data.rfind(b"\n") + 1
    if end == 0:
        return []
    offsets[path] = start + end
    lines = [ln for ln in data[:end].splitlines(keepends=True) if ln.strip() and ln[:1] != b"#"]
    if not lines:
        return []
    try:
        parsed = stat_csv.parse(b"".join(lines), sep=",", interval=True).frame
    except stat_csv.StatCsvError:
        return []
    parsed = parsed[parsed["STATE"] == CountState.COUNTED]
    sums = parsed.groupby(["TIME", "EVENT"], sort=True)["VALUE"].sum()
    run = path.parent.name
    return [
        {"run": run, "event": str(event), "t": float(time), "v": float(value)}
        for (time, event), value in sums.items()
        if math.isfinite(value)
    ]
