"""The top-down tree as toplev shows it: the level-1 nodes, and the children of every node that
crossed its threshold; the bottleneck path (from level 1, the largest node that crossed, then
its largest child that crossed, ...) highlighted.

perf's AMD and Arm metrics have no thresholds: their tree is shown whole, and the bottleneck
path follows the largest node at each level. A node may be refined by metric groups (Arm's
methodology: frontend_bound by Branch_Effectiveness, ...): each is a `group` node under it,
holding the group's metrics.

Pure: `tree_rows` takes one `Node` per metric and returns the rows shown, in order;
`tree_lines` writes them as rich-markup lines (the web page draws the same rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    name: str
    parent: str | None
    value: float
    unit: str = ""
    crossed: bool | None = None
    scope: str = ""
    flag: str = ""
    label: str = ""  # what is shown (default: the name)
    group: bool = False  # a metric group refining its parent, not a metric

    @property
    def shown(self) -> str:
        return self.label or self.name


@dataclass(frozen=True)
class Row:
    node: Node
    depth: int
    on_path: bool
    last_on_path: bool

    @property
    def value(self) -> str:
        return "" if self.node.group else value_text(self.node.value, self.node.unit)


def _candidates(nodes: list[Node], parent: str | None, thresholds: bool) -> list[Node]:
    return [
        n
        for n in nodes
        if n.parent == parent
        and not n.group
        and not math.isnan(n.value)
        and (n.crossed if thresholds else True)
    ]


def bottleneck_path(nodes: list[Node], thresholds: bool = True) -> list[str]:
    """Names from level 1 down: at each level the crossed child with the largest value (the
    largest child, without thresholds)."""
    path: list[str] = []
    parent: str | None = None
    while True:
        found = _candidates(nodes, parent, thresholds)
        if not found:
            return path
        parent = max(found, key=lambda n: n.value).name
        path.append(parent)


def value_text(value: float, unit: str) -> str:
    if math.isnan(value):
        return "n/a"
    if unit.lower().startswith(("percent", "%")):
        rest = unit.removeprefix("%").removeprefix("percent").strip()
        return f"{value:.1f}%" + (f" {rest}" if rest else "")
    return f"{value:.4g} {unit}" if unit else f"{value:.4g}"


def tree_rows(nodes: list[Node], show_all: bool = False, thresholds: bool = True) -> list[Row]:
    """The rows shown, depth first: with `thresholds`, the children of crossed nodes only
    (every node with `show_all`); without, every node."""
    path = bottleneck_path(nodes, thresholds)
    rows: list[Row] = []

    def walk(parent: str | None, depth: int) -> None:
        for node in [n for n in nodes if n.parent == parent]:
            on = node.name in path
            rows.append(Row(node, depth, on, on and node.name == path[-1]))
            if node.crossed or show_all or not thresholds:
                walk(node.name, depth + 1)

    walk(None, 0)
    return rows


def tree_lines(nodes: list[Node], show_all: bool = False, thresholds: bool = True) -> list[str]:
    """One line per shown node, indented by level; crossed nodes marked, the bottleneck path
    in bold with ``<==`` on its last node, out-of-range values flagged."""
    lines: list[str] = []
    for row in tree_rows(nodes, show_all, thresholds):
        node = row.node
        mark = " [yellow]above threshold[/]" if node.crossed else ""
        scope = f" [dim]{node.scope}[/]" if node.scope == "cross-run" else ""
        flag = f" [red]! {node.flag}[/]" if node.flag else ""
        name = f"[{node.shown}]" if node.group else node.shown
        text = f"{'  ' * row.depth}{name:<{max(40 - 2 * row.depth, 10)}} {row.value:>10}"
        if node.group:  # dim, and its "[" a literal one for rich
            text = "[dim]" + text.replace("[", "\\[") + "[/]"
        if row.on_path:
            text = f"[bold]{text}[/]" + (" [bold red]<==[/]" if row.last_on_path else "")
        lines.append(text + mark + scope + flag)
    return lines
