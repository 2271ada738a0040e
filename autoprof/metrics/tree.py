"""The TMA tree as toplev shows it: the level-1 nodes, and the children of every node that
crossed its threshold; the bottleneck path (from level 1, the largest node that crossed, then
its largest child that crossed, ...) highlighted.

Pure: `tree_lines` takes one `Node` per metric and returns rich-markup lines.
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


def bottleneck_path(nodes: list[Node]) -> list[str]:
    """Names from level 1 down: at each level the crossed child with the largest value."""
    path: list[str] = []
    parent: str | None = None
    while True:
        crossed = [n for n in nodes if n.parent == parent and n.crossed and not math.isnan(n.value)]
        if not crossed:
            return path
        parent = max(crossed, key=lambda n: n.value).name
        path.append(parent)


def _value(node: Node) -> str:
    if math.isnan(node.value):
        return "n/a"
    unit = "%" if node.unit.lower() == "percent" else f" {node.unit}" if node.unit else ""
    return f"{node.value:.1f}{unit}" if unit == "%" else f"{node.value:.4g}{unit}"


def tree_lines(nodes: list[Node], show_all: bool = False) -> list[str]:
    """One line per shown node, indented by level; crossed nodes marked, the bottleneck path
    in bold with ``<==`` on its last node, out-of-range values flagged."""
    path = bottleneck_path(nodes)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for node in [n for n in nodes if n.parent == parent]:
            mark = " [yellow]above threshold[/]" if node.crossed else ""
            scope = f" [dim]{node.scope}[/]" if node.scope == "cross-run" else ""
            flag = f" [red]! {node.flag}[/]" if node.flag else ""
            text = f"{'  ' * depth}{node.name:<{max(40 - 2 * depth, 10)}} {_value(node):>10}"
            if node.name in path:
                text = f"[bold]{text}[/]" + (" [bold red]<==[/]" if node.name == path[-1] else "")
            lines.append(text + mark + scope + flag)
            if node.crossed or show_all:
                walk(node.name, depth + 1)

    walk(None, 0)
    return lines
