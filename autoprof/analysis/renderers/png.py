"""Figures of the analyses' results with Matplotlib: the correlation heatmap, the events'
timelines and the largest changes of a comparison; PNG or SVG by the file's extension.

The only module of the analyses that imports Matplotlib: the numbers never pay for it.
"""

from __future__ import annotations

import io
from functools import singledispatch
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure
from numpy.typing import ArrayLike

from autoprof.analysis import correlation, data
from autoprof.analysis.compare import Comparison
from autoprof.analysis.correlation import Correlation
from autoprof.analysis.event_detail import EventDetail
from autoprof.errors import AutoprofError
from autoprof.util.renderer import Renderer

if TYPE_CHECKING:
    from autoprof.analysis.tables import Result

DPI = 100
WIDTH = 10.0  # inches, every figure
HEATMAP_SIZE = (WIDTH, 8.5)
HEATMAP_LABEL_CHARS = 32  # longer names are cut in the middle, or they squeeze the heatmap
ANNOTATE_LIMIT = 12  # up to this many events, each cell shows its coefficient
PANEL_HEIGHT = 2.0  # timelines: one panel per event
SHARED_HEIGHT = 5.0
TIMELINE_MARGIN = 1.0  # title and x axis label
TIMELINE_LABEL_CHARS = 28
BAR_HEIGHT = 0.35  # changes: one bar per event
CHANGES_MARGIN = 1.5
CHANGES_LABEL_CHARS = 40


class PngRenderer(Renderer["Result"]):
    """The result's figure as a PNG file's bytes (`SvgRenderer`: as SVG)."""

    extensions = (".png",)

    def render(self, result: Result) -> bytes:
        return figure_bytes(figure(result), self.extensions[0])


class SvgRenderer(PngRenderer):
    extensions = (".svg",)


def figure_bytes(drawn: Figure, extension: str) -> bytes:
    """`drawn` saved in the format of `extension` (.png, .svg)."""
    buffer = io.BytesIO()
    drawn.savefig(buffer, format=extension.lstrip("."))
    return buffer.getvalue()


def figure_files(result: Result) -> list[tuple[str, bytes]]:
    """(name, bytes) of each of the result's default figure files (`Result.FIGURES`), the
    figure drawn once."""
    drawn = figure(result)
    return [(name, figure_bytes(drawn, Path(name).suffix)) for name in result.FIGURES]


@singledispatch
def figure(result: object) -> Figure:
    """The figure of an analysis result."""
    raise AutoprofError(f"no figure for {type(result).__name__}")


def timeline_size(events: int, shared: bool) -> tuple[float, float]:
    """Timelines: a fixed width, and a fixed height per panel."""
    return (WIDTH, TIMELINE_MARGIN + (SHARED_HEIGHT if shared else PANEL_HEIGHT * events))


def changes_size(bars: int) -> tuple[float, float]:
    """Changes: a fixed width and a fixed height per bar."""
    return (WIDTH, CHANGES_MARGIN + BAR_HEIGHT * bars)


