"""perf's own metrics on every AMD Zen and Arm64 model autoprof ships data for: how many perf
defines, how many evaluate (on synthetic counts of every event they need) and how many are
listed with a reason, for a profile of a command and a system-wide one (-a); and the runs of
their co-scheduled plans.

    python bench/perf_metrics.py [MODEL ...]      # zen4, neoverse-n1, ... (default: all)

Columns: entries (MetricName entries, duplicates included), metrics (distinct names read),
evaluate/listed for a task profile and for -a (the first reason of the listed ones), runs
(lower bound) of the plan of all metrics, and with --consistent, co-scheduled metrics.
"""

from __future__ import annotations

import sys
import zlib
from collections import Counter

from autoprof.analysis import data
from autoprof.analysis import metrics as analysis
from autoprof.catalog import amd, arm, embedded, vendor
from autoprof.catalog.model import ReadOptions
from autoprof.metrics import perfjson
from autoprof.metrics.plan import known_constants, metric_needs, plan_metrics, unavailable_pmus
from autoprof.testing.synthetic_out import counts_frame


def models() -> list[tuple[str, str, str]]:
    """(vendor, model folder, a CPU id picking it) for every model of the shipped data."""
    found: dict[str, tuple[str, str, str]] = {}
    for kind, reader in ((vendor.AMD, amd), (vendor.ARM64, arm)):
        directory = embedded.directory(kind)
        assert directory is not None
        for cpu in reader.models(directory).values():
            folder = perfjson.model_of(directory, kind, cpu).folder
            found.setdefault(folder, (kind, folder, cpu))
    return list(found.values())


def rate(event) -> float:
    return 1_000 + zlib.crc32(event.name.encode()) % 1_000_000


def evaluate(metrics, catalog, known, system_wide: bool) -> tuple[int, Counter]:
    """(metrics with a value, reason kinds of the listed ones)."""
    unavailable = unavailable_pmus(catalog, system_wide)
    needs = metric_needs(metrics, catalog, known, unavailable=unavailable)
    events = {e.key: e for n in needs if not n.missing for e in n.measured}
    frame = data.prepare(counts_frame([list(events.values())], rate))
    values = analysis.compute(frame, metrics, known)
    listed = {n.metric.name: n.missing[0] for n in needs if n.missing}
    reasons: Counter = Counter()
    done = 0
    for name, value in values.items():
        reason = listed.get(name) or (value.missing[0] if value.missing else None)
        if reason is None:
            done += 1
        else:
            reasons[reason.split(": ", 1)[-1].split(" (")[0]] += 1
    return done, reasons


def main() -> int:
    wanted = {w.lower() for w in sys.argv[1:]}
    print(
        f"{'model':<22} {'entries':>7} {'metrics':>7} | {'task: eval':>10} {'listed':>6} | "
        f"{'-a: eval':>8} {'listed':>6} | {'runs (bound)':>12} {'consistent':>10} "
        f"{'co-sched':>8}  reasons"
    )
    for kind, folder, cpu in models():
        if wanted and not wanted & {folder.lower(), folder.rsplit("/", 1)[-1].lower()}:
            continue
        directory = embedded.directory(kind)
        assert directory is not None
        found = perfjson.load(directory, kind, cpu)
        raw = perfjson.entries(directory / folder, perfjson.standard_metrics(directory))
        defined = sum(bool(e.name) and "MetricExpr" in e.raw for e in raw)
        metrics = list(found.metrics.values())
        if not metrics:
            continue
        reader = amd if kind == vendor.AMD else arm
        catalog = reader.load(directory, cpu, ReadOptions(deprecated=True, experimental=True))
        known = known_constants(catalog.cpu, True, metrics)
        task, task_reasons = evaluate(metrics, catalog, known, system_wide=False)
        wide, wide_reasons = evaluate(metrics, catalog, known, system_wide=True)
        plain = plan_metrics(catalog, metrics, True)
        consistent = plan_metrics(catalog, metrics, True, consistent=True)
        placed = [n for n in consistent.needs if not n.missing and n.measured]
        together = sum(consistent.schedule.runs.get(n.metric.name) is not None for n in placed)
        reasons = "; ".join(f"{n} {r}" for r, n in (task_reasons + wide_reasons).most_common())
        print(
            f"{folder:<22} {defined:>7} {len(metrics) + len(found.unreadable):>7} | "
            f"{task:>10} {len(metrics) - task:>6} | {wide:>8} {len(metrics) - wide:>6} | "
            f"{f'{len(plain.plan)} ({plain.plan.lower_bound})':>12} {len(consistent.plan):>10} "
            f"{f'{together}/{len(placed)}':>8}  {reasons}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
