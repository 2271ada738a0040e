"""What a result shows on a terminal (`Result.shown`): its tables as rich tables, its lines as
rich markup; `-o tables.txt` writes the same text to a file."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from autoprof.analysis.renderers.base import Renderer

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table as RichTable

    from autoprof.analysis.tables import Result, Table

FILE_WIDTH = 100_000  # a file has no terminal width: never wrap a table's lines


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


class ConsoleRenderer(Renderer):
    """`console`: where a None path prints (the command's console, which knows the terminal)."""

    extensions = (".txt",)

    def __init__(self, console: Console | None = None):
        self.console = console

    def render(self, result: Result, path: Path | None) -> list[Path]:
        from rich.console import Console

        if path is None:
            self._print(result, self.console or Console(highlight=False))
            return []
        with path.open("w", encoding="utf-8") as handle:
            self._print(result, Console(file=handle, width=FILE_WIDTH, highlight=False))
        return [path]

    @staticmethod
    def _print(result: Result, console: Console) -> None:
        for item in result.shown():
            console.print(item if isinstance(item, str) else rich_table(item))
