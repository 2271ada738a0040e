"""The store's schema (SQLAlchemy 2 typed models); Alembic migrations in `migrations/` create it.

A *run* is one logical profile, keyed by the uuid of its manifest. It arrives in one or more
*parts* (`profile` makes one; a distributed `--split N` profile makes N, one per machine), each
uploaded atomically with its measurements, its own manifest, sanity report and run records; the
run is ``complete`` once every part is present. A *machine* row is shared by every part measured
on identical hardware and software: the same values in its columns, hence the same fingerprint.

The rows of `results.csv` are stored losslessly (doubles for floats, nullable big integers for
integers, text for strings) and split in two: `series` holds what is fixed along a run's
intervals (event, location, plan run, repeat), `measurement` one narrow row per interval, with
`seq` (the row's position within its part) so that `runs export` rebuilds the original order.
Narrow rows are what makes the bulk load fast.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from autoprof.store.tables import KIND_PROFILE


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: JSON,
        list[Any]: JSON,
        str: Text,
        int: Integer,
        float: Double,
    }


class Machine(Base):
    __tablename__ = "machine"

    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)  # machine_fingerprint
    cpu_id: Mapped[str] = mapped_column(index=True)
    model_name: Mapped[str]
    hostname: Mapped[str] = mapped_column(index=True)
    kernel: Mapped[str]
    perf_version: Mapped[str]
    smt: Mapped[bool]
    nmi_watchdog: Mapped[bool]
    perf_event_paranoid: Mapped[int | None]
    counters: Mapped[dict[str, Any]]  # per catalog PMU: {"generic": n, "fixed": m}


class Run(Base):
    __tablename__ = "run"

    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    kind: Mapped[str] = mapped_column(String(16), index=True, server_default=KIND_PROFILE)
    command: Mapped[list[Any]]  # argv, as in the manifest
    command_line: Mapped[str]  # shlex-joined argv, for display and --command filters
    created: Mapped[dt.datetime] = mapped_column(index=True)  # UTC, when the profile started
    started: Mapped[dt.datetime | None]  # UTC, first perf run's start over all stored parts
    ended: Mapped[dt.datetime | None]
    autoprof_version: Mapped[str]
    parts_expected: Mapped[int]
    status: Mapped[str] = mapped_column(String(16))  # RUN_COMPLETE / RUN_INCOMPLETE
    rows: Mapped[int] = mapped_column(BigInteger)  # measurements over all stored parts
    uploaded: Mapped[dt.datetime]  # UTC, last part stored

    parts: Mapped[list[RunPart]] = relationship(
        back_populates="run", order_by="RunPart.part", passive_deletes=True
    )
    tags: Mapped[list[Tag]] = relationship(order_by="Tag.key", passive_deletes=True)


class RunPart(Base):
    __tablename__ = "run_part"
    __table_args__ = (UniqueConstraint("run_id", "part"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    part: Mapped[int]  # 1-based
    machine_id: Mapped[int] = mapped_column(ForeignKey("machine.id"), index=True)
    manifest: Mapped[dict[str, Any]]  # manifest.json of this part, verbatim
    report: Mapped[dict[str, Any] | None]  # report.json (the sanity report), verbatim
    records: Mapped[list[Any]]  # run.json of every (run, repeat) folder of this part
    rows: Mapped[int] = mapped_column(BigInteger)
    uploaded: Mapped[dt.datetime]

    run: Mapped[Run] = relationship(back_populates="parts")
    machine: Mapped[Machine] = relationship()


class Tag(Base):
    __tablename__ = "run_tag"
    __table_args__ = (Index("ix_run_tag_key_value", "key", "value"),)

    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(primary_key=True)
    value: Mapped[str]


class Series(Base):
    """What stays fixed along a run's intervals: event, location, plan run and repeat."""

    __tablename__ = "series"

    part_id: Mapped[int] = mapped_column(
        ForeignKey("run_part.id", ondelete="CASCADE"), primary_key=True
    )
    number: Mapped[int] = mapped_column(primary_key=True)  # 0-based within its part
    event_name: Mapped[str | None]
    socket: Mapped[int | None] = mapped_column(BigInteger)
    core: Mapped[int | None] = mapped_column(BigInteger)
    cpu: Mapped[int | None] = mapped_column(BigInteger)
    node: Mapped[int | None] = mapped_column(BigInteger)
    unit: Mapped[str | None]
    plan_run: Mapped[int | None] = mapped_column(BigInteger)
    repeat: Mapped[int | None] = mapped_column(BigInteger)
    pmu: Mapped[str | None]
    value_unit: Mapped[str | None]
    region: Mapped[str | None]  # the named region the series counts (None: whole program)


