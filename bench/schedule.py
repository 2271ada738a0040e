"""Schedule quality and speed on every Intel platform: events, lower bound, runs, time.

    python bench/schedule.py [--events-dir DIR] [--smt off] [--reserve 1] [--all]

`--all` includes experimental, deprecated and offcore-matrix events. Prints one row per
platform and a summary; the target is runs == bound everywhere and < 1 s for the slowest.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from autoprof.catalog import host, intel
from autoprof.schedule import schedule

DEFAULT_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "events" / "intel"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events-dir", type=Path, default=None)
    parser.add_argument("--smt", choices=["on", "off"], default="on")
    parser.add_argument("--reserve", type=int, default=0)
    parser.add_argument("--all", action="store_true")
    args = parser.parse_args()
    events_dir = args.events_dir or host.events_dir() or DEFAULT_DIR
    if not (events_dir / "mapfile.csv").is_file():
        print(f"skipped: no Intel perfmon data at {events_dir} (pass --events-dir)")
        return 0
    options = intel.IntelOptions(
        smt=args.smt == "on",
        reserve=args.reserve,
        experimental=args.all,
        deprecated=args.all,
        offcore_matrix=args.all,
    )
    print(f"options: smt={args.smt} reserve={args.reserve} all={args.all}")
    print(f"{'platform':<10} {'cpu id':<22} {'events':>7} {'bound':>6} {'runs':>6} {'ms':>8}")
    worst, misses = 0.0, 0
    for platform, cpu in intel.platform_cpu_ids(events_dir).items():
        catalog = intel.load(events_dir, cpu, options)
        started = time.perf_counter()
        plan = schedule(catalog)
        elapsed = time.perf_counter() - started
        worst = max(worst, elapsed)
        misses += len(plan) != plan.lower_bound
        print(
            f"{platform:<10} {cpu:<22} {len(catalog.events):>7} {plan.lower_bound:>6} "
            f"{len(plan):>6} {elapsed * 1000:>8.1f}"
        )
    print(f"platforms above the bound: {misses}; slowest schedule: {worst * 1000:.0f} ms")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
