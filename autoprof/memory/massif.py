"""valgrind massif's output file (`massif.out.PID`), parsed: a header, then snapshots.

    desc: --threshold=1.0          cmd: ./prog          time_unit: i | ms | B
    #-----------
    snapshot=N
    #-----------
    time=T  mem_heap_B=..  mem_heap_extra_B=..  mem_stacks_B=..   (one per line)
    heap_tree=empty | detailed | peak
    n2: 41943040 (heap allocation functions) malloc/new/new[], --alloc-fns, etc.
     n1: 31457280 0x1091C6: alloc_big (heap.c:25)
      n0: 31457280 0x10922C: main (heap.c:36)
     n0: 0 in 1 place, below massif's threshold (1.00%)

A tree line is ``nK: BYTES LOCATION`` indented by its depth; K children follow it. The root's
children are the allocation sites (the code that called malloc); their children, its callers.
A file cut short (a crashed or killed valgrind) keeps its whole snapshots and says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from autoprof.errors import AutoprofError

_TREE_LINE = re.compile(r"^( *)n(\d+): (\d+) ?(.*)$")
_ADDRESS = re.compile(r"^0x[0-9A-Fa-f]+: ")
BELOW_THRESHOLD = "below massif's threshold"


@dataclass
class HeapNode:
    bytes: int
    location: str  # "0x1091C6: alloc_big (heap.c:25)", or massif's own words
    children: list[HeapNode] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The location without its code address: the same site in every snapshot."""
        return _ADDRESS.sub("", self.location)


@dataclass
class Snapshot:
    index: int
    time: int
    heap: int  # bytes asked for by the program (mem_heap_B)
    extra: int  # allocator overhead: headers and alignment (mem_heap_extra_B)
    stacks: int  # mem_stacks_B (0 unless --stacks=yes)
    kind: str  # "empty", "detailed" or "peak"
    tree: HeapNode | None = None

    @property
    def total(self) -> int:
        return self.heap + self.extra + self.stacks


@dataclass
class Massif:
    desc: str
    cmd: str
    time_unit: str
    snapshots: list[Snapshot]
    truncated: bool = False  # the file ended inside a snapshot (which was dropped)

    @property
    def peak(self) -> Snapshot:
        """The snapshot massif marked as the peak, else the largest one seen (a file cut short
        before massif wrote its peak)."""
        marked = [s for s in self.snapshots if s.kind == "peak"]
        return marked[-1] if marked else max(self.snapshots, key=lambda s: s.heap)

    @property
    def detailed(self) -> list[Snapshot]:
        return [s for s in self.snapshots if s.tree is not None]


def _parse_tree(lines: list[str], start: int) -> tuple[HeapNode, int]:
    """The tree whose root is lines[start]; returns it and the index after its last line."""
    match = _TREE_LINE.match(lines[start])
    if match is None:
        raise ValueError(f"not a heap tree line: {lines[start]!r}")
    nchildren, node = int(match.group(2)), HeapNode(int(match.group(3)), match.group(4))
    pos = start + 1
    for _ in range(nchildren):
        child, pos = _parse_tree(lines, pos)
        node.children.append(child)
    return node, pos


def parse(text: Iterable[str] | str) -> Massif:
    """Parse massif's output; AutoprofError when it is not massif output at all."""
    lines = text.splitlines() if isinstance(text, str) else [line.rstrip("\n") for line in text]
    header: dict[str, str] = {}
    pos = 0
    while pos < len(lines) and not lines[pos].startswith("#"):
        key, _, value = lines[pos].partition(": ")
        header[key] = value
        pos += 1
    if "cmd" not in header or "time_unit" not in header:
        raise AutoprofError("not valgrind massif output (no cmd: / time_unit: header)")
    out = Massif(header.get("desc", ""), header["cmd"], header["time_unit"], [])
    blocks = "\n".join(lines[pos:]).split("#-----------\nsnapshot=")[1:]
    for block in blocks:
        snapshot = _parse_snapshot(block.split("\n"))
        if snapshot is None:
            out.truncated = True
            break
        out.snapshots.append(snapshot)
    if not out.snapshots:
        raise AutoprofError("massif output holds no complete snapshot")
    return out


def _parse_snapshot(lines: list[str]) -> Snapshot | None:
    """One snapshot block (from after `snapshot=`); None when it was cut short."""
    fields: dict[str, str] = {}
    tree_at = None
    for i, line in enumerate(lines[1:], start=1):
        key, eq, value = line.partition("=")
        if eq and key in ("time", "mem_heap_B", "mem_heap_extra_B", "mem_stacks_B", "heap_tree"):
            fields[key] = value
            if key == "heap_tree":
                tree_at = i + 1
                break
    needed = ("time", "mem_heap_B", "mem_heap_extra_B", "mem_stacks_B", "heap_tree")
    if tree_at is None or any(k not in fields for k in needed):
        return None
    kind = fields["heap_tree"]
    tree = None
    if kind in ("detailed", "peak"):
        body = [line for line in lines[tree_at:] if line and not line.startswith("#")]
        try:
            tree, end = _parse_tree(body, 0)
        except (ValueError, IndexError):
            return None
        if end != len(body):
            return None
    return Snapshot(
        int(lines[0]),
        int(fields["time"]),
        int(fields["mem_heap_B"]),
        int(fields["mem_heap_extra_B"]),
        int(fields["mem_stacks_B"]),
        kind,
        tree,
    )


def top_sites(massif: Massif, count: int = 8) -> list[str]:
    """The allocation sites that held the most memory at any detailed snapshot, largest
    first (massif's "below threshold" entries are no site)."""
    largest: dict[str, int] = {}
    for snapshot in massif.detailed:
        for site in snapshot.tree.children if snapshot.tree else []:
            if BELOW_THRESHOLD in site.location:
                continue
            largest[site.label] = max(largest.get(site.label, 0), site.bytes)
    ranked = sorted(largest, key=lambda label: (-largest[label], label))
    return ranked[:count]


def site_bytes(snapshot: Snapshot) -> dict[str, int]:
    """Bytes per allocation site at a detailed snapshot (sites below the threshold together)."""
    out: dict[str, int] = {}
    for site in snapshot.tree.children if snapshot.tree else []:
        out[site.label] = out.get(site.label, 0) + site.bytes
    return out


def flatten(node: HeapNode, depth: int = 0) -> list[tuple[int, HeapNode]]:
    """(depth, node) for the tree, parents first: the peak table's rows."""
    rows, todo = [], [(depth, node)]
    while todo:
        d, n = todo.pop()
        rows.append((d, n))
        todo.extend((d + 1, c) for c in reversed(n.children))
    return rows
