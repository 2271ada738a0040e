"""memory.png / memory.svg: heap over time stacked by the top allocation sites, and the peak
snapshot's allocation tree as a table beneath (what massif-visualizer shows, in one picture),
as bytes that the one writer (`autoprof.util.renderer.write`) puts in files."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# a memory.profile.MemoryProfile, which imports this module to draw itself
MemoryProfile = Any

MIB = 1024 * 1024
TIME_LABELS = {"i": "instructions executed", "ms": "milliseconds", "B": "bytes allocated and freed"}
TABLE_ROWS = 12


def _short(location: str, width: int = 90) -> str:
    return location if len(location) <= width else location[: width - 1] + "…"


def _indent(row: dict) -> str:
    return "  " * row["depth"] + _short(row["location"])


def plot_files(
    profile: MemoryProfile, extensions: tuple[str, ...] = (".png", ".svg")
) -> list[tuple[str, bytes]]:
    """(memory.EXT, its bytes) for each of `extensions`, the picture drawn once: what
    `util.renderer.write` puts in the profile's folder."""
    import matplotlib.pyplot as plt

    fig = _figure(profile)
    try:
        files = []
        for extension in extensions:
            buffer = io.BytesIO()
            fig.savefig(buffer, format=extension.lstrip("."), dpi=110)
            files.append((f"memory{extension}", buffer.getvalue()))
        return files
    finally:
        plt.close(fig)


def _figure(profile: MemoryProfile) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    detailed = [s for s in profile.snapshots if s["detailed"]]
    rows = profile.peak_tree[:TABLE_ROWS]
    table_height = 0.3 + 0.22 * (len(rows) + 1)
    fig, (ax, table_ax) = plt.subplots(
        2,
        1,
        figsize=(11, 5.5 + table_height),
        gridspec_kw={"height_ratios": [5.5, table_height]},
        layout="constrained",
    )
    if detailed:
        times = [s["time"] for s in detailed]
        stacks = [[s["sites"][site] / MIB for s in detailed] for site in profile.sites]
        ax.stackplot(times, stacks, labels=[_short(s, 60) for s in profile.sites], alpha=0.85)
    ax.plot(
        [s["time"] for s in profile.snapshots],
        [s["heap"] / MIB for s in profile.snapshots],
        color="black",
        linewidth=1,
        label="heap (every snapshot)",
    )
    peak = profile.peak_bytes / MIB
    ax.annotate(
        f"peak {peak:.1f} MiB",
        xy=(profile.peak_time, peak),
        xytext=(0, 8),
        textcoords="offset points",
        ha="center",
        fontweight="bold",
    )
    ax.set_xlabel(TIME_LABELS.get(profile.time_unit, profile.time_unit))
    ax.set_ylabel("heap (MiB)")
    ax.set_ylim(0, max(peak * 1.15, 0.001))
    ax.set_title(f"heap of {' '.join(profile.command)[:80]} ({profile.status})")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    table_ax.axis("off")
    if rows:
        cells = [[f"{r['bytes'] / MIB:,.2f}", f"{r['percent']:.1f}", _indent(r)] for r in rows]
        table = table_ax.table(
            cellText=cells,
            colLabels=["MiB", "% of peak", "peak snapshot's allocation tree"],
            colWidths=[0.1, 0.1, 0.8],
            cellLoc="left",
            loc="upper center",
        )
        table.auto_set_font_size(False)
        table.set_fontsize(8)
        for cell in table.get_celld().values():
            cell.PAD = 0.01  # of the column's width: the default 0.1 pushes text far right
    return fig
