"""Folded stacks as a tree of frames: what the flame graph draws and the diff compares."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from autoprof.flame.fold import Folded


@dataclass(slots=True)
class Node:
    name: str
    value: int = 0  # weight of every stack through this frame (inclusive)
    samples: int = 0  # samples behind `value` (0 when unknown)
    before: int = 0  # a diff's baseline weight for the same path (0 when absent or no diff)
    children: dict[str, Node] = field(default_factory=dict)

    def child(self, name: str) -> Node:
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = Node(name)
        return node

    def walk(self) -> Iterator[tuple[int, int, Node]]:
        """(depth, start, node) for every node, parents first, siblings by name; `start` is
        the node's offset in weight units from the left edge. Iterative: stacks can be deep."""
        todo = [(0, 0, self)]
        while todo:
            depth, start, node = todo.pop()
            yield depth, start, node
            placed, offset = [], start
            for name in sorted(node.children):
                child = node.children[name]
                placed.append((depth + 1, offset, child))
                offset += child.value
            todo.extend(reversed(placed))


ROOT = "all"


def build_tree(folded: Folded) -> Node:
    """The tree of `folded`, rooted at a frame named ``all`` that spans every stack."""
    root = Node(ROOT)
    samples = folded.samples
    for stack, weight in folded.stacks.items():
        count = samples.get(stack, 0)
        node = root
        node.value += weight
        node.samples += count
        for name in stack:
            node = node.child(name)
            node.value += weight
            node.samples += count
    return root


def add_baseline(tree: Node, before: Folded) -> Node:
    """Set `before` on the nodes of `tree` (a diff's AFTER) from BEFORE's stacks, path by path.
    Paths that exist only in BEFORE are not drawn (widths come from AFTER)."""
    tree.before = before.total
    for stack, weight in before.stacks.items():
        node = tree
        for name in stack:
            child = node.children.get(name)
            if child is None:
                break
            node = child
            node.before += weight
    return tree
