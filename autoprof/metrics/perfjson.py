"""perf's own metrics for AMD Zen and Arm64 cores: the ``MetricName``/``MetricExpr`` entries of
the pmu-events JSON autoprof ships (autoprof/events/amd, arm64), as `Metric` records.

Read as perf reads them (tools/perf/pmu-events/jevents.py, tools/perf/util/metricgroup.c):
- a model's metrics are the metric entries of its folder's files (AMD: ``pipeline.json``,
  ``recommended.json``; Arm: ``metrics.json``); the top-level files of arm64 are no model's,
  but an entry ``{"ArchStdEvent": "frontend_bound"}`` takes that standard metric of
  ``sbsa.json``, its own fields winning (jevents.py `JsonEvent`: only the fields it lacks are
  copied);
- ``MetricExpr`` is perf's expression language (`perfexpr`); an identifier that names a
  metric of the same model (case-insensitive) is that metric, whose raw value (before its
  ScaleUnit) is used: it is inlined here, so its events join the referring metric's;
  anything else is an event;
- ``ScaleUnit`` is a factor and a unit (``100%``, ``1e3per_1k_instr``, ``1percent of
  slots``): the value shown is the expression times the factor;
- ``MetricGroup`` is ``;``-separated; ``DefaultMetricgroupName`` is the heading of perf
  stat's default output.

The top-down tree: ``PipelineL<n>`` / ``TopdownL<n>`` groups give a metric its level, and a
group ``<parent>_group`` (AMD's PipelineL2) its parent. Arm's cores refine level 1 in Arm's
own methodology (`arm_topdown`). A model's first entry of a name wins (zen4's
recommended.json lists umc_cas_cmd_read_ratio and umc_cas_cmd_rate twice, alike).
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoprof.catalog import amd, arm, pmuevents, vendor
from autoprof.errors import AutoprofError
from autoprof.metrics import arm_topdown, constants, perfexpr
from autoprof.metrics.formula import Formula, FormulaError
from autoprof.metrics.model import Metric, MetricSet

_SCALE = re.compile(r"^\s*([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*(.*)$")
_LEVEL = re.compile(r"^(?:Pipeline|Topdown)L([0-9]+)$")
DURATION = "duration_time"  # perf's tool event, in seconds in a metric (stat-shadow.c)


def scale_unit(text: str | None) -> tuple[float, str]:
    """ScaleUnit's factor and unit (``100%`` -> (100.0, "%")); no ScaleUnit is (1, "")."""
    if not text:
        return 1.0, ""
    match = _SCALE.match(str(text))
    if not match:
        raise AutoprofError(f"malformed ScaleUnit {text!r}")
    return float(match.group(1)), match.group(2).strip()


@dataclass(frozen=True)
class Entry:
    """One metric entry of a model, standard fields filled in."""

    raw: dict[str, Any]
    source: str

    @property
    def name(self) -> str:
        return str(self.raw.get("MetricName") or "")


def standard_metrics(events_dir: Path) -> dict[str, dict[str, Any]]:
    """The architecture's standard metrics of arm64's top-level files, by lower-case name."""
    found: dict[str, dict[str, Any]] = {}
    for name in arm.STANDARD_FILES:
        path = events_dir / name
        if path.is_file():
            for raw in pmuevents.read_json(path):
                if isinstance(raw.get("MetricName"), str):
                    found.setdefault(raw["MetricName"].lower(), raw)
    return found


def entries(folder: Path, standard: dict[str, dict[str, Any]]) -> list[Entry]:
    """The metric entries of a model folder (ArchStdEvent ones filled from `standard`)."""
    found = []
    for path, raws in pmuevents.json_files(folder):
        for raw in raws:
            named = raw.get("ArchStdEvent")
            if named is not None and str(named).lower() in standard:
                base = standard[str(named).lower()]
                raw = base | {k: v for k, v in raw.items() if k != "ArchStdEvent" and v}
                found.append(Entry(raw, f"{path.name} + sbsa.json"))
            elif pmuevents.is_metric(raw):
                found.append(Entry(raw, path.name))
    return found


def _groups(raw: dict[str, Any]) -> tuple[str, ...]:
    return tuple(g.strip() for g in str(raw.get("MetricGroup") or "").split(";") if g.strip())


def _level(groups: Iterable[str]) -> int | None:
    levels = [int(m.group(1)) for g in groups if (m := _LEVEL.match(g))]
    return min(levels) if levels else None


def architected_events(events_dir: Path, folder: str) -> dict[str, str]:
    """The architecture's common events (arm64's common-and-microarch.json) that the model's
    files do not list, as perf counts them when a metric names one: the kernel's sysfs alias
    on the core PMU (drivers/perf/arm_pmuv3.c offers each common event the core implements,
    PMCEID0/1), i.e. ``armv8_pmuv3_0/event=0x11,name=CPU_CYCLES/``. HiSilicon's hip08 files
    list only its own events, and its metrics read CPU_CYCLES, INST_RETIRED, ..."""
    listed = set()
    for _, raws in pmuevents.json_files(events_dir / folder):
        for raw in raws:
            for key in ("EventName", "ArchStdEvent"):
                if isinstance(raw.get(key), str):
                    listed.add(raw[key].lower())
    found = {}
    for name, raw in arm.standard_events(events_dir).items():
        if name not in listed and raw.get("EventCode") and not raw.get("Unit"):
            code = int(str(raw["EventCode"]), 0)
            found[name] = f"{arm.DEFAULT_CORE_PMU}/event={code:#x},name={raw['EventName']}/"
    return found


