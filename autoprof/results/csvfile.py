"""The `results.csv` codec: long format, one row per (event, interval, cpu/box, run, repeat).

Every layer that reads or writes results goes through this module, so that `aggregate`, the
results store's `export` and the analysis scripts agree to the byte. The first nine columns are
autoperf's, in autoperf's order, so tools written for autoperf read our files unchanged.

Columns:
  EVENT_NAME       catalog name of the event (e.g. ``INST_RETIRED.ANY``, ``task-clock``)
  INDEX            interval index within its run, 0-based (perf stat -I)
  TIME             end of the interval in seconds since the run started (perf's timestamp)
  SOCKET,CORE,CPU,NODE  location of the count; empty when the count is for the whole process
  UNIT             where it was counted: ``cpu`` for core events, the uncore box
                   (``uncore_cha_3``), the PMU of a non-core event (``software``), or, in a
                   ``profile --per-thread``, the thread as perf's per-thread output names it,
                   ``COMM-TID`` (``worker-12345``; its name when it ended)
  SAMPLE_VALUE     the count; empty when perf gave no number (see STATUS)
  RUN              1-based run (group) number in the plan
  REPEAT           1-based repetition of that run (``profile --repeat``)
  PMU              the catalog PMU the event was scheduled on (``cpu``, ``breakpoint``, ...)
  VALUE_UNIT       perf's unit for the value (``msec`` for task-clock), usually empty
  PERCENT_RUNNING  percent of the interval the counter was running; < 100 means multiplexed
  STATUS           a `autoprof.util.status.RowStatus`: ``ok``, ``multiplexed``, ``not counted``,
                   ``not supported``
  REGION           the named region the count is for (`profile --region`); empty for the whole
                   program. A region's row holds its total over the run (INDEX 0, no TIME)

With `profile --per-thread`, UNIT names the thread a row counts, as perf prints it: ``COMM-TID``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from autoprof.util.owned import open_file

if TYPE_CHECKING:  # pandas is imported where a frame is made: the streaming paths need none
    import pandas as pd

_NEW = os.O_WRONLY | os.O_CREAT | os.O_TRUNC  # never through a link planted at its name
AUTOPERF_COLUMNS = [
    "EVENT_NAME",
    "INDEX",
    "TIME",
    "SOCKET",
    "CORE",
    "CPU",
    "NODE",
    "UNIT",
    "SAMPLE_VALUE",
]
EXTRA_COLUMNS = ["RUN", "REPEAT", "PMU", "VALUE_UNIT", "PERCENT_RUNNING", "STATUS", "REGION"]
COLUMNS = AUTOPERF_COLUMNS + EXTRA_COLUMNS

# pandas dtypes; nullable integers so that "no CPU" stays empty instead of becoming 0 or 0.0.
DTYPES: dict[str, str] = {
    "EVENT_NAME": "string",
    "INDEX": "Int64",
    "TIME": "float64",
    "SOCKET": "Int64",
    "CORE": "Int64",
    "CPU": "Int64",
    "NODE": "Int64",
    "UNIT": "string",
    "SAMPLE_VALUE": "float64",
    "RUN": "Int64",
    "REPEAT": "Int64",
    "PMU": "string",
    "VALUE_UNIT": "string",
    "PERCENT_RUNNING": "float64",
    "STATUS": "string",
    "REGION": "string",
}


def empty_frame() -> pd.DataFrame:
    """A results frame with no rows but every column and dtype."""
    import pandas as pd

    return pd.DataFrame({name: pd.Series(dtype=DTYPES[name]) for name in COLUMNS})


def whole_program(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows that count the whole program (no REGION): what an analysis of a profile
    reads unless it is asked for regions."""
    if "REGION" not in frame.columns:
        return frame
    return frame[frame["REGION"].isna()]


def region_names(frame: pd.DataFrame) -> list[str]:
    """The regions a results frame holds rows for, in order of appearance."""
    if "REGION" not in frame.columns:
        return []
    return [str(r) for r in frame["REGION"].dropna().unique()]


