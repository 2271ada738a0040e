"""What a result shows on a terminal (`Result.shown`): its tables as rich tables, its lines as
rich markup; `-o tables.txt` writes the same text to a file."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from autoprof.util.renderer import RichRenderer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table as RichTable

    from autoprof.analysis.tables import Result, Table


def cell(value: object) -> str:
    """A value as a table cell: 4 significant digits, empty for NaN and missing values."""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.4e}"
    if value is None or type(value).__name__ == "NAType":
        return ""
    return str(value)


def rich_table(table: Table) -> RichTable:
    from rich.table import Table as RichTable

    frame = table.frame
    out = RichTable(title=table.title or None, title_justify="left")
    if table.index:
        out.add_column(table.index)
    for name in frame.columns:
        out.add_column(str(name), justify="right" if frame[name].dtype.kind in "iuf" else "left")
    for label, row in frame.iterrows():
        out.add_row(*([str(label)] if table.index else []), *(cell(v) for v in row))
    return out


class ConsoleRenderer(RichRenderer["Result"]):
    """A result's tables and lines (`Result.shown`) as rich text."""

    def draw(self, result: Result, console: Console) -> None:
        for item in result.shown():
            console.print(item if isinstance(item, str) else rich_table(item))
