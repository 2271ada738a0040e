"""Arm's top-down methodology for its Neoverse cores: which metrics and metric groups refine each
level-1 metric, so the top-down tree of an Arm core goes below perf's TopdownL1.

perf's JSON gives the levels (TopdownL1) but not this structure; Arm publishes it in the
"decision_tree" of each core's Telemetry Specification (Arm's telemetry-solution repository,
data/pmu/cpu/neoverse/neoverse-<core>.json, Apache-2.0; read, not copied): its root nodes, and
per metric the `next_items` that refine it, metrics (Topdown_Frontend / Topdown_Backend on N3
and V3) or metric groups (Branch_Effectiveness, ...). Neoverse N1 has no slot events, so perf
defines no TopdownL1 for it: its stage 1 is Cycle_Accounting (frontend_stalled_cycles,
backend_stalled_cycles). The table is keyed by perf's model folder; an item the model's perf
metrics lack is skipped.
"""

from __future__ import annotations

from dataclasses import replace

from autoprof.metrics.model import MetricSet

_FRONTEND_GROUPS = (
    "Branch_Effectiveness",
    "ITLB_Effectiveness",
    "L1I_Cache_Effectiveness",
    "L2_Cache_Effectiveness",
    "LL_Cache_Effectiveness",
)
_BACKEND_GROUPS = (
    "DTLB_Effectiveness",
    "L1D_Cache_Effectiveness",
    "L2_Cache_Effectiveness",
    "LL_Cache_Effectiveness",
    "Operation_Mix",
)
# neoverse-n1.json: root nodes frontend_stalled_cycles, backend_stalled_cycles
_N1: dict[str, tuple[str, ...]] = {
    "frontend_stalled_cycles": _FRONTEND_GROUPS,
    "backend_stalled_cycles": _BACKEND_GROUPS,
}
# neoverse-n2.json, neoverse-v1.json (V2 shares perf's neoverse-n2-v2 folder)
_N2: dict[str, tuple[str, ...]] = {
    "frontend_bound": _FRONTEND_GROUPS,
    "backend_bound": _BACKEND_GROUPS,
    "bad_speculation": ("Branch_Effectiveness",),
    "retiring": ("Operation_Mix",),
}
# neoverse-n3.json (perf's V3 metrics are N3's, formulas but for the slot count)
_N3: dict[str, tuple[str, ...]] = {
    "frontend_bound": ("frontend_core_bound", "frontend_mem_bound"),
    "backend_bound": ("backend_core_bound", "backend_mem_bound"),
    "retiring": ("Operation_Mix",),
    "bad_speculation": ("Branch_Effectiveness",),
    "frontend_core_bound": ("frontend_core_flush_bound", "frontend_core_flow_bound"),
    "frontend_mem_bound": ("frontend_mem_cache_bound", "frontend_mem_tlb_bound"),
    "frontend_core_flush_bound": ("Branch_Effectiveness",),
    "frontend_core_flow_bound": ("Branch_Effectiveness",),
    "frontend_mem_cache_bound": ("frontend_cache_l1i_bound", "frontend_cache_l2i_bound"),
    "frontend_mem_tlb_bound": ("ITLB_Effectiveness",),
    "frontend_cache_l1i_bound": ("L1I_Cache_Effectiveness",),
    "frontend_cache_l2i_bound": ("L2_Cache_Effectiveness", "LL_Cache_Effectiveness"),
    "backend_core_bound": ("backend_core_rename_bound",),
    "backend_mem_bound": (
        "backend_mem_cache_bound",
        "backend_mem_tlb_bound",
        "backend_mem_store_bound",
    ),
    "backend_mem_cache_bound": ("backend_cache_l1d_bound", "backend_cache_l2d_bound"),
    "backend_mem_tlb_bound": ("DTLB_Effectiveness",),
    "backend_cache_l1d_bound": ("L1D_Cache_Effectiveness",),
    "backend_cache_l2d_bound": ("L2_Cache_Effectiveness", "LL_Cache_Effectiveness"),
}
NO_SLOTS = (
    "perf defines no TopdownL1 for this core, which has no STALL_SLOT events; these are the "
    "level 1 of Arm's top-down methodology for it, cycles stalled in the frontend and backend"
)
TREES: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    "arm/neoverse-n1": (tuple(_N1), _N1),
    "arm/neoverse-v1": (tuple(_N2), _N2),
    "arm/neoverse-n2-v2": (tuple(_N2), _N2),
    "arm/neoverse-n3": (("frontend_bound", "backend_bound", "retiring", "bad_speculation"), _N3),
    "arm/neoverse-v3": (("frontend_bound", "backend_bound", "retiring", "bad_speculation"), _N3),
}


def apply(found: MetricSet) -> None:
    """Make the methodology's metrics tree nodes (roots at level 1, each refining metric one
    level below its parent) and record the groups that refine each node (`refines`)."""
    roots, edges = TREES.get(found.model, ((), {}))
    metrics = found.metrics
    levels = {name: 1 for name in roots if name in metrics}
    pending = list(levels)
    while pending:
        parent = pending.pop(0)
        for item in edges.get(parent, ()):
            if item in metrics and item not in levels:
                levels[item] = levels[parent] + 1
                metrics[item] = replace(
                    metrics[item], level=levels[item], parent=parent, topdown=True
                )
                pending.append(item)
            elif item not in metrics and any(item in m.groups for m in metrics.values()):
                found.refines.setdefault(parent, []).append(item)
    for name in roots:
        if name in metrics:
            metrics[name] = replace(metrics[name], level=1, parent=None, topdown=True)
    named = [n for n in roots if n in metrics]
    if named and not any("TopdownL1" in m.groups for m in metrics.values()):
        found.stand_ins["topdownl1"] = (named, NO_SLOTS)
