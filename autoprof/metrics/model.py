"""The metric records: a `Metric` (a formula over events and constants, its place in a top-down
tree) and a `MetricSet` (the metrics of one CPU, by name). Nothing here reads a file: the
readers (`catalog` for Intel's perfmon JSON and autoprof's YAML, `perfjson` for perf's AMD and
Arm data, `arm_topdown`) build these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autoprof.errors import AutoprofError
from autoprof.metrics.formula import Formula


@dataclass(frozen=True)
class Metric:
    """One metric: its formula reads `events` (alias -> event text, modifiers included) and
    `constants` (alias -> constant name); its threshold reads `threshold_metrics` (alias ->
    metric name). Its value is the formula times `scale` (perf's ScaleUnit), in `unit`.
    `topdown` makes it a node of the top-down tree of perf's data (AMD's PipelineL1/L2, Arm's
    TopdownL1 and the metrics refining it); `refs` are the metrics its formula reads (inlined)."""

    name: str
    formula: Formula
    events: dict[str, str] = field(default_factory=dict)
    constants: dict[str, str] = field(default_factory=dict)
    level: int = 1
    parent: str | None = None
    groups: tuple[str, ...] = ()
    unit: str = ""
    description: str = ""
    threshold: Formula | None = None
    threshold_metrics: dict[str, str] = field(default_factory=dict)
    category: str = ""
    pmu: str = "cpu"
    source: str = ""
    scale: float = 1.0
    topdown: bool = False
    default_group: str = ""
    refs: tuple[str, ...] = ()

    @property
    def tma(self) -> bool:
        """A node of the top-down tree: Intel's TMA levels (not its Info or Bottleneck
        metrics), or a `topdown` metric of perf's AMD and Arm data."""
        if self.topdown:
            return True
        return self.category == "TMA" and not self.name.startswith(("Info_", "Bottleneck_"))

    @property
    def percent(self) -> bool:
        return self.unit.lower().startswith(("percent", "%"))


@dataclass
class MetricSet:
    """The metrics of one CPU (or one file), by name, in file order. For perf's AMD and Arm
    data: the `model` folder and `vendor`, the metrics perf defines that autoprof cannot read
    (`unreadable`: name -> reason), and the metric groups refining a tree node (`refines`)."""

    cpu: str
    metrics: dict[str, Metric] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    model: str = ""
    vendor: str = ""
    unreadable: dict[str, str] = field(default_factory=dict)
    refines: dict[str, list[str]] = field(default_factory=dict)
    # a group name the data lacks -> (the metrics standing for it, why): Neoverse N1's level 1
    stand_ins: dict[str, tuple[list[str], str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what `select` chose in place of a word

    @property
    def title(self) -> str:
        """The CPU as people name it: the model folder where there is one."""
        return self.model or self.cpu

    def select(self, wanted: list[str]) -> list[Metric]:
        """Metrics by name, by group (``TmaL1``) or ``all``; an unknown word is an error."""
        chosen: dict[str, Metric] = {}
        for word in wanted:
            if word.lower() == "all":
                found = list(self.metrics.values())
            else:
                found = [m for m in self.metrics.values() if m.name.lower() == word.lower()]
                found = found or [
                    m for m in self.metrics.values() if word.lower() in map(str.lower, m.groups)
                ]
                if not found and word.lower() in self.stand_ins:
                    names, why = self.stand_ins[word.lower()]
                    found = [self.metrics[n] for n in names]
                    self.notes.append(f"{word} for {self.title}: {', '.join(names)} ({why})")
            if not found:
                raise AutoprofError(
                    f"no metric or metric group {word!r} for {self.title} "
                    "(see `autoprof metrics list`)"
                )
            chosen.update((m.name, m) for m in found)
        return list(chosen.values())

    def children(self, name: str | None) -> list[Metric]:
        return [m for m in self.metrics.values() if m.parent == name and m.tma]
