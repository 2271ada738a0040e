"""Differential flame graphs: what changed between two profiles of the same program.

Two recordings never have the same number of samples, so frames are compared by their share of
each profile: ``delta = after.value / after.total - before.value / before.total`` (inclusive
weight, same path from the root). Positive means the frame grew. The graph takes its widths from
AFTER; a path that exists only in BEFORE has no width there and is listed, not drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoprof.flame.fold import Folded, perl_order
from autoprof.flame.tree import Node, add_baseline, build_tree


@dataclass(frozen=True)
class Change:
    path: tuple[str, ...]  # frames from the process to this frame
    before: float  # share of BEFORE, 0..1
    after: float  # share of AFTER, 0..1

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def name(self) -> str:
        return self.path[-1]


def diff_tree(before: Folded, after: Folded) -> Node:
    """AFTER's tree with BEFORE's weights attached (`Node.before`)."""
    return add_baseline(build_tree(after), before)


def share_delta(node: Node, after_total: int, before_total: int) -> float:
    after = node.value / after_total if after_total else 0.0
    before = node.before / before_total if before_total else 0.0
    return after - before


def changes(tree: Node) -> list[Change]:
    """Every frame of a diff tree (not the root), most grown first; among equal growth the
    deepest frame first, since it is the one that did the work."""
    after_total, before_total = tree.value, tree.before
    found: list[tuple[float, int, Change]] = []
    path: list[str] = []
    for depth, _, node in tree.walk():
        if depth == 0:
            continue
        del path[depth - 1 :]
        path.append(node.name)
        change = Change(
            tuple(path),
            node.before / before_total if before_total else 0.0,
            node.value / after_total if after_total else 0.0,
        )
        found.append((round(change.delta, 12), depth, change))
    found.sort(key=lambda item: (-item[0], -item[1]))
    return [change for _, _, change in found]


def diff_folded_lines(before: Folded, after: Folded) -> list[str]:
    """FlameGraph's two-column folded format (``stack before after``), which its
    ``flamegraph.pl`` and ``difffolded.pl`` read; sorted as stackcollapse-perf.pl sorts."""
    keys = sorted(
        {";".join(s): s for s in (*before.stacks, *after.stacks)}.items(),
        key=lambda item: perl_order(item[0]),
    )
    return [
        f"{text} {before.stacks.get(stack, 0)} {after.stacks.get(stack, 0)}\n"
        for text, stack in keys
    ]


def change_lines(before: Folded, after: Folded, top: int = 5) -> list[str]:
    """The `top` frames that grew most, then the `top` that shrank most, one line each, as
    `flamegraph --diff` says them beside its graph."""
    found = changes(diff_tree(before, after))
    grown = [c for c in found if c.delta > 0][:top]
    shrunk = [c for c in reversed(found) if c.delta < 0][:top]
    return [
        f"{label:>6} {100 * c.delta:+7.2f} pts  {c.name}"
        f"  ({100 * c.before:.2f}% -> {100 * c.after:.2f}%)"
        for label, items in (("grew", grown), ("shrank", shrunk))
        for c in items
    ]
