"""Cells a spreadsheet will not run (CSV or formula injection, OWASP's advice).

Excel, LibreOffice and Google Sheets evaluate a cell that starts with `=`, `+`, `-` or `@` (tab
and carriage return too, before one of those) as a formula: an event name such as
`=HYPERLINK(...)` or `=cmd|' /C calc'!A0` in an exported CSV would run when opened. The export
commands' `--excel-safe` writes such a text cell with a leading `'`, which the spreadsheet
shows as text and does not display. Numbers (`-12.5`, `+3`, `-inf`) stay as they are: they are
values, not formulas, and a quote would turn them into text.
"""

from __future__ import annotations

import csv
import io
from typing import Any

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
QUOTE = "'"


def cell(text: str) -> str:
    """`text` as a spreadsheet shows it verbatim."""
    if not text.startswith(TRIGGERS) or _number(text):
        return text
    return QUOTE + text


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def row(values: list[Any]) -> list[Any]:
    """A CSV row with its text cells made safe (numbers and missing values as they are)."""
    return [cell(v) if isinstance(v, str) else v for v in values]


def csv_text(text: str) -> str:
    """CSV text with every cell made safe (written again by the csv module, `\\n` lines)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerows(row(r) for r in csv.reader(io.StringIO(text)))
    return out.getvalue()


def frame(data: Any) -> Any:
    """A pandas frame with the cells of its text columns made safe (a copy)."""
    import pandas as pd

    data = data.copy()
    for name in data.columns:
        dtype = data[name].dtype
        if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_string_dtype(dtype):
            data[name] = data[name].map(lambda v: cell(v) if isinstance(v, str) else v)
    return data
