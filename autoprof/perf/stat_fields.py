"""The fields of `perf stat -x` lines -> typed columns (see `autoprof.perf.stat_csv`).

`stat_csv.parse` groups the lines of a file by their number of fields; within a group every
field sits at a fixed position, and `parse_group` turns the group into the parsed frame's
columns (`COLUMNS`), with a `Problem` for each line whose fields perf would not have printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from autoprof.perf.labels import split_instance
from autoprof.util.status import CountState

NOT_COUNTED = "<not counted>"
NOT_SUPPORTED = "<not supported>"


# S0, S0-D0, S0-D0-C1, S0-D0-CL1 (cluster), S0-D0-L3-ID1 (cache), N0
AGGR_RE = (
    r"^(?:S(?P<socket>\d+)(?:-D(?P<die>\d+))?(?:-(?:C|CL|L\d+-ID)(?P<core>\d+))?"
    r"|N(?P<node>\d+))$"
)
NUMBER_RE = r"^\s*[-+]?\d+(?:[.,]\d+)?(?:[eE][-+]?\d+)?\s*$"
_PERCENT_RE = r"^\s*\d+(?:[.,]\d+)\s*$"  # perf prints "%.2f": a bare "00" is a split field

_PERCENT_MESSAGE = {
    False: "percent running {} is not perf's %.2f",
    True: "percent running {} is not perf's %.2f (decimal comma with -x, ? use LC_ALL=C)",
}

# Columns of the parsed frame, in order.
COLUMNS = [
    "LINE",  # 1-based line number in the file
    "TIME",  # interval end in seconds (NaN in total mode)
    "AGGR",  # perf's aggregation prefix as printed (CPU3, S0-D0-C1, comm-pid), else <NA>
    "CPU",
    "SOCKET",
    "DIE",
    "CORE",
    "NODE",
    "AGGR_CPUS",  # CPUs summed into an --per-socket/-die/-core/-node line
    "VALUE",  # the count (NaN unless STATE is counted)
    "STATE",  # counted / not counted / not supported
    "UNIT",  # perf's unit of VALUE (msec), <NA> when none
    "EVENT",  # the event as perf printed it
    "EVENT_BASE",  # EVENT without an uncore instance (uncore_cha_3/x/ -> uncore_cha/x/)
    "PMU_INSTANCE",  # the uncore instance perf named (uncore_cha_3), else <NA>
    "NOISE_PERCENT",  # -r N: relative standard deviation, percent
    "RUN_TIME",  # ns the counter was enabled and running
    "PERCENT_RUNNING",
    "METRIC_VALUE",
    "METRIC_UNIT",
]


@dataclass
class Problem:
    """A line `parse` dropped, with why; line numbers are 1-based."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


def _per_unique(col: pd.Series, fn) -> np.ndarray:
    """Apply a Python function to each distinct text of a column, not to each line: perf repeats
    the same event names, units and prefixes on every interval."""
    codes, uniques = pd.factorize(col.to_numpy(dtype=object))
    return np.asarray([fn(u) for u in uniques], dtype=object)[codes]


def _numbers(col: pd.Series, decimal_comma: bool) -> np.ndarray:
    """Text to float (NaN when not a number); perf pads timestamps with spaces."""
    if decimal_comma:
        col = col.str.replace(",", ".", regex=False)
    return pd.to_numeric(col, errors="coerce").to_numpy(dtype="float64")


def _text_or_na(text: str) -> str | None:
    text = text.strip()
    return text or None


