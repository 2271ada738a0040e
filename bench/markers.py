"""What a region marker costs (#37): under autoprof (the relay's round trip per marker, wall and
CPU of the whole process tree) and without it (markers off: a load and a branch).

    python bench/markers.py [--passes 20000] [--rounds 3]

The region example (autoprof/examples/regions.c: 4 markers per pass, `hot` and `inner`) runs
with 1 and PASSES passes (a profile whose program passes no marker stops); the difference over
4 x (PASSES - 1) markers is one marker's cost. Under
autoprof: `autoprof profile --region all -e task-clock`, the run's own elapsed time (run.json:
perf and the command, not autoprof's start-up); without it: the program alone. Best of ROUNDS.
Instructions per marker are measured exactly in the PMU lane (`make test-pmu`; REFERENCE).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoprof.examples import build_regions

AUTOPROF = [sys.executable, "-m", "autoprof"]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def profiled(binary: Path, passes: int, out: Path) -> tuple[float, float]:
    """(the run's wall seconds, CPU seconds of autoprof's whole tree) of one profile."""
    before = children_cpu()
    argv = [*AUTOPROF, "profile", "--region", "all", "-e", "task-clock", "-o", str(out)]
    subprocess.run([*argv, "--", str(binary), "0", "0", "0", str(passes)], check=True,
                   capture_output=True)  # fmt: skip
    record = json.loads(next(out.glob("runs/run*/run.json")).read_text())
    return float(record["elapsed_s"]), children_cpu() - before


def alone(binary: Path, passes: int) -> tuple[float, float]:
    before, started = children_cpu(), time.monotonic()
    subprocess.run([str(binary), "0", "0", "0", str(passes)], check=True)
    return time.monotonic() - started, children_cpu() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        binary = build_regions(Path(tmp))
        rows = []
        for name, measure in (
            ("under autoprof (relay round trip)", lambda n, k: profiled(binary, n, Path(tmp) / k)),
            ("without autoprof (markers off)", lambda n, k: alone(binary, n)),
        ):
            best = []
            for passes in (1, args.passes):
                figures = [measure(passes, f"o{passes}-{r}") for r in range(args.rounds)]
                best.append((min(f[0] for f in figures), min(f[1] for f in figures)))
            markers = 4 * (args.passes - 1)
            wall = (best[1][0] - best[0][0]) / markers * 1e6
            cpu = (best[1][1] - best[0][1]) / markers * 1e6
            rows.append((name, wall, cpu))
    print(f"| a marker ({4 * (args.passes - 1)} more, best of {args.rounds}) | wall us | CPU us |")
    print("|---|---|---|")
    for name, wall, cpu in rows:
        print(f"| {name} | {wall:.2f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
