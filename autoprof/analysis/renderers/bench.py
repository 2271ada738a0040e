"""`autoprof bench`'s tables: per command each metric's mean +- sd, min, max and outliers, then
each command against the first (a `RichRenderer`: the command only chooses where it goes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from autoprof.util.renderer import RichRenderer

if TYPE_CHECKING:
    from rich.console import Console

    from autoprof.analysis.bench import Ratio, Summary
    from autoprof.benchmark.measure import BenchResult


@dataclass
class BenchTables:
    """A benchmark with its statistics (`autoprof.analysis.bench`)."""

    result: BenchResult
    summaries: list[list[Summary]]  # per command
    ratios: list[list[Ratio]]  # per command after the first, against the first


def _scale(value: float, unit: str) -> tuple[float, str]:
    """Seconds in s, ms or µs, whichever reads best; other units as perf gave them."""
    if unit == "s" and value == value:
        for scale, name in ((1, "s"), (1e-3, "ms"), (1e-6, "µs")):
            if abs(value) >= scale or scale == 1e-6:
                return scale, name
    return 1.0, unit


def _number(value: float, unit: str, reference: float | None = None) -> str:
    """`value` in `unit`, scaled as `reference` (default itself) is."""
    if value != value:
        return "-"
    scale, name = _scale(value if reference is None else reference, unit)
    return f"{value / scale:.4g} {name}".rstrip()


def _mean_sd(mean: float, sd: float, unit: str) -> str:
    """`mean ± sd unit`, both in the mean's scale."""
    scale, name = _scale(mean, unit)
    sd_text = "-" if sd != sd else f"{sd / scale:.4g}"
    return f"{mean / scale:.4g} ± {sd_text} {name}".rstrip()


class BenchRenderer(RichRenderer[BenchTables]):
    def draw(self, data: BenchTables, console: Console) -> None:
        from rich.table import Table

        result = data.result
        for command, rows in zip(result.commands, data.summaries, strict=True):
            table = Table(title=" ".join(command.command), title_justify="left")
            for name in ("metric", "mean ± sd", "min", "max", "outliers"):
                table.add_column(name, justify="left" if name == "metric" else "right")
            for s in rows:
                unit = result.units.get(s.metric, "")
                table.add_row(
                    s.metric,
                    _mean_sd(s.mean, s.sd, unit),
                    _number(s.min, unit),
                    _number(s.max, unit),
                    ", ".join(map(str, s.outliers)) or "-",
                )
            console.print(table)
        for command, against in zip(result.commands[1:], data.ratios, strict=True):
            first = " ".join(result.commands[0].command)
            how = "95% CI, paired t-test: interleaved runs"
            table = Table(
                title=f"{' '.join(command.command)} vs {first} ({how})",
                title_justify="left",
            )
            for name in ("metric", "ratio", "95% CI", "difference", "95% CI ", "p", "note"):
                table.add_column(name, justify="left" if name in ("metric", "note") else "right")
            for r in against:
                unit = result.units.get(r.metric, "")
                interval = "-" if r.low != r.low else f"[{r.low:.4g}, {r.high:.4g}]"
                p = "-" if r.p_value != r.p_value else f"{r.p_value:.2g}"
                ratio = "-" if r.ratio != r.ratio else f"{r.ratio:.4g}"
                scale = abs(r.difference) or 1.0
                difference = _number(r.difference, unit, scale)
                low = (
                    "-"
                    if r.difference_low != r.difference_low
                    else _number(r.difference_low, unit, scale)
                )
                high = _number(r.difference_high, unit, scale)
                spread = "-" if low == "-" else f"[{low}, {high}]"
                table.add_row(r.metric, ratio, interval, difference, spread, p, r.note)
            console.print(table)