class Measurement(Base):
    """One row of results.csv: a series' value in one interval.

    No foreign key to `run_part`/`series` on purpose: a per-row constraint check halves the bulk
    load rate. Integrity comes from the one writer (`upload`, one transaction per part) and the
    one deleter (`queries.delete_run`, which removes a run's measurements with it).

    (part_id, seq) is the key. On SQLite the table is that key's b-tree (WITHOUT ROWID): rows
    are stored in their order, and a part's rows are read in order without a second index. On
    PostgreSQL it is no constraint: the table is partitioned by part (migration 0009), each
    part's rows a table of their own (`measurement_partition`) with a BRIN index on seq built once
    they are in: a query for a part reads its table alone, and exports sort a window of seq at
    a time. An index kept up row by row (a b-tree, migration 0006; a BRIN on (part_id, seq),
    0009) made the bulk load 1.5-1.8x slower.
    """

    __tablename__ = "measurement"
    __table_args__ = ({"sqlite_with_rowid": False, "postgresql_partition_by": "LIST (part_id)"},)

    part_id: Mapped[int] = mapped_column(primary_key=True)
    seq: Mapped[int] = mapped_column(primary_key=True)  # row position within its part
    series: Mapped[int]  # Series.number within the same part
    interval_index: Mapped[int | None] = mapped_column(BigInteger)
    time: Mapped[float | None]
    sample_value: Mapped[float | None]
    percent_running: Mapped[float | None]
    status: Mapped[str | None]


class RunSummary(Base):
    """What a run's page shows first (per-event stats, the correlation matrix, each event's
    downsampled timeline), computed once from its rows by `autoprof.store.summary` and kept as
    JSON text, served as it is. Rebuilt when its `version` is not the code's, or when the run
    has gained rows since (`rows`: a part uploaded after the summary was made)."""

    __tablename__ = "run_summary"

    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(primary_key=True)  # "analysis", or "timeline:EVENT"
    version: Mapped[int]
    rows: Mapped[int] = mapped_column(BigInteger)  # Run.rows when it was made
    data: Mapped[str]  # JSON


class PartText(Base):
    """A part's results.csv lines, kept as uploaded when they are the canonical text of its
    rows (`results.csvfile.ResultsChunks`): a compressed piece of a few MiB per row, in order
    (`autoprof.store.text`). `runs export` and the web download of a one-part run send these
    pieces decompressed instead of writing the rows again. A part without them (text that was
    not canonical, or stored before migration 0007) is written from its rows."""

    __tablename__ = "part_text"

    part_id: Mapped[int] = mapped_column(
        ForeignKey("run_part.id", ondelete="CASCADE"), primary_key=True
    )
    piece: Mapped[int] = mapped_column(primary_key=True)  # 0, 1, ... in the file's order
    size: Mapped[int]  # bytes once decompressed
    data: Mapped[bytes] = mapped_column(LargeBinary)


class PartColumns(Base):
    """A one-part run's measurement columns as its summary reads them (series number, INDEX,
    TIME, SAMPLE_VALUE, PERCENT_RUNNING, rows in order), kept at upload: Arrow IPC streams with
    LZ4-compressed buffers, a piece of a few hundred thousand rows per row
    (`autoprof.store.columns`). A part without them is read from its rows."""

    __tablename__ = "part_columns"

    part_id: Mapped[int] = mapped_column(
        ForeignKey("run_part.id", ondelete="CASCADE"), primary_key=True
    )
    piece: Mapped[int] = mapped_column(primary_key=True)  # 0, 1, ... in the rows' order
    rows: Mapped[int]
    data: Mapped[bytes] = mapped_column(LargeBinary)


class FunctionRow(Base):
    """A sampled recording kept in a profile's folder (`autoprof record -o OUT/NAME`): one
    function's weight for one event, as `autoprof report` shows it (self samples by symbol).

    `row` is the function's rank in the report, `event_index` the event's position in its
    columns; a function with no sample of an event has no row for it.
    """

    __tablename__ = "function_row"

    part_id: Mapped[int] = mapped_column(
        ForeignKey("run_part.id", ondelete="CASCADE"), primary_key=True
    )
    recording: Mapped[str] = mapped_column(primary_key=True)  # the folder's name within OUT
    row: Mapped[int] = mapped_column(primary_key=True)
    event_index: Mapped[int] = mapped_column(primary_key=True)
    symbol: Mapped[str]
    dso: Mapped[str]
    event: Mapped[str]
    period: Mapped[int] = mapped_column(BigInteger)  # samples weighted by their period
    samples: Mapped[int] = mapped_column(BigInteger)
