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
bytes counts the fields of each line, and the quirks are fixed column-wise (the fields of a line
group are decoded by `autoprof.perf.stat_fields`). `parse` is pure:
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

from autoprof.perf.stat_fields import (
    AGGR_RE,
    COLUMNS,
    NOT_COUNTED,
    NOT_SUPPORTED,
    NUMBER_RE,
    Problem,
    parse_group,
)

# separators tried, in order, when the caller does not know which one perf was given
SNIFF_SEPARATORS = (" ;", ";", "\t", "|", ",")
_FIELD_SEP = "\x1f"  # a multi-character separator is rewritten to this before pandas reads
_MAX_FIELDS = 64

_TIME_RE = r"^\s*(?:\d+\.\d{9}|summary)\s*$"


class StatCsvError(ValueError):
    """The text is not perf stat CSV output at all (no line of it parses)."""


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
        lineterminator="\n",  # perf ends lines with \n only: a stray \r is a garbage byte
    )
    if len(raw) != len(nfields):  # pandas' line count is not the file's: not perf's text
        raise StatCsvError("not perf stat output (its lines do not split as text lines)")
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
        parsed, bad = parse_group(
            rows, int(n), prefix, kind, int(interval), noise, read_sep, decimal_comma
        )
        frames.append(parsed)
        problems.extend(bad)
    for line in data_rows.index[too_short]:
        if not _is_continuation(raw.loc[line], prefix, int(interval), nfields[line - 1]):
            problems.append(Problem(int(line), f"{nfields[line - 1]} fields, expected {minimum}"))

    frame = pd.concat(frames) if frames else _empty()
    if not frame.empty and frame["LINE"].is_monotonic_increasing is False:
        frame = frame.sort_values("LINE", kind="stable")
    frame = frame.reset_index(drop=True)
    problems.sort(key=lambda p: p.line)
    if frame.empty and problems and len(problems) == len(data_rows) + int(nul.sum()):
        raise StatCsvError(f"no line is perf stat output ({problems[0]})")
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
    if head.str.match(AGGR_RE).mean() > 0.5 and rows[t + 1].head(200).str.match(r"^\d+$").all():
        return 2, "aggr"
    is_value = head.str.match(NUMBER_RE) | head.isin([NOT_COUNTED, NOT_SUPPORTED])
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


def _is_continuation(row: pd.Series, prefix: int, t: int, nfields: int) -> bool:
    """A metric-only line (perf's new_line_csv): the time with -I, the prefix, three empty
    fields, then the metric columns. Anything shorter is no line of perf's."""
    left = prefix + t
    if nfields <= left + 3 or (t and not re.match(_TIME_RE, str(row.iloc[0]))):
        return False
    rest = row.iloc[left : left + 3]
    return bool((rest.str.strip() == "").all())


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
