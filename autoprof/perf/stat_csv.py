"""Parse `perf stat -x SEP` output (perf 5.x and 6.x), faithfully and fast.

A line of perf's CSV output is, left to right::

    [TIME] [AGGR [AGGR_CPUS]] VALUE UNIT EVENT [NOISE%] RUN_TIME PERCENT_RUNNING METRIC METRIC_UNIT

- TIME only with ``-I`` (``%9`` decimals, padded with spaces; ``summary`` with ``--summary``);
- AGGR is ``CPU3`` with ``-A`` (``--no-aggr``), ``comm-pid`` with ``--per-thread``, or
  ``S0`` / ``S0-D0`` / ``S0-D0-C1`` / ``N0`` (``--per-socket/-die/-core/-node``) followed by
  the number of CPUs aggregated;
- VALUE is a number, ``<not counted>`` or ``<not supported>``; in a foreign locale it has a
  decimal comma (``52,01``); NOISE (``-r N``) is ``1.36%``;
- EVENT is printed unquoted, so an event spec with commas (``cpu/event=0xc0,umask=0x0/``)
  spans several fields when the separator is a comma: the columns right of it are therefore
  counted from the end of the line;
- lines with an empty VALUE and EVENT are continuation lines of extra metrics and carry no count.

The whole parse is vectorized: pandas' C parser reads every field as text, a numpy pass over the
bytes counts the fields of each line, and the quirks are fixed column-wise. `parse` is pure:
bytes in, a frame and a list of problems out; lines it cannot trust (a partial last line of an
interrupted run, garbage) are reported as problems and the rest is kept.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

NOT_COUNTED = "<not counted>"
NOT_SUPPORTED = "<not supported>"

# STATE column values: what perf said about the count
COUNTED = "counted"
STATE_NOT_COUNTED = "not counted"
STATE_NOT_SUPPORTED = "not supported"

# separators tried, in order, when the caller does not know which one perf was given
SNIFF_SEPARATORS = (" ;", ";", "\t", "|", ",")
_FIELD_SEP = "\x1f"  # a multi-character separator is rewritten to this before pandas reads
_MAX_FIELDS = 64

_TIME_RE = r"^\s*(?:\d+\.\d{9}|summary)\s*$"
# S0, S0-D0, S0-D0-C1, S0-D0-CL1 (cluster), S0-D0-L3-ID1 (cache), N0
_AGGR_RE = (
    r"^(?:S(?P<socket>\d+)(?:-D(?P<die>\d+))?(?:-(?:C|CL|L\d+-ID)(?P<core>\d+))?"
    r"|N(?P<node>\d+))$"
)
_NUMBER_RE = r"^\s*[-+]?\d+(?:[.,]\d+)?(?:[eE][-+]?\d+)?\s*$"
_PERCENT_RE = r"^\s*\d+(?:[.,]\d+)\s*$"  # perf prints "%.2f": a bare "00" is a split field
_INSTANCE_SLASH_RE = r"^(?P<pmu>[A-Za-z0-9_.-]+?)_(?P<n>\d+)/(?P<rest>.*)$"
_INSTANCE_BRACKET_RE = r"^(?P<name>.*) \[(?P<inst>[^\]]+)\]$"

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


class StatCsvError(ValueError):
    """The text is not perf stat CSV output at all (no line of it parses)."""


@dataclass
class Problem:
    """A line `parse` dropped, with why; line numbers are 1-based."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass
class StatCsv:
    frame: pd.DataFrame
    problems: list[Problem] = field(default_factory=list)
    interval: bool = False  # -I output
    separator: str = ","


def sniff_separator(data: bytes) -> str:
    """Guess perf's -x separator from the first data line (comma last: it is also a decimal)."""
    for raw in data.splitlines():
        line = raw.decode("utf-8", "replace")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        for sep in SNIFF_SEPARATORS:
            if line.count(sep) >= 4:
                return sep
        break
    return ","