def normalize(frame: pd.DataFrame) -> pd.DataFrame:
    """Return `frame` with exactly the result columns, in order, with the canonical dtypes (a
    frame without REGION counts the whole program: its REGION is empty)."""
    if "REGION" not in frame.columns:
        frame = frame.assign(REGION=None)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"results frame lacks columns: {', '.join(missing)}")
    return frame[COLUMNS].astype(DTYPES)


def _number_text(value: float) -> str:
    if value != value:  # NaN
        return ""
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))  # a numpy float64 reprs as "np.float64(...)"


_SLICE = 1 << 20  # rows written at a time from a whole frame
WHOLE_AS_INT = ("SAMPLE_VALUE", "PERCENT_RUNNING")  # counts: 1004, not 1004.0
_NEEDS_QUOTES = '[,"\n]'


def _float_text(values: np.ndarray, whole_as_int: bool):
    """Python's repr of each float (pandas writes TIME so), or the integer for a whole count;
    NaN is null. Vectorized in pyarrow where its shortest form provably equals repr (tested over
    millions of values): whole numbers, and fractions between 1e-4 and 1e9; repr elsewhere."""
    import pyarrow as pa
    import pyarrow.compute as pc

    size = np.abs(values)
    nan = np.isnan(values)
    whole = (values == np.floor(values)) & (size < (2**53 if whole_as_int else 1e16))
    text = pc.cast(pa.array(np.where(whole, values, 0).astype(np.int64)), pa.string())
    if not whole_as_int:
        text = pc.binary_join_element_wise(text, ".0", "")
    fraction = ~whole & ~nan & (size >= 1e-4) & (size < 1e9)
    if fraction.any():
        formatted = pc.cast(pa.array(values[fraction]), pa.string())
        text = pc.replace_with_mask(text, pa.array(fraction), formatted)
    rare = ~whole & ~nan & ~fraction
    if rare.any():
        formatted = pa.array([repr(float(v)) for v in values[rare]], pa.string())
        text = pc.replace_with_mask(text, pa.array(rare), formatted)
    if nan.any():
        text = pc.if_else(pa.array(nan), pa.scalar(None, pa.string()), text)
    return text


# runs of columns written as one piece: few distinct combinations each (per event, per interval,
# per CPU or box, per event again), so each combination is formatted once; then SAMPLE_VALUE
_SEGMENTS = (
    ("EVENT_NAME",),
    ("INDEX", "TIME"),
    ("SOCKET", "CORE", "CPU", "NODE", "UNIT"),
    ("RUN", "REPEAT", "PMU", "VALUE_UNIT", "PERCENT_RUNNING", "STATUS", "REGION"),
)


def _texts(dictionary, name: str):
    """The written text of each value of a column's dictionary (a pyarrow string array); None
    if one needs quotes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if name in ("TIME", "PERCENT_RUNNING"):
        values = dictionary.to_numpy(zero_copy_only=False).astype(np.float64)
        texts = _float_text(values, name in WHOLE_AS_INT)
    else:
        texts = dictionary.cast(pa.string())
    texts = pc.fill_null(texts, "")
    if DTYPES[name] == "string" and pc.any(pc.match_substring_regex(texts, _NEEDS_QUOTES)).as_py():
        return None
    return texts


def _segment(columns: list, end: str = ""):
    """Adjacent columns, each (codes, texts), joined with commas (then `end`), as one pyarrow
    string array: each distinct combination of their values is formatted once, then taken."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = _shared(columns)
    if len(columns) == 1:
        codes, texts = columns[0]
        rows = pa.array(codes)
    elif max(len(texts) for _, texts in columns) * 4 > len(columns[0][0]):
        # values mostly distinct (an export's TIME): no combinations worth finding
        parts = [texts.take(pa.array(codes)) for codes, texts in columns]
        joined = pc.binary_join_element_wise(*parts, ",")
        return pc.binary_join_element_wise(joined, pa.scalar(end), "") if end else joined
    else:
        if math.prod(len(texts) for _, texts in columns) < 2**62:
            key = np.zeros(len(columns[0][0]), np.int64)
            for codes, texts in columns:
                key = key * len(texts) + codes
            encoded = pc.dictionary_encode(pa.array(key))
            combos = encoded.dictionary.to_numpy()
            rows = encoded.indices
            picked = []
            for _, texts in reversed(columns):
                combos, code = np.divmod(combos, len(texts))
                picked.append(code)
            picked.reverse()
        else:
            stacked = np.stack([codes for codes, _ in columns], axis=1)
            combos, inverse = np.unique(stacked, axis=0, return_inverse=True)
            picked, rows = list(combos.T), pa.array(inverse.reshape(-1))
        parts = [texts.take(pa.array(p)) for p, (_, texts) in zip(picked, columns, strict=True)]
        texts = pc.binary_join_element_wise(*parts, ",")
    if end:
        texts = pc.binary_join_element_wise(texts, pa.scalar(end), "")
    return texts.take(rows)