class _Inliner(ast.NodeTransformer):
    """Replaces the aliases of metric references by those metrics' trees, renaming the
    referenced metric's own aliases into the referring one's."""

    def __init__(self, trees: dict[str, ast.expr]):
        self.trees = trees

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return copy.deepcopy(self.trees[node.id]) if node.id in self.trees else node


def _renamed(metric: Metric, prefix: str) -> tuple[ast.expr, dict[str, str], dict[str, str]]:
    """`metric`'s tree with every alias prefixed (and its events and constants so renamed)."""
    tree = copy.deepcopy(metric.formula.tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in metric.formula.names:
            node.id = prefix + node.id
    events = {prefix + a: t for a, t in metric.events.items()}
    consts = {prefix + a: c for a, c in metric.constants.items()}
    return tree, events, consts


class _Builder:
    """Builds a model's metrics, each after the metrics it names; `architected` maps an event
    the model's files do not list to the text perf would count for it."""

    def __init__(self, model: list[Entry], where: str, architected: dict[str, str]):
        self.where = where
        self.architected = architected
        self.entries: dict[str, Entry] = {}
        for entry in model:
            if entry.name and "MetricExpr" in entry.raw:
                self.entries.setdefault(entry.name.lower(), entry)
        self.built: dict[str, Metric] = {}
        self.failed: dict[str, str] = {}

    def build(self, key: str, visiting: tuple[str, ...] = ()) -> Metric | None:
        if key in self.built or key in self.failed:
            return self.built.get(key)
        entry = self.entries[key]
        try:
            metric = self._metric(entry, (*visiting, key))
        except (FormulaError, AutoprofError) as err:
            self.failed[key] = str(err)
            return None
        self.built[key] = metric
        return metric

    def _metric(self, entry: Entry, visiting: tuple[str, ...]) -> Metric:
        raw = entry.raw
        where = f"{self.where}/{entry.source}: {entry.name}"
        formula, symbols = perfexpr.parse(str(raw["MetricExpr"]))
        events: dict[str, str] = {}
        consts = {a: lit for a, lit in symbols.literals.items()}
        consts.update((a, f"{perfexpr.CPUID_TEST}({x})") for a, x in symbols.cpuid.items())
        trees: dict[str, ast.expr] = {}
        refs: list[str] = []
        for alias, name in symbols.names.items():
            key = name.lower()
            if key in visiting:
                raise AutoprofError(f"{where}: refers to itself through {name}")
            if key in self.entries:
                other = self.build(key, visiting)
                if other is None:
                    raise AutoprofError(f"{where}: the metric {name} it reads cannot be read")
                trees[alias], more_events, more_consts = _renamed(other, f"{alias}_")
                events.update(more_events)
                consts.update(more_consts)
                refs.append(other.name)
            elif name == DURATION:
                consts[alias] = constants.DURATION_S
            else:
                events[alias] = self.architected.get(name.lower(), name)
        events.update((a, f"{perfexpr.SOURCE_COUNT}({n})") for a, n in symbols.counted.items())
        body = _Inliner(trees).visit(formula.tree.body) if trees else formula.tree.body
        tree = ast.fix_missing_locations(ast.Expression(body=body))
        names = frozenset(events) | frozenset(consts)
        groups = _groups(raw)
        scale, unit = scale_unit(raw.get("ScaleUnit"))
        level = _level(groups)
        parents = [g.removesuffix("_group") for g in groups if g.endswith("_group")]
        return Metric(
            name=str(raw["MetricName"]),
            formula=Formula(formula.text, tree, names),
            events=events,
            constants=consts,
            level=level or 1,
            parent=parents[0] if parents and level else None,
            groups=groups,
            unit=unit,
            scale=scale,
            description=str(raw.get("BriefDescription") or raw.get("PublicDescription") or ""),
            topdown=level is not None and (level == 1 or bool(parents)),
            default_group=str(raw.get("DefaultMetricgroupName") or ""),
            refs=tuple(refs),
            source=entry.source,
        )


@dataclass(frozen=True)
class Model:
    """A model's folder in perf's data, and the CPU id its metrics are read for."""

    vendor: str
    folder: str
    cpu: str


def model_of(events_dir: Path, kind: str, cpu: str) -> Model:
    """The model folder serving `cpu` (a CPU id or a model name), as the catalog readers pick it."""
    if kind == vendor.AMD:
        cpu = amd.models(events_dir).get(cpu.lower(), cpu)
        return Model(kind, amd.model_for(events_dir, cpu), cpu)
    if kind == vendor.ARM64:
        cpu = arm.models(events_dir).get(cpu.lower(), cpu)
        return Model(kind, arm.model_for(events_dir, cpu)[0], cpu)
    raise AutoprofError(f"perf's metrics are read for AMD and Arm64 data, not {kind}")


def load(events_dir: Path, kind: str, cpu: str) -> MetricSet:
    """Every metric perf defines for `cpu`: those that parse as `metrics`, the others in
    `unreadable` with the reason (a metric reading one of those inherits it)."""
    events_dir = Path(events_dir)
    model = model_of(events_dir, kind, cpu)
    standard = standard_metrics(events_dir) if kind == vendor.ARM64 else {}
    architected = architected_events(events_dir, model.folder) if kind == vendor.ARM64 else {}
    builder = _Builder(entries(events_dir / model.folder, standard), model.folder, architected)
    for key in builder.entries:
        builder.build(key)
    found = MetricSet(model.cpu, model=model.folder, vendor=kind)
    for key, entry in builder.entries.items():
        if key in builder.built:
            found.metrics[entry.name] = builder.built[key]
        else:
            found.unreadable[entry.name] = builder.failed[key]
    if kind == vendor.ARM64:
        arm_topdown.apply(found)
    found.sources.append(str(events_dir / model.folder))
    return found