def parse(data: bytes | str, sep: str | None = None, interval: bool | None = None) -> StatCsv:
    """Parse the text perf wrote with `perf stat -x SEP` (``-o FILE`` or stderr).

    `sep` is the separator given to ``-x`` (sniffed when None); `interval` says whether ``-I``
    was given (detected from the timestamp column when None). Raises StatCsvError only when no
    line at all is perf stat output; every other defect becomes a `Problem`.
    """
    if isinstance(data, str):
        data = data.encode()
    if sep is None:
        sep = sniff_separator(data)
    if not sep:
        raise StatCsvError("empty field separator")
    cut = data.rfind(b"\n") + 1
    if data[cut:].strip():
        return _unterminated(data, cut, sep, interval)
    if len(sep.encode()) != 1:
        data = data.replace(sep.encode(), _FIELD_SEP.encode())
        read_sep = _FIELD_SEP
    else:
        read_sep = sep
    if not data.strip():
        return StatCsv(_empty(), [], bool(interval), sep)

    nfields, skip, nul = _line_facts(data, read_sep.encode())
    decimal_comma = sep != "," and b"," in data  # a foreign locale (LC_NUMERIC)
    if nfields.max() > _MAX_FIELDS:
        raise StatCsvError(f"a line has {nfields.max()} fields; not perf stat output")
    raw = pd.read_csv(
        io.BytesIO(data),
        sep=read_sep,
        header=None,
        names=range(int(nfields.max())),
        dtype=str,
        na_filter=False,
        skip_blank_lines=False,
        quoting=csv.QUOTE_NONE,
        encoding_errors="replace",
        engine="c",
    )
    if len(raw) != len(nfields):
        raise StatCsvError(f"pandas read {len(raw)} lines where the file has {len(nfields)}")
    raw.index = pd.RangeIndex(1, len(raw) + 1)  # line numbers

    skip = skip | nul
    data_rows = raw[~skip]
    counts = nfields[~skip]
    if data_rows.empty:
        if nul.any():
            raise StatCsvError(f"line {np.flatnonzero(nul)[0] + 1}: NUL bytes (damaged file?)")
        return StatCsv(_empty(), [], bool(interval), sep)

    if interval is None:
        interval = bool(data_rows[0].head(200).str.match(_TIME_RE).mean() > 0.5)
    prefix, kind = _prefix_layout(data_rows, int(interval))
    noise = _has_noise(data_rows, counts)
    fixed_right = 4 + int(noise)  # [noise] run_time percent metric metric_unit
    minimum = prefix + 3 + fixed_right

    frames = []
    problems = [Problem(int(i) + 1, "NUL bytes (damaged file?)") for i in np.flatnonzero(nul)]
    too_short = counts < minimum
    for n in np.unique(counts[~too_short]):
        rows = data_rows[counts == n]
        parsed, bad = _parse_group(
            rows, int(n), prefix, kind, int(interval), noise, read_sep, decimal_comma
        )
        frames.append(parsed)
        problems.extend(bad)
    for line in data_rows.index[too_short]:
        if not _is_continuation(raw.loc[line], prefix + int(interval)):
            problems.append(Problem(int(line), f"{nfields[line - 1]} fields, expected {minimum}"))

    frame = pd.concat(frames) if frames else _empty()
    if not frame.empty and frame["LINE"].is_monotonic_increasing is False:
        frame = frame.sort_values("LINE", kind="stable")
    frame = frame.reset_index(drop=True)
    if frame.empty and problems and len(problems) == len(data_rows) + int(nul.sum()):
        raise StatCsvError(f"no line is perf stat output ({problems[0]})")
    problems.sort(key=lambda p: p.line)
    return StatCsv(frame, problems, bool(interval), sep)


