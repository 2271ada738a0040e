"""What every analysis result offers its renderers: named tables, the tables worth showing on a
terminal, and notes for the user; figures are drawn by the png renderer from the result itself.

The analyses compute and return a dataclass with these methods (the `Result` protocol); how it
is shown (PNG, CSV, terminal) is the renderers' business, chosen by the output's extension.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Table:
    """One table of a result. `name` is its CSV file's stem (`correlation_matrix`); `index`
    names the frame's index when the index is data (event names), None when it is not."""

    name: str
    frame: pd.DataFrame
    title: str = ""
    index: str | None = None
    float_format: str | None = None


class Result(Protocol):
    """The contract between an analysis and the renderers."""

    FIGURES: ClassVar[tuple[str, ...]]  # default file names of its figures (none: no figure)

    def tables(self) -> list[Table]:
        """Every table, the main one first (`-o table.csv` writes that one)."""
        ...

    def shown(self) -> Sequence[Table | str]:
        """What a terminal shows: short tables, the top of long ones; a str is a line of rich
        markup (the metrics' top-down tree)."""
        ...

    def notes(self) -> list[str]:
        """Lines to tell the user whatever the output format (left-out events, warnings)."""
        ...