def _shared(columns: list) -> list:
    """Adjacent columns with the same codes (an export's series columns) as one (codes, texts
    joined with commas): their combinations need no hashing."""
    import pyarrow.compute as pc

    merged: list = []
    for codes, texts in columns:
        if merged and merged[-1][0] is codes:
            merged[-1] = (codes, pc.binary_join_element_wise(merged[-1][1], texts, ","))
        else:
            merged.append((codes, texts))
    return merged


def _string_bytes(array) -> bytes:
    """The characters of a pyarrow string array, end to end (its data buffer, no copy per row)."""
    offsets = np.frombuffer(array.buffers()[1], np.int32, len(array) + 1, array.offset * 4)
    return memoryview(array.buffers()[2])[offsets[0] : offsets[-1]].tobytes()


HEADER = (",".join(COLUMNS) + "\n").encode()


def encode(table) -> bytes:
    """The rows of `table` (a pyarrow table of the result columns: floats as float64, integers
    as int64, text as strings, nulls for missing; any of them may be dictionary-encoded) in the
    canonical text form, header aside: what `ResultsWriter` writes and `runs export` streams.

    Counts are written as integers when they are whole (``1004``, not ``1004.0``), other floats
    with Python's shortest round-trip repr, so that reading a file and writing it again gives the
    same bytes; missing values are empty fields.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return b""
    coded = {}
    # columns of one index array (an export's series columns) share one codes array; the
    # indices stay referenced here, so that no other column's buffer can take their address
    same: dict[tuple[int, int, int], tuple[Any, np.ndarray]] = {}
    for name in COLUMNS:
        column = table.column(name).combine_chunks()
        if name == "SAMPLE_VALUE":  # mostly distinct: formatted as it is
            continue
        if not pa.types.is_dictionary(column.type):
            column = pc.dictionary_encode(column)
        texts = _texts(column.dictionary, name)
        if texts is None:
            return _quoted_csv(table)  # rare: an unmapped event spec with a comma
        indices = column.indices
        if indices.null_count:  # a missing value: one more text, empty
            indices = pc.fill_null(indices, len(texts))
            texts = pa.concat_arrays([texts, pa.array([""], texts.type)])
        where = (indices.buffers()[1].address, indices.offset, len(indices))
        if indices.null_count or where not in same:
            same[where] = (indices, indices.to_numpy(zero_copy_only=False).astype(np.int64))
        coded[name] = (same[where][1], texts)
    values = table.column("SAMPLE_VALUE").combine_chunks()
    value = _float_text(values.to_numpy(zero_copy_only=False).astype(np.float64), True)
    parts = [_segment([coded[n] for n in names]) for names in _SEGMENTS[:-1]]
    last = _segment([coded[n] for n in _SEGMENTS[-1]], "\n")
    line = pc.binary_join_element_wise(*parts, pc.fill_null(value, ""), last, ",")
    return _string_bytes(line)


class ResultsWriter:
    """The one canonical text form of results (the bytes `runs export` must reproduce), written
    chunk by chunk (`encode`): `aggregate` streams a profile run by run instead of holding it
    whole. `target` is a path, a binary file or a text file (standard output).

    `sha256` is the digest of the bytes written: recorded in the report (`results_sha256`), it
    tells an upload that finds the same bytes that every cell is canonical, with no cell read
    as text to check it."""

    def __init__(self, target: str | Path | IO[str] | IO[bytes]) -> None:
        self._own = isinstance(target, (str, Path))
        self._file: Any = (
            open(open_file(Path(target), _NEW, 0o644), "wb")  # noqa: SIM115
            if isinstance(target, (str, Path))
            else target
        )
        self._text = isinstance(self._file, io.TextIOBase)
        self._digest = hashlib.sha256()
        self._put(HEADER)

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    def _put(self, data: bytes) -> None:
        self._digest.update(data)
        self._file.write(data.decode() if self._text else data)

    def write(self, table) -> None:
        self._put(encode(table))

    def close(self) -> None:
        if self._own:
            self._file.close()

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def decoded(table):
    """`table` with its dictionary columns as plain ones: a dictionary may repeat a text (two
    events of one name), pandas categories may not ("Categorical categories must be unique")."""
    import pyarrow as pa

    columns = [
        c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns
    ]
    return pa.table(columns, names=table.column_names)


def _quoted_csv(table) -> bytes:
    """A chunk in the same text form through pandas, which quotes fields as the csv module does."""
    out = normalize(decoded(table).to_pandas())
    for name in WHOLE_AS_INT:
        out[name] = [
            # tolist(): Python floats, whose repr is the number (numpy 2's repr is np.float64(...))
            _number_text(v)
            for v in out[name].to_numpy(dtype="float64", na_value=float("nan")).tolist()
        ]
    return out.to_csv(index=False, header=False, lineterminator="\n").encode()


def write_csv(frame: pd.DataFrame, path: str | Path | IO[str]) -> str:
    """Write a results frame in the canonical text form (see `ResultsWriter`); returns the
    sha256 of the bytes written."""
    import pyarrow as pa

    table = pa.Table.from_pandas(normalize(frame), preserve_index=False)
    with ResultsWriter(path) as writer:
        for start in range(0, table.num_rows, _SLICE):  # a text chunk stays under 2 GiB
            writer.write(table.slice(start, _SLICE))
    return writer.sha256


_TAIL_BYTES = 1 << 16


def check_whole(path: str | Path) -> None:
    """ValueError when the file's last line is cut short: fewer fields than the header, or,
    in a file of autoprof's columns, no line end after it (a disk filled, a copy cut). pandas
    reads such a line with its missing fields empty, and a wrong count went unnoticed (issue
    #38, point 9); every reader of a results file checks this first, so all refuse it alike."""
    with open(path, "rb") as file:
        header = next(csv.reader([file.readline().decode("utf-8", "replace")]), [])
        size = file.seek(0, os.SEEK_END)
        file.seek(max(0, size - _TAIL_BYTES))
        tail = file.read()
    if size == 0:
        return  # empty: its readers say so
    if not tail.endswith(b"\n") and set(EXTRA_COLUMNS) <= set(header):
        # autoprof ends every line (autoperf's own files may lack the last line's end)
        raise ValueError("its last line is cut short (no line end): the file is truncated")
    last = tail.rstrip(b"\r\n").rsplit(b"\n", 1)[-1].rstrip(b"\r").decode("utf-8", "replace")
    fields = next(csv.reader([last]), [])
    if header and fields != header and len(fields) != len(header):
        raise ValueError(
            f"its last line has {len(fields)} of {len(header)} fields: the file is truncated"
        )


def read_csv(
    path: str | Path, columns: list[str] | None = None, categorical: bool = False
) -> pd.DataFrame:
    """Read a `results.csv` written by autoprof (or autoperf: the extra columns may be absent).

    `columns` reads only those columns (the rest of the file is skipped, which is much faster);
    `categorical` reads the text columns as pandas categories: millions of rows share a few
    hundred event names, and grouping by category codes is what keeps analyses fast.
    """
    import pandas as pd

    check_whole(path)
    wanted = COLUMNS if columns is None else [c for c in COLUMNS if c in columns]
    text = "category" if categorical else "string"
    frame = pd.read_csv(
        path,
        usecols=lambda name: name in wanted,
        dtype={k: text if v == "string" else v for k, v in DTYPES.items()},
        keep_default_na=False,
        na_values={c: [""] for c in COLUMNS},
    )
    for name in EXTRA_COLUMNS:
        if name in wanted and name not in frame.columns:
            frame[name] = pd.Series(None, index=frame.index, dtype=DTYPES[name])
    return frame


CHUNK_BYTES = 1 << 20  # bytes of a results file read at a time by `read_chunks` (~12,000 rows)


def arrow_types() -> dict[str, Any]:
    """The pyarrow type of each result column (DTYPES' counterparts)."""
    import pyarrow as pa

    kinds = {"string": pa.string(), "float64": pa.float64(), "Int64": pa.int64()}
    return {name: kinds[dtype] for name, dtype in DTYPES.items()}


def read_chunks(
    path: str | Path, block_size: int | None = None, check_cells: bool = True
) -> ResultsChunks:
    """The rows of a results file as pyarrow tables of every result column (`arrow_types`; a
    column autoperf's files lack is all null), `block_size` bytes (CHUNK_BYTES) at a time: memory
    stays that of a block, whatever the file's size. The same values as `read_csv` (only an
    empty field is missing); text columns come dictionary-encoded (a run has few names).
    `check_cells`: say afterwards whether every cell is canonical (`ResultsChunks`); without
    it, every number is read as a number at once, twice as fast, and nothing is said (the
    caller knows by other means: the digest `ResultsWriter` recorded).
    Raises ValueError (with the reason) for a file that is not one: a header without
    autoperf's columns at once, a malformed line when its block is read."""
    with open(path, newline="") as file:
        header = next(csv.reader([file.readline()]), [])
    missing = [c for c in AUTOPERF_COLUMNS if c not in header]
    if missing:
        raise ValueError(f"results frame lacks columns: {', '.join(missing)}")
    check_whole(path)
    return ResultsChunks(path, block_size or CHUNK_BYTES, check_cells)


class ResultsChunks:
    """A results file's chunks (see `read_chunks`), and, once they are all read, whether every
    cell is written as `encode` writes its value (`cells_canonical`; None when not checked):
    then the file is the canonical text of its rows when its lines are too (`CanonicalLines`),
    and a store can keep it as the run's export instead of writing it again from the rows.

    Checked, each chunk is read as text (dictionary-encoded, TIME and SAMPLE_VALUE aside) and
    its numbers parsed here: a column's distinct texts are parsed and written back once each."""

    def __init__(self, path: str | Path, block_size: int, check_cells: bool = True) -> None:
        self.path, self.block_size = path, block_size
        self.cells_canonical: bool | None = True if check_cells else None

    def __iter__(self) -> Iterator[Any]:
        import pyarrow as pa

        check = self.cells_canonical is not None
        try:
            for table in _text_blocks(self.path, self.block_size, numbers=not check):
                if not check:  # read typed already
                    yield table
                    continue
                typed, canonical = _typed(table)
                self.cells_canonical = self.cells_canonical and canonical
                yield typed
        except pa.ArrowInvalid as err:
            raise ValueError(str(err).strip().splitlines()[0]) from None


_DISTINCT = ("TIME", "SAMPLE_VALUE")


def _text_blocks(path: str | Path, block_size: int, numbers: bool = False) -> Iterator[Any]:
    """Blocks of the file, every column as text; or, with `numbers`, the numbers read as
    numbers at once (their texts, made only to be checked, are most of the reading's work)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    text = pa.dictionary(pa.int32(), pa.string())
    if numbers:
        types = {n: text if t == pa.string() else t for n, t in arrow_types().items()}
    else:
        # counts and times are mostly distinct: plain text; the other columns have few
        # values, each parsed and checked once
        types = {n: pa.string() if n in _DISTINCT else text for n in COLUMNS}
    reader = pcsv.open_csv(
        path,
        # one thread: the caller's work on a chunk overlaps with the next one's reading anyway,
        # and parallel parsing holds several blocks (and their columns) at once
        read_options=pcsv.ReadOptions(block_size=block_size, use_threads=False),
        convert_options=pcsv.ConvertOptions(
            column_types=types,
            null_values=[""],
            strings_can_be_null=True,
            include_columns=COLUMNS,
            include_missing_columns=True,
        ),
    )
    for batch in reader:
        yield pa.Table.from_batches([batch])


def _typed(table) -> tuple[Any, bool]:
    """A chunk read as text with its numbers parsed (`arrow_types`), and whether each number's
    text is the one `encode` writes for it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    types = arrow_types()
    canonical = True
    columns = []
    for name in COLUMNS:
        column = table.column(name).combine_chunks()
        if types[name] == pa.string():
            columns.append(column)
            continue
        texts = column.dictionary if pa.types.is_dictionary(column.type) else column
        values = pc.cast(texts, types[name])
        canonical = canonical and _written_as(values, texts, name)
        columns.append(values.take(column.indices) if texts is not column else values)
    return pa.table(columns, names=COLUMNS), canonical


def _written_as(values, texts, name: str) -> bool:
    """Whether `texts` are the canonical text of `values` (a missing value: no text)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if DTYPES[name] != "float64":
        written = pc.cast(values, pa.string())
        return (
            pc.all(pc.equal(pc.fill_null(written, ""), pc.fill_null(texts, ""))).as_py()
            is not False
        )
    # first pyarrow's own text of each number, one pass, which is the canonical one where
    # `_float_text` vectorizes it (whole counts, fractions between 1e-4 and 1e9; TIME's whole
    # numbers end in ".0", and -0 is 0); then `_float_text` for the numbers left
    numbers = values.to_numpy(zero_copy_only=False)
    size = np.abs(numbers)
    easy = ((size >= 1e-4) & (size < 1e9)) | ((numbers == 0) & ~np.signbit(numbers))
    if name not in WHOLE_AS_INT:
        easy &= numbers != np.floor(numbers)
    same = pc.fill_null(pc.equal(pc.cast(values, pa.string()), texts), False)
    left = ~(easy & same.to_numpy(zero_copy_only=False))
    if not left.any():
        return True
    written = _float_text(numbers[left], name in WHOLE_AS_INT)
    rest = texts.filter(pa.array(left))
    return pc.all(pc.equal(pc.fill_null(written, ""), pc.fill_null(rest, ""))).as_py() is not False


class CanonicalLines:
    """Whether a results file is, byte for byte, HEADER and then `encode`'s lines of rows whose
    cells are canonical (`ResultsChunks`): one line per row, each ended by a newline, no quoted
    field, no carriage return. Fed its header line, then its blocks as whatever reads the file
    anyway reads them (the store's compressor): the check costs no pass of its own."""

    def __init__(self, header: bytes) -> None:
        self.plain = header == HEADER
        self.lines = 0
        self.last = b"\n"

    def feed(self, block: bytes) -> None:
        if b'"' in block or b"\r" in block:
            self.plain = False
        self.lines += block.count(b"\n")
        self.last = block[-1:]

    def hold(self, rows: int) -> bool:
        """Whether the lines fed are `rows` such lines."""
        return self.plain and self.lines == rows and self.last == b"\n"