def parse_group(
    rows: pd.DataFrame, n: int, prefix: int, kind: str, t: int, noise: bool, sep: str, comma: bool
) -> tuple[pd.DataFrame, list[Problem]]:
    """Parse the lines that have `n` fields: every column is at a fixed position here."""
    v = t + prefix  # value column
    right = n - 4 - int(noise)  # first column after the event
    event = rows[v + 2]
    for extra in range(v + 3, right):  # the event had separators in it
        event = event + sep + rows[extra]
    event = _per_unique(event, str.strip)
    value_text = rows[v].to_numpy(dtype=object)
    state = np.full(len(rows), CountState.COUNTED, dtype=object)
    state[value_text == NOT_COUNTED] = CountState.NOT_COUNTED
    state[value_text == NOT_SUPPORTED] = CountState.NOT_SUPPORTED
    value = _numbers(rows[v], comma)
    time = _numbers(rows[0], False) if t else np.full(len(rows), np.nan)
    pct_text = rows[n - 3]
    out = pd.DataFrame(
        {
            "LINE": rows.index.to_numpy(),
            "TIME": time,
            "VALUE": value,
            "STATE": pd.array(state, dtype="string"),
            "UNIT": pd.array(_per_unique(rows[v + 1], _text_or_na), dtype="string"),
            "EVENT": pd.array(event, dtype="string"),
            "NOISE_PERCENT": _numbers(rows[n - 5].str.rstrip("%"), comma) if noise else np.nan,
            "RUN_TIME": _numbers(rows[n - 4], comma),
            "PERCENT_RUNNING": _numbers(pct_text, comma),
            "METRIC_VALUE": _numbers(rows[n - 2], comma),
            "METRIC_UNIT": pd.array(_per_unique(rows[n - 1], _text_or_na), dtype="string"),
        },
        index=rows.index,
    )
    _add_location(out, rows, t, kind)
    _add_instance(out, event)

    pct_ok = _per_unique(pct_text, lambda x: re.match(_PERCENT_RE, x) is not None).astype(bool)
    checks = [
        ((state == CountState.COUNTED) & np.isnan(value), "value {} is not a number", rows[v]),
        (event == "", "no event name", rows[v + 2]),
        (~pct_ok, _PERCENT_MESSAGE[sep == ","], pct_text),
        (np.isnan(out["RUN_TIME"].to_numpy()), "run time {} is not a number", rows[n - 4]),
    ]
    summary = np.zeros(len(rows), dtype=bool)
    if t:  # --summary lines repeat the totals of the intervals: not an interval
        no_time = np.isnan(time)
        summary[no_time] = rows[0][no_time].str.strip().eq("summary").to_numpy()
        checks.append((no_time & ~summary, "time {} is not a number", rows[0]))
    if kind == "cpu":
        checks.append((out["CPU"].isna().to_numpy(), "{} is not a CPU column", rows[t]))
    bad = (value_text == "") & (event == "")  # continuation lines of extra metrics
    problems = []
    for mask, message, text in checks:
        mask = mask & ~bad
        for line in rows.index[mask]:
            problems.append(Problem(int(line), message.format(repr(text[line]))))
        bad |= mask
    return out[~(bad | summary)][COLUMNS], problems


def _add_location(out: pd.DataFrame, rows: pd.DataFrame, t: int, kind: str) -> None:
    """Fill AGGR, CPU, SOCKET, DIE, CORE, NODE and AGGR_CPUS from perf's prefix columns."""
    missing = pd.arrays.IntegerArray(np.zeros(len(out), "int64"), np.ones(len(out), bool))
    for name in ("CPU", "SOCKET", "DIE", "CORE", "NODE", "AGGR_CPUS"):
        out[name] = missing.copy()
    if kind == "none":
        out["AGGR"] = pd.array(np.full(len(out), None, dtype=object), dtype="string")
        return
    aggr = _per_unique(rows[t], str.strip)
    out["AGGR"] = pd.array(aggr, dtype="string")
    if kind == "cpu":
        cpu = _per_unique(rows[t], lambda x: _match_int(r"^\s*CPU(\d+)\s*$", x, 1))
        out["CPU"] = pd.array(cpu, dtype="Int64")
    elif kind == "aggr":
        for name in ("socket", "die", "core", "node"):
            part = _per_unique(rows[t], lambda x, g=name: _match_int(AGGR_RE, x.strip(), g))
            out[name.upper()] = pd.array(part, dtype="Int64")
        out["AGGR_CPUS"] = pd.array(_numbers(rows[t + 1], False), dtype="Float64").astype("Int64")


def _match_int(pattern: str, text: str, group: int | str) -> int | None:
    match = re.match(pattern, text)
    return int(match[group]) if match and match[group] is not None else None


def _add_instance(out: pd.DataFrame, event: np.ndarray) -> None:
    codes, uniques = pd.factorize(event)
    split = [split_instance(u) for u in uniques]
    out["EVENT_BASE"] = pd.array(np.asarray([b for b, _ in split], dtype=object)[codes], "string")
    out["PMU_INSTANCE"] = pd.array(np.asarray([i for _, i in split], dtype=object)[codes], "string")