@figure.register
def heatmap(result: Correlation) -> Figure:
    """The clustered matrix as a heatmap: diverging colours fixed at -1..1 with a colour bar,
    event names on the axes when there are few enough to read, positions otherwise."""
    fig = Figure(figsize=HEATMAP_SIZE, dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    colours = LinearSegmentedColormap.from_list("correlation", correlation.COLOURS)
    cmap = colours.with_extremes(bad="0.85")  # no common intervals: grey
    image = ax.imshow(result.matrix.to_numpy(), cmap=cmap, vmin=-1.0, vmax=1.0)
    n = len(result.matrix)
    if result.labelled:
        size = max(4.0, min(9.0, 480 / max(n, 1) / 1.6))
        labels = [data.short_label(str(e), HEATMAP_LABEL_CHARS) for e in result.matrix.index]
        ax.set_xticks(range(n), labels, rotation=90, fontsize=size)
        ax.set_yticks(range(n), labels, fontsize=size)
        if n <= ANNOTATE_LIMIT:
            for (i, j), r in np.ndenumerate(result.matrix.to_numpy()):
                shown = f"{r:.2f}".replace("-0.00", "0.00")
                text, dark = ("–", False) if np.isnan(r) else (shown, abs(r) > 0.6)
                colour = "white" if dark else "black"
                ax.text(j, i, text, ha="center", va="center", fontsize=8, color=colour)
    else:
        step = max(1, int(np.ceil(n / 25)))
        ticks = list(range(0, n, step))
        ax.set_xticks(ticks, [str(t + 1) for t in ticks], fontsize=7)
        ax.set_yticks(ticks, [str(t + 1) for t in ticks], fontsize=7)
        ax.set_xlabel("event position (see correlation_index.csv)")
        ax.set_ylabel("event position")
    fig.colorbar(image, ax=ax, shrink=0.8, label=f"{result.method.capitalize()} correlation")
    per = f", per {result.anchor}" if result.anchor else ""
    grey = f"; grey: < {result.min_overlap} common intervals" if len(result.short_pairs) else ""
    ax.set_title(
        f"{n} events over {result.intervals} intervals{per}, clustered"
        f" ({len(result.excluded)} left out{grey})",
        fontsize=10,
    )
    return fig


@figure.register
def timeline(result: EventDetail) -> Figure:
    """One panel per event (or all on shared axes); one line per (run, repeat)."""
    lines, events, units = result.lines, result.events, result.units
    shared, rate, log = result.shared, result.rate, result.log
    fig = Figure(figsize=timeline_size(len(events), shared), dpi=DPI, layout="constrained")
    axes = (
        [fig.add_subplot()]
        if shared
        else fig.subplots(len(events), 1, sharex=True, squeeze=False)[:, 0]
    )
    colours = [f"C{i % 10}" for i in range(len(events))]
    for i, event in enumerate(events):
        ax = axes[0] if shared else axes[i]
        runs = lines[lines[data.EVENT] == event].groupby(["RUN", "REPEAT"], sort=True)
        for j, ((run, repeat), points) in enumerate(runs):
            several = runs.ngroups > 1
            label = event if shared and j == 0 else None
            if not shared and several:
                label = f"run {run}, repeat {repeat}"
            colour = colours[i] if shared or not several else f"C{j % 10}"
            ax.plot(points["TIME"], points["VALUE"], color=colour, lw=1.2, label=label)
        if not shared:
            ax.set_ylabel(_axis_label(event, units.get(event), rate), fontsize=8)
            if runs.ngroups > 1:
                ax.legend(fontsize=7, loc="upper right")
    for ax in axes:
        ax.grid(alpha=0.3)
        if log:
            ax.set_yscale("log")
    if shared:
        axes[0].set_ylabel("per second" if rate else "count per interval")
        axes[0].legend(fontsize=8)
    axes[-1].set_xlabel("time since the run started (s)")
    what = "rate" if rate else "count per interval, mean over CPUs/boxes"
    fig.suptitle(f"{len(events)} event(s) over time ({what})", fontsize=10)
    return fig


def _axis_label(event: str, unit: str | None, rate: bool) -> str:
    if rate:
        unit = f"{unit}/s" if unit else "per s"
    short = data.short_label(event, TIMELINE_LABEL_CHARS)
    return f"{short}\n({unit})" if unit else short


def _exp2(log: ArrayLike) -> np.ndarray:
    return np.exp2(log)


def _log2(ratio: ArrayLike) -> np.ndarray:
    """log2 for the ratio axis; matplotlib probes it with 0 too."""
    return np.log2(np.clip(ratio, 1e-12, None))


@figure.register
def changes(result: Comparison) -> Figure:
    """Horizontal bars of log2(B/A) for the `top` largest changes: coloured when significant,
    grey when not; events that appear or vanish drawn at the edge and marked."""
    table, test = result.table, result.test
    shown = table[table["log2_ratio"].notna()].head(result.top)
    fig = Figure(figsize=changes_size(len(shown)), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    finite = shown["log2_ratio"][np.isfinite(shown["log2_ratio"])]
    edge = max(1.0, float(finite.abs().max()) if len(finite) else 1.0) * 1.15
    values = shown["log2_ratio"].clip(-edge, edge).to_numpy()
    colours = [
        ("tab:red" if v > 0 else "tab:blue") if sig else "0.7"
        for v, sig in zip(values, shown["significant"], strict=True)
    ]
    y = np.arange(len(shown))[::-1]
    ax.barh(y, values, color=colours)
    for yi, value, (_, row) in zip(y, values, shown.iterrows(), strict=True):
        ratio = row["ratio"]
        text = "new" if np.isinf(ratio) else ("gone" if ratio == 0 else f"×{ratio:.3g}")
        if row["q_value"] == row["q_value"]:
            text += f"  q={row['q_value']:.2g}"
        elif isinstance(row["note"], str) and row["note"].startswith("exact"):
            text += "  exact"
        ax.text(
            value, yi, f" {text} ", va="center", ha="left" if value >= 0 else "right", fontsize=7
        )
    ax.set_yticks(y, [data.short_label(e, CHANGES_LABEL_CHARS) for e in shown["event"]], fontsize=8)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlim(-edge * 1.35, edge * 1.35)
    ax.set_xlabel("log2(B / A) of the total count")
    ratio_axis = ax.secondary_xaxis("top", functions=(_exp2, _log2))
    ratio_axis.set_xlabel("ratio B / A", fontsize=8)
    ratio_axis.tick_params(labelsize=8)
    name = "Welch's t-test" if test == "welch" else "Mann-Whitney U"
    ax.set_title(
        f"Largest changes B vs A ({name}, Benjamini-Hochberg q; colour = significant)",
        fontsize=10,
    )
    ax.grid(axis="x", alpha=0.3)
    return fig
