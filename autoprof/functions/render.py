"""A per-function `Table` as CSV (every row, for tools: `CsvRenderer`) or a terminal table
(the top rows: `TopRenderer`), behind the one renderer contract (`autoprof.util.renderer`)."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING

from autoprof.functions.table import Row, Table, shown_name
from autoprof.util.renderer import Renderer, RichRenderer

if TYPE_CHECKING:
    from rich.console import Console


def header(table: Table) -> list[str]:
    """CSV columns: the row's name (and dso), then per event its weight, samples and share."""
    cols = [table.by] + (["dso"] if table.by == "symbol" else [])
    for event in table.events:
        cols += [event, f"{event} samples", f"{event} %"]
    return cols + [label for _, _, label in table.ratios]


def _values(table: Table, row: Row) -> list[str]:
    values = [row.key] + ([row.dso] if table.by == "symbol" else [])
    for event in table.events:
        cell = row.cells.get(event)
        values += [
            str(cell.period if cell else 0),
            str(cell.samples if cell else 0),
            f"{table.share(row, event):.4f}",
        ]
    for num, den, _ in table.ratios:
        ratio = table.ratio(row, num, den)
        values.append("" if ratio is None else f"{ratio:.6g}")
    return values


class CsvRenderer(Renderer[Table]):
    """Every row, the columns of `header`."""

    extensions = (".csv",)

    def render(self, table: Table) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header(table))
        for row in table.rows:
            writer.writerow(_values(table, row))
        return out.getvalue()


class TopRenderer(RichRenderer[Table]):
    """The `top` heaviest rows (rich): per event its weight and share, then the ratios; each
    event's total underneath. Sample counts are in the CSV."""

    def __init__(self, top: int, title: str, console: Console | None = None) -> None:
        super().__init__(console)
        self.top = top
        self.title = title

    def draw(self, table: Table, console: Console) -> None:
        _draw_top(table, self.top, self.title, console)


def _draw_top(table: Table, top: int, title: str, console: Console) -> None:
    from rich.table import Table as RichTable
    from rich.text import Text

    shown = table.rows[:top]
    weights = (
        "samples x period"
        if table.counted == "samples"
        else f"the {table.counted} the trace counted (every one, no sampling)"
    )
    caption = f"{len(shown)} of {len(table.rows)} rows; weights are {weights}"
    rich = RichTable(title=title, caption=caption, show_footer=True, header_style="bold")
    rich.add_column(table.by, footer="total", overflow="fold")
    for event in table.events:
        footer = f"{table.totals[event].period:,}"
        rich.add_column(shown_name(event), justify="right", footer=footer)
        rich.add_column("%", justify="right", style="bold", footer="100.00")
    for _, _, label in table.ratios:
        rich.add_column(label, justify="right")
    for row in shown:
        name = Text(row.key)  # Text: names such as [kernel.kallsyms] are no markup
        if table.by == "symbol" and row.dso:
            name.append(f" {row.dso}", style="dim")
        cells: list[Text | str] = [name]
        for event in table.events:
            cells += [f"{row.period(event):,}", f"{table.share(row, event):.2f}"]
        for num, den, _ in table.ratios:
            ratio = table.ratio(row, num, den)
            cells.append("" if ratio is None else f"{ratio:.3f}")
        rich.add_row(*cells)
    console.print(rich)
