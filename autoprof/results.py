"""The `results.csv` contract: long format, one row per (event, interval, cpu/box, run, repeat).

Every layer that reads or writes results goes through this module, so that `aggregate`, the
results store's `export` and the analysis scripts agree to the byte. The first nine columns are
autoperf's, in autoperf's order, so tools written for autoperf read our files unchanged.

Columns:
  EVENT_NAME       catalog name of the event (e.g. ``INST_RETIRED.ANY``, ``task-clock``)
  INDEX            interval index within its run, 0-based (perf stat -I)
  TIME             end of the interval in seconds since the run started (perf's timestamp)
  SOCKET,CORE,CPU,NODE  location of the count; empty when the count is for the whole process
  UNIT             where it was counted: ``cpu`` for core events, the uncore box
                   (``uncore_cha_3``), or the PMU of a non-core event (``software``)
  SAMPLE_VALUE     the count; empty when perf gave no number (see STATUS)
  RUN              1-based run (group) number in the plan
  REPEAT           1-based repetition of that run (``profile --repeat``)
  PMU              the catalog PMU the event was scheduled on (``cpu``, ``breakpoint``, ...)
  VALUE_UNIT       perf's unit for the value (``msec`` for task-clock), usually empty
  PERCENT_RUNNING  percent of the interval the counter was running; < 100 means multiplexed
  STATUS           ``ok``, ``multiplexed``, ``not counted`` or ``not supported``
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

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
EXTRA_COLUMNS = ["RUN", "REPEAT", "PMU", "VALUE_UNIT", "PERCENT_RUNNING", "STATUS"]
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
}

STATUS_OK = "ok"
STATUS_MULTIPLEXED = "multiplexed"
STATUS_NOT_COUNTED = "not counted"
STATUS_NOT_SUPPORTED = "not supported"
STATUSES = (STATUS_OK, STATUS_MULTIPLEXED, STATUS_NOT_COUNTED, STATUS_NOT_SUPPORTED)


def empty_frame() -> pd.DataFrame:
    """A results frame with no rows but every column and dtype."""
    return pd.DataFrame({name: pd.Series(dtype=DTYPES[name]) for name in COLUMNS})


def normalize(frame: pd.DataFrame) -> pd.DataFrame:
    """Return `frame` with exactly the result columns, in order, with the canonical dtypes."""
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


def write_csv(frame: pd.DataFrame, path: str | Path) -> None:
    """Write results in the one canonical text form (the bytes `runs export` must reproduce).

    Counts are written as integers when they are whole (``1004``, not ``1004.0``), other floats
    with Python's shortest round-trip repr, so that reading a file and writing it again gives the
    same bytes; missing values are empty fields.
    """
    out = normalize(frame)
    for name in ("SAMPLE_VALUE", "PERCENT_RUNNING"):
        out[name] = [
            # tolist(): Python floats, whose repr is the number (numpy 2's repr is np.float64(...))
            _number_text(v)
            for v in out[name].to_numpy(dtype="float64", na_value=float("nan")).tolist()
        ]
    out.to_csv(path, index=False, lineterminator="\n")


def read_csv(
    path: str | Path, columns: list[str] | None = None, categorical: bool = False
) -> pd.DataFrame:
    """Read a `results.csv` written by autoprof (or autoperf: the extra columns may be absent).

    `columns` reads only those columns (the rest of the file is skipped, which is much faster);
    `categorical` reads the text columns as pandas categories: millions of rows share a few
    hundred event names, and grouping by category codes is what keeps analyses fast.
    """
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
