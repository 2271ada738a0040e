"""Metric co-scheduling on every Intel platform with metrics: how many metrics keep all their
events in one run, in a plan as long as the lower bound and with `--consistent`.

    python bench/metrics.py [--events-dir DIR] [--smt off] [PLATFORM ...]

Per platform: metrics, events measured, bound, runs, co-scheduled metrics (all / TMA tree) for
the plain plan (bound runs) and the --consistent one (its runs too), time, unresolved metrics.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from autoprof.catalog import host, intel
from autoprof.metrics import catalog as metric_catalog
from autoprof.metrics.plan import plan_metrics

DEFAULT_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "events" / "intel"


def _share(planned) -> tuple[int, int, int, int]:
    placed = [n.metric for n in planned.needs if not n.missing and n.measured]
    runs = planned.schedule.runs
    tma = [m for m in placed if m.tma]
    return (
        sum(runs.get(m.name) is not None for m in placed),
        len(placed),
        sum(runs.get(m.name) is not None for m in tma),
        len(tma),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events-dir", type=Path, default=None)
    parser.add_argument("--smt", choices=["on", "off"], default="on")
    parser.add_argument("platforms", nargs="*")
    args = parser.parse_args()
    events_dir = args.events_dir or host.events_dir() or DEFAULT_DIR
    if not (events_dir / "mapfile.csv").is_file():
        print(f"skipped: no Intel perfmon data at {events_dir} (pass --events-dir)")
        return 0
    options = intel.IntelOptions(smt=args.smt == "on", experimental=True, deprecated=True)
    platforms = args.platforms or sorted(
        {r.platform for r in intel.read_mapfile(events_dir) if r.kind == "metrics"}
    )
    print(f"smt={args.smt}; co-scheduled = metrics whose events are all counted in one run")
    head = (
        f"{'platform':<9} {'metrics':>7} {'events':>6} {'bound':>5} {'runs':>4} "
        f"{'co-sched':>9} {'TMA':>8} | {'consistent runs':>15} {'co-sched':>9} {'TMA':>8} "
        f"{'s':>5} {'unresolved':>10}"
    )
    print(head)
    for platform in platforms:
        metrics = list(metric_catalog.load(events_dir, platform).metrics.values())
        catalog = intel.load(events_dir, platform, options)
        retire = metric_catalog.retire_latencies(events_dir, platform)
        started = time.perf_counter()
        plain = plan_metrics(catalog, metrics, options.smt, False, retire)
        consistent = plan_metrics(catalog, metrics, options.smt, True, retire)
        elapsed = time.perf_counter() - started
        a, n, t, tn = _share(plain)
        ca, _, ct, _ = _share(consistent)
        print(
            f"{platform:<9} {len(metrics):>7} {len(plain.catalog.events):>6} "
            f"{plain.plan.lower_bound:>5} {len(plain.plan):>4} {f'{a}/{n}':>9} {f'{t}/{tn}':>8} | "
            f"{len(consistent.plan):>15} {f'{ca}/{n}':>9} {f'{ct}/{tn}':>8} "
            f"{elapsed:>5.1f} {len(plain.unmeasurable):>10}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
