"""Edge colouring of bipartite multigraphs with as many colours as the largest degree.

König's theorem says a bipartite multigraph of maximum degree D can be edge-coloured with D
colours; this is the constructive proof (alternating-path recolouring). The packer uses it
with counters on one side and shared registers on the other: an event is an edge, a colour is
a run, and two events that share a counter or a register (the conflict graph's edges) never
share a run.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def edge_colouring(edges: Sequence[tuple[Hashable, Hashable]], colours: int) -> list[int]:
    """A colour in ``range(colours)`` per edge, no two edges at a node alike.

    Left and right nodes must be distinct objects (e.g. tagged tuples). Raises ValueError
    when a node has more edges than `colours` (no colouring exists then).
    """
    at: dict[Hashable, dict[int, int]] = {}  # node -> colour -> edge index
    colour_of = [-1] * len(edges)

    def free(node: Hashable) -> int:
        used = at.setdefault(node, {})
        for c in range(colours):
            if c not in used:
                return c
        raise ValueError(f"node {node!r} has more than {colours} edges")

    def set_colour(i: int, c: int) -> None:
        colour_of[i] = c
        u, v = edges[i]
        at[u][c] = i
        at[v][c] = i

    for i, (u, v) in enumerate(edges):
        a, b = free(u), free(v)
        if a in at[v]:
            # Swap a and b along the a/b path from v; bipartiteness keeps u off that path.
            path, node, c = [], v, a
            while c in at[node]:
                j = at[node][c]
                path.append(j)
                x, y = edges[j]
                node = y if x == node else x
                c = b if c == a else a
            for j in path:
                x, y = edges[j]
                old = colour_of[j]
                del at[x][old], at[y][old]
            for j in path:
                set_colour(j, b if colour_of[j] == a else a)
        set_colour(i, a)
    return colour_of
