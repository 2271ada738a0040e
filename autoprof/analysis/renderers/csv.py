"""The tables of a result as CSV: `-o table.csv` the main one, a folder every one by name."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from autoprof.util.renderer import Renderer

if TYPE_CHECKING:
    from pathlib import Path
    from typing import TextIO

    from autoprof.analysis.tables import Result, Table


def write(table: Table, target: Path | TextIO) -> None:
    table.frame.to_csv(
        target,
        index=table.index is not None,
        index_label=table.index,
        float_format=table.float_format,
    )


class CsvRenderer(Renderer["Result"]):
    extensions = (".csv",)

    def render(self, result: Result, path: Path | None) -> list[Path]:
        tables = result.tables()
        if path is None:  # standard output, for a pipe
            write(tables[0], sys.stdout)
            return []
        if path.suffix.lower() in self.extensions:
            write(tables[0], path)
            return [path]
        written = []
        for table in tables:
            written.append(path / f"{table.name}.csv")
            write(table, written[-1])
        return written