def _line_facts(data: bytes, sep: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per line (numpy over the bytes): fields, whether it is blank or a comment, NUL bytes
    (a crash can leave zeroed blocks)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(buf == 10)
    terminated = bool(len(buf)) and buf[-1] == 10
    ends = newlines if terminated else np.append(newlines, len(buf))

    def per_line(positions: np.ndarray) -> np.ndarray:
        return np.diff(np.searchsorted(positions, ends), prepend=0)

    fields = per_line(np.flatnonzero(buf == sep[0])) + 1
    visible_at = np.flatnonzero(~np.isin(buf, np.frombuffer(b" \t\r\n", np.uint8)))
    visible = per_line(visible_at)
    nul = per_line(np.flatnonzero(buf == 0)) > 0
    # a comment line: its first visible byte is '#'
    starts = np.concatenate(([0], ends[:-1] + 1)) if len(ends) else ends
    comment = np.zeros(len(ends), dtype=bool)
    if len(visible_at):
        first = np.minimum(np.searchsorted(visible_at, starts), len(visible_at) - 1)
        comment = (buf[visible_at[first]] == ord("#")) & (visible > 0)
    return fields, (visible == 0) | comment, nul


def _prefix_layout(rows: pd.DataFrame, t: int) -> tuple[int, str]:
    """Columns between TIME and VALUE, and their kind: none, cpu, thread or aggr (+count)."""
    col = rows[t].str.strip() if t < rows.shape[1] else pd.Series([], dtype=str)
    head = col.head(200)
    if head.str.match(r"^CPU\d+$").mean() > 0.5:
        return 1, "cpu"
    if head.str.match(_AGGR_RE).mean() > 0.5 and rows[t + 1].head(200).str.match(r"^\d+$").all():
        return 2, "aggr"
    is_value = head.str.match(_NUMBER_RE) | head.isin([NOT_COUNTED, NOT_SUPPORTED])
    if is_value.mean() > 0.5:
        return 0, "none"
    return 1, "thread"


def _has_noise(rows: pd.DataFrame, counts: np.ndarray) -> bool:
    """-r N adds a NOISE% column right after the event (the fifth field from the end)."""
    n = int(np.bincount(counts).argmax())
    if n < 6:
        return False
    sample = rows[counts == n][n - 5].head(200).str.strip()
    return bool(sample.str.match(r"^\d+(?:[.,]\d+)?%$").mean() > 0.5)


def _is_continuation(row: pd.Series, left: int) -> bool:
    """A metric-only line: the prefix, then nothing until the metric columns."""
    rest = row.iloc[left : left + 3]
    return bool((rest.str.strip() == "").all())


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


def _parse_group(
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
    state = np.full(len(rows), COUNTED, dtype=object)
    state[value_text == NOT_COUNTED] = STATE_NOT_COUNTED
    state[value_text == NOT_SUPPORTED] = STATE_NOT_SUPPORTED
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
        ((state == COUNTED) & np.isnan(value), "value {} is not a number", rows[v]),
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
            part = _per_unique(rows[t], lambda x, g=name: _match_int(_AGGR_RE, x.strip(), g))
            out[name.upper()] = pd.array(part, dtype="Int64")
        out["AGGR_CPUS"] = pd.array(_numbers(rows[t + 1], False), dtype="Float64").astype("Int64")


def _match_int(pattern: str, text: str, group: int | str) -> int | None:
    match = re.match(pattern, text)
    return int(match[group]) if match and match[group] is not None else None


def split_instance(event: str) -> tuple[str, str | None]:
    """(event without instance, uncore instance) in both ways perf names a box:
    ``uncore_cha_3/event=0x0/`` and ``UNC_CHA_CLOCKTICKS [uncore_cha_3]``."""
    match = re.match(_INSTANCE_SLASH_RE, event)
    if match:
        return f"{match['pmu']}/{match['rest']}", f"{match['pmu']}_{match['n']}"
    match = re.match(_INSTANCE_BRACKET_RE, event)
    if match:
        return match["name"], match["inst"]
    return event, None


def _add_instance(out: pd.DataFrame, event: np.ndarray) -> None:
    codes, uniques = pd.factorize(event)
    split = [split_instance(u) for u in uniques]
    out["EVENT_BASE"] = pd.array(np.asarray([b for b, _ in split], dtype=object)[codes], "string")
    out["PMU_INSTANCE"] = pd.array(np.asarray([i for _, i in split], dtype=object)[codes], "string")


def _unterminated(data: bytes, cut: int, sep: str, interval: bool | None) -> StatCsv:
    """A last line without a newline, the cut of an interrupted write: the lines before it are
    parsed on their own (a cut line must not spoil them); it is kept only when it parses whole."""
    head = parse(data[:cut], sep, interval)
    try:
        whole = parse(data + b"\n", sep, head.interval if len(head.frame) else interval)
    except StatCsvError:
        whole = None
    if whole and len(whole.frame) == len(head.frame) + 1 and whole.problems == head.problems:
        return whole
    line = data[:cut].count(b"\n") + 1
    said = [p.message for p in (whole.problems if whole else []) if p.line == line]
    if said and said[0].startswith("NUL"):
        head.problems.append(Problem(line, said[0]))  # zeroed blocks: a crash, not a cut
    else:
        detail = f": {said[0]}" if said else ""
        head.problems.append(Problem(line, f"partial last line (interrupted run?){detail}"))
    return head


def _empty() -> pd.DataFrame:
    dtypes = {
        "LINE": "int64",
        "TIME": "float64",
        "AGGR": "string",
        "VALUE": "float64",
        "STATE": "string",
        "UNIT": "string",
        "EVENT": "string",
        "EVENT_BASE": "string",
        "PMU_INSTANCE": "string",
        "NOISE_PERCENT": "float64",
        "RUN_TIME": "float64",
        "PERCENT_RUNNING": "float64",
        "METRIC_VALUE": "float64",
        "METRIC_UNIT": "string",
    }
    return pd.DataFrame(
        {c: pd.Series(dtype=dtypes.get(c, "Int64")) for c in COLUMNS},
    )


def argv_options(argv: list[str]) -> tuple[str, bool]:
    """The -x separator and whether -I was given, from a `perf stat` argv (before ``--``)."""
    sep, interval = ",", False
    args = argv[: argv.index("--")] if "--" in argv else argv
    for i, arg in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if arg in ("-x", "--field-separator"):
            sep = nxt
        elif arg.startswith("--field-separator="):
            sep = arg.split("=", 1)[1]
        elif arg.startswith("-x") and len(arg) > 2:
            sep = arg[2:]
        elif arg in ("-I", "--interval-print") or arg.startswith(("-I", "--interval-print=")):
            interval = True
    return sep, interval
