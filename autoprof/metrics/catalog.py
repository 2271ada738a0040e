"""The metric catalog: Intel's ``<PLATFORM>/metrics/*.json`` (listed in mapfile.csv as
``metrics``), perf's own metrics for AMD Zen and Arm64 cores (`autoprof.metrics.perfjson`) and
autoprof's own YAML metric files, as `Metric` records (`autoprof.metrics.model`).

A metric is a formula over named events and constants, e.g. CPI = ``a / b`` with
``a = CPU_CLK_UNHALTED.THREAD`` and ``b = INST_RETIRED.ANY``. TMA metrics form a tree
(`parent`) and have a threshold formula over other metrics (``a > 10 & b > 15``), which Intel
writes over their legacy names; here every threshold name maps to a metric name.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from autoprof.catalog import intel
from autoprof.errors import AutoprofError
from autoprof.metrics.formula import ONE_UNIT, Formula, parse
from autoprof.metrics.model import Metric, MetricSet


def _threshold(raw: dict, legacy: dict[str, str], where: str) -> tuple[Formula | None, dict]:
    """The threshold formula with every name mapped to a metric name. Intel names metrics by
    their legacy name, either through ThresholdMetrics aliases or (GRR, SRF) in the text."""
    block = raw.get("Threshold") or {}
    text = str(block.get("Formula") or "").strip()
    if not text:
        return None, {}
    refs: dict[str, str] = {}
    for item in block.get("ThresholdMetrics") or []:
        target = legacy.get(item.get("Value", ""))
        if target is None:
            raise AutoprofError(f"{where}: threshold names unknown metric {item.get('Value')!r}")
        refs[item["Alias"]] = target
    for k, old in enumerate(sorted((n for n in legacy if n in text), key=len, reverse=True)):
        alias = f"m{k}_"
        text = text.replace(old, alias)
        refs[alias] = legacy[old]
    return parse(text, f"threshold of {where}"), refs


def _aliases(items: list[dict], key: str, where: str) -> dict[str, str]:
    try:
        return {str(item["Alias"]): str(item[key]) for item in items or []}
    except (KeyError, TypeError):
        raise AutoprofError(f"{where}: malformed {key} list") from None


def load_json(path: Path, pmu: str = "cpu") -> list[Metric]:
    """The metrics of one Intel metrics file (every formula parsed, every name checked)."""
    try:
        data = json.loads(Path(path).read_text())
        raws = data["Metrics"] if isinstance(data, dict) else data
    except FileNotFoundError:
        raise AutoprofError(f"missing metrics file {path} (named by mapfile.csv)") from None
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as err:
        raise AutoprofError(f"malformed metrics file {path}: {err!r}") from None
    legacy = {str(r.get("LegacyName")): str(r.get("MetricName")) for r in raws if "LegacyName" in r}
    metrics = []
    for raw in raws:
        name = str(raw.get("MetricName") or "")
        where = f"{Path(path).name}: {name or '?'}"
        if not name or "Formula" not in raw:
            raise AutoprofError(f"{where}: a metric without MetricName or Formula")
        events = _aliases(raw.get("Events"), "Name", where)
        constants = _aliases(raw.get("Constants"), "Name", where)
        formula = parse(raw["Formula"], f"formula of {where}")
        for read in formula.names:  # ``a[0]``: event a counted on one unit (one socket's PCU)
            base = read.removesuffix(ONE_UNIT)
            if read != base and base in events:
                events[read] = f"{events[base]}:one_unit"
        # names no alias defines are global constants (DURATIONTIMEINSECONDS)
        constants.update((n, n) for n in formula.names - set(events) - set(constants))
        threshold, refs = _threshold(raw, legacy, where)
        metrics.append(
            Metric(
                name=name,
                formula=formula,
                events=events,
                constants=constants,
                level=int(raw.get("Level") or 1),
                parent=raw.get("ParentCategory") or None,
                groups=tuple(g for g in str(raw.get("MetricGroup") or "").split(";") if g),
                unit=str(raw.get("UnitOfMeasure") or ""),
                description=str(raw.get("BriefDescription") or ""),
                threshold=threshold,
                threshold_metrics=refs,
                category=str(raw.get("Category") or ""),
                pmu=pmu,
                source=Path(path).name,
            )
        )
    return metrics


def load_yaml(path: Path, pmu: str = "cpu") -> list[Metric]:
    """autoprof's own metric files: a list of ``{name, formula, events: {alias: EVENT}, unit,
    description, groups, threshold, constants}`` (see events/metrics/*.yaml)."""
    import yaml

    try:
        items = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise AutoprofError(f"cannot read metrics file {path}: {err}") from None
    if not isinstance(items, list):
        raise AutoprofError(f"{path}: expected a list of metrics")
    metrics = []
    for item in items:
        where = f"{Path(path).name}: {item.get('name', '?') if isinstance(item, dict) else '?'}"
        if not isinstance(item, dict) or "name" not in item or "formula" not in item:
            raise AutoprofError(f"{where}: each metric needs a name and a formula")
        formula = parse(item["formula"], f"formula of {where}")
        events = {str(k): str(v) for k, v in (item.get("events") or {}).items()}
        constants = {str(k): str(v) for k, v in (item.get("constants") or {}).items()}
        unknown = formula.names - set(events) - set(constants)
        if unknown:
            raise AutoprofError(f"{where}: formula names undefined {sorted(unknown)}")
        threshold = item.get("threshold")
        metrics.append(
            Metric(
                name=str(item["name"]),
                formula=formula,
                events=events,
                constants=constants,
                groups=tuple(item.get("groups") or ()),
                unit=str(item.get("unit") or ""),
                description=str(item.get("description") or ""),
                threshold=parse(threshold, f"threshold of {where}") if threshold else None,
                threshold_metrics={"value": str(item["name"])} if threshold else {},
                pmu=pmu,
                source=Path(path).name,
            )
        )
    return metrics


def metric_files(events_dir: Path, cpu: str) -> list[tuple[Path, str]]:
    """(metrics file, core PMU) for a CPU id or platform: core, or one per hybrid core type."""
    rows = [r for r in intel.rows_for_cpu(events_dir, cpu) if r.kind == "metrics"]
    return [
        (Path(events_dir) / r.path.lstrip("/"), intel.HYBRID_PMU.get(r.core_role, "cpu"))
        for r in rows
    ]


def retire_latencies(events_dir: Path, cpu: str) -> dict[str, float]:
    """Mean retire latency per event (``retire latency`` files, GNR): what ``EVENT:retire_latency``
    stands for when it is not sampled."""
    means: dict[str, float] = {}
    try:
        rows = intel.rows_for_cpu(events_dir, cpu)
    except intel.UnknownCpu:  # a CPU Intel's data does not know has no retire latencies in it
        return means
    for row in rows:
        if row.kind != "retire latency":
            continue
        try:
            data = json.loads((Path(events_dir) / row.path.lstrip("/")).read_text())
            means.update({k.upper(): float(v["MEAN"]) for k, v in data["Data"].items()})
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise AutoprofError(f"malformed retire latency file {row.path}: {err!r}") from None
    return means


def load(events_dir: Path | None, cpu: str, extra: Sequence[Path] = ()) -> MetricSet:
    """Every metric of a CPU from the perfmon directory, plus YAML metric files `extra`.
    Hybrid parts: a metric of a non-``cpu_core`` core type is named ``<pmu>/<name>``."""
    found = MetricSet(cpu)
    files = []
    if events_dir is not None:
        try:
            files = metric_files(events_dir, cpu)
        except AutoprofError:
            if not extra:  # with metric files of one's own, an unknown CPU has none of Intel's
                raise
    for path, pmu in files:
        for metric in load_json(path, pmu):
            key = metric.name if pmu in ("cpu", "cpu_core") else f"{pmu}/{metric.name}"
            found.metrics.setdefault(key, metric)
        found.sources.append(str(path))
    for path in extra:
        found.metrics.update((m.name, m) for m in load_yaml(Path(path)))
        found.sources.append(str(path))
    if not found.metrics:
        raise AutoprofError(
            f"no metrics for {cpu}: its perfmon data lists no metrics file "
            "(give --metrics-file FILE.yaml for your own)"
        )
    return found


def for_machine(events_dir: str | None, cpu: str | None, files: tuple[str, ...] = ()) -> MetricSet:
    """The metric set of --events-dir/--cpu (this machine by default) plus YAML `files`, each a
    path or the name of one shipped with autoprof (``software``): Intel's perfmon metrics, or
    perf's own for an AMD or Arm64 CPU (`perfjson`)."""
    from autoprof.catalog import host, machine, vendor
    from autoprof.catalog.yaml import BUILTIN_DIR
    from autoprof.metrics import perfjson

    named, cpu = bool(cpu), cpu or machine.cpu_id()
    paths = [_file_or_shipped(f, BUILTIN_DIR / "metrics") for f in files]
    chosen = host.choose_data(host.events_dir(events_dir) if events_dir else None, cpu, named)
    if chosen is None:
        if not paths:
            raise AutoprofError(
                f"no metrics for {cpu}: no event data knows this CPU (give --metrics-file "
                f"FILE.yaml, or --events-dir / ${host.ENV_EVENTS_DIR} with its data)"
            )
        return load(None, cpu, paths)
    directory, kind, name = chosen
    if kind == vendor.INTEL:
        return load(directory, name, paths)
    try:
        found = perfjson.load(directory, kind, name)
    except vendor.UnknownCpu:
        if not paths:
            raise
        found = MetricSet(cpu)
    if not found.metrics and not found.unreadable and not paths:
        raise AutoprofError(
            f"no metrics for {found.title}: perf's data defines none for it; the shipped "
            "software metrics count anywhere (--metrics-file software), or give "
            "--metrics-file FILE.yaml for your own"
        )
    for path in paths:
        found.metrics.update((m.name, m) for m in load_yaml(Path(path)))
        found.sources.append(str(path))
    return found


def _file_or_shipped(name: str, shipped_dir: Path) -> Path:
    """`name` as a path, or the shipped metrics file of that name when there is no such path."""
    shipped = shipped_dir / f"{name}.yaml"
    return shipped if not Path(name).exists() and shipped.is_file() else Path(name)
