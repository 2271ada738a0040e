"""The tables of a result as CSV: `-o table.csv` the main one, a folder every one by name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autoprof.util.renderer import Renderer

if TYPE_CHECKING:
    from autoprof.analysis.tables import Result, Table


def table_csv(table: Table) -> str:
    """One table as CSV text (its index a column when it is data)."""
    return table.frame.to_csv(
        index=table.index is not None,
        index_label=table.index,
        float_format=table.float_format,
    )


class CsvRenderer(Renderer["Result"]):
    """The result's main table as CSV (a folder gets every table: `table_csv`)."""

    extensions = (".csv",)

    def render(self, result: Result) -> str:
        return table_csv(result.tables()[0])
