"""Aggregate speed: a large out/ made of real perf output, against pandas' own read_csv.

Builds, in a temp dir, a profile of RUNS run folders whose perf.csv each repeat the intervals
of a real `perf stat -x, -I 100 -a -A` recording (tests/data/perf61/interval_percpu.csv: five
events on two CPUs) with advancing timestamps, >= 2 million CSV lines in all. Then times, on the
same files: pandas.read_csv alone, stat_csv.parse, aggregate.aggregate (parse + event mapping +
report) and results.write_csv. Prints lines per second.

    python bench/aggregate.py [--runs 50] [--intervals 4000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd

from autoprof import aggregate, outdir, results
from autoprof.perf import stat_csv

SOURCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "perf61" / "interval_percpu.csv"


def interval_block() -> list[tuple[str, str]]:
    """The lines of the recording's first interval, split into (timestamp, rest)."""
    lines = [x for x in SOURCE.read_text().splitlines() if x.strip() and not x.startswith("#")]
    first = lines[0].split(",", 1)[0]
    return [tuple(x.split(",", 1)) for x in lines if x.split(",", 1)[0] == first]


def build(out: Path, runs: int, intervals: int) -> int:
    block = interval_block()
    events = sorted({rest.split(",")[3] for _, rest in block})
    body = []
    for i in range(intervals):
        stamp = f"{0.1 * (i + 1) + 0.000181730:16.9f}"
        body.extend(f"{stamp},{rest}\n" for _, rest in block)
    text = "# started on Sun Nov 22 04:24:29 2026\n\n" + "".join(body)
    refs = [outdir.EventRef(name=e, pmu="software", spec=e, label=e) for e in events]
    plan = {"cpu": "bench", "lower_bound": runs, "runs": [{"events": []}] * runs, "excluded": []}
    machine = outdir.MachineFacts("bench", "bench", "bench", "6.1", "6.1", False, False, 2)
    manifest = outdir.Manifest("bench", "0.1.0", "", ["bench"], machine, plan, {"repeat": 1})
    outdir.write_manifest(out, manifest)
    for run in range(1, runs + 1):
        folder = outdir.run_dir(out, run, 1)
        folder.mkdir(parents=True)
        (folder / outdir.PERF_OUTPUT).write_text(text)
        argv = ["perf", "stat", "-x,", "-I", "100", "-a", "-A", "--", "sleep", "1"]
        record = outdir.RunRecord(run, 1, refs, argv, status=outdir.RUN_OK)
        outdir.write_run_record(folder, record)
    return runs * len(body)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--intervals", type=int, default=4000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        lines = build(out, args.runs, args.intervals)
        files = [f / outdir.PERF_OUTPUT for f in outdir.run_folders(out)]
        size = sum(f.stat().st_size for f in files)
        result: dict[str, aggregate.Aggregation] = {}
        rows = [
            (
                "pandas.read_csv (baseline)",
                timed(lambda: [pd.read_csv(f, header=None, comment="#") for f in files]),
            ),
            ("stat_csv.parse", timed(lambda: [stat_csv.parse(f.read_bytes()) for f in files])),
            (
                "aggregate.aggregate",
                timed(lambda: result.setdefault("r", aggregate.aggregate(out))),
            ),
            (
                "results.write_csv",
                timed(lambda: results.write_csv(result["r"].frame, out / "results.csv")),
            ),
        ]
        print(f"{lines:,} perf CSV lines in {len(files)} run folders ({size / 2**20:.0f} MiB)")
        print(f"{'step':<28} {'seconds':>8} {'lines/s':>12} {'vs pandas':>10}")
        base = rows[0][1]
        for name, seconds in rows:
            print(f"{name:<28} {seconds:>8.2f} {lines / seconds:>12,.0f} {base / seconds:>10.2f}")
        assert result["r"].report["rows"] == lines


if __name__ == "__main__":
    main()
