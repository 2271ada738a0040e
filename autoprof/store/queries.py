"""Read and delete runs: list with filters, show one, delete it (`export` writes one back).

Runs are named by their uuid or any unambiguous prefix of it (at least 4 characters), as git
names commits.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Row, delete, func, or_, select
from sqlalchemy.orm import Session

from autoprof.errors import AutoprofError
from autoprof.store.functions import read_functions, summary
from autoprof.store.models import (
    Machine,
    Measurement,
    Run,
    RunPart,
    Tag,
)
from autoprof.store.tables import measurement_partition
from autoprof.util.clock import naive_utc

MIN_PREFIX = 4
_RELATIVE = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@dataclass
class RunSummary:
    """One line of `runs list`."""

    uuid: str
    created: dt.datetime
    command_line: str
    hosts: list[str]
    cpu_ids: list[str]
    rows: int
    status: str
    parts_stored: int
    parts_expected: int
    tags: dict[str, str] = field(default_factory=dict)
    kind: str = "profile"


def parse_since(text: str, now: dt.datetime) -> dt.datetime:
    """`--since`: an ISO date or datetime (UTC unless it says otherwise), or 30m / 12h / 7d / 2w
    before `now` (naive UTC)."""
    text = text.strip()
    if m := _RELATIVE.match(text):
        return now - dt.timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        raise AutoprofError(
            f"--since {text!r}: expected an ISO date (2024-06-01), datetime or 30m/12h/7d/2w"
        ) from None
    return naive_utc(stamp)


def find_run(conn: Connection, ident: str) -> Row[Any]:
    """The run named by `ident` (uuid or unambiguous prefix)."""
    ident = ident.strip().lower()
    if len(ident) < MIN_PREFIX:
        raise AutoprofError(f"run id {ident!r} is too short: give at least {MIN_PREFIX} characters")
    escaped = ident.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    found = conn.execute(
        select(Run).where(Run.uuid.like(f"{escaped}%", escape="\\")).limit(11)
    ).all()
    if not found:
        raise AutoprofError(f"no run {ident} in the store (see `autoprof runs list`)")
    if len(found) > 1:
        names = ", ".join(r.uuid for r in found[:10])
        raise AutoprofError(f"run id {ident} is ambiguous: {names}")
    return found[0]


@dataclass(frozen=True)
class RunFilter:
    """Which runs `list_runs` and `count_runs` return: every filter given must hold.
    `machine` matches hostname, CPU id or model name (substring, any case); `command` a
    substring of the command line; `text` the command line, a uuid prefix or a tag value;
    `since`/`until` bound the creation time; `kind` is profile or bench."""

    machine: str | None = None
    command: str | None = None
    since: dt.datetime | None = None
    tags: dict[str, str] | None = None
    text: str | None = None
    until: dt.datetime | None = None
    kind: str | None = None

    def where(self, query):
        """`query` over Run restricted by these filters."""
        if self.kind:
            query = query.where(Run.kind == self.kind)
        if self.machine:
            text = self.machine.lower()  # % and _ match themselves (autoescape)
            columns = (Machine.hostname, Machine.cpu_id, Machine.model_name)
            query = query.where(
                Run.id.in_(
                    select(RunPart.run_id)
                    .join(Machine)
                    .where(or_(*(func.lower(c).contains(text, autoescape=True) for c in columns)))
                )
            )
        if self.command:
            query = query.where(Run.command_line.contains(self.command, autoescape=True))
        if self.text:
            text = self.text
            query = query.where(
                or_(
                    Run.command_line.contains(text, autoescape=True),
                    Run.uuid.startswith(text.lower(), autoescape=True),
                    Run.id.in_(select(Tag.run_id).where(Tag.value.contains(text, autoescape=True))),
                )
            )
        if self.since:
            query = query.where(Run.created >= self.since)
        if self.until:
            query = query.where(Run.created < self.until)
        for key, value in (self.tags or {}).items():
            query = query.where(
                Run.id.in_(select(Tag.run_id).where(Tag.key == key, Tag.value == value))
            )
        return query


def count_runs(conn: Connection, filters: RunFilter = RunFilter()) -> int:
    """How many runs `list_runs` with the same filters returns (for paging)."""
    return conn.scalar(filters.where(select(func.count()).select_from(Run))) or 0


def list_runs(
    conn: Connection,
    filters: RunFilter = RunFilter(),
    *,
    newest_first: bool = False,
    offset: int = 0,
    limit: int | None = None,
) -> list[RunSummary]:
    """Runs matching `filters`, oldest first (or newest first), optionally one page."""
    order = (Run.created.desc(), Run.id.desc()) if newest_first else (Run.created, Run.id)
    query = filters.where(select(Run).order_by(*order))
    if offset or limit is not None:
        query = query.offset(offset).limit(limit)
    runs = conn.execute(query).all()
    ids = [r.id for r in runs]
    machines: dict[int, list[tuple[str, str]]] = {i: [] for i in ids}
    parts = {i: 0 for i in ids}
    tag_map: dict[int, dict[str, str]] = {i: {} for i in ids}
    if ids:
        for run_id, host, cpu in conn.execute(
            select(RunPart.run_id, Machine.hostname, Machine.cpu_id)
            .join(Machine)
            .where(RunPart.run_id.in_(ids))
            .order_by(RunPart.run_id, RunPart.part)
        ):
            machines[run_id].append((host, cpu))
            parts[run_id] += 1
        for run_id, key, value in conn.execute(
            select(Tag.run_id, Tag.key, Tag.value).where(Tag.run_id.in_(ids)).order_by(Tag.key)
        ):
            tag_map[run_id][key] = value
    return [
        RunSummary(
            uuid=r.uuid,
            created=r.created,
            command_line=r.command_line,
            hosts=list(dict.fromkeys(h for h, _ in machines[r.id])),
            cpu_ids=list(dict.fromkeys(c for _, c in machines[r.id])),
            rows=r.rows,
            status=r.status,
            parts_stored=parts[r.id],
            parts_expected=r.parts_expected,
            tags=tag_map[r.id],
            kind=r.kind,
        )
        for r in runs
    ]


def run_details(conn: Connection, ident: str) -> dict:
    """Everything the store knows about one run, as plain data (for `runs show`)."""
    run = find_run(conn, ident)
    with Session(conn) as session:
        parts = session.execute(
            select(RunPart, Machine)
            .join(Machine)
            .where(RunPart.run_id == run.id)
            .order_by(RunPart.part)
        ).all()
    tags = dict(conn.execute(select(Tag.key, Tag.value).where(Tag.run_id == run.id)).all())
    functions = summary(read_functions(conn, run.id))
    return {
        "id": run.uuid,
        "command": run.command,
        "created": run.created,
        "started": run.started,
        "ended": run.ended,
        "autoprof_version": run.autoprof_version,
        "status": run.status,
        "rows": run.rows,
        "parts_expected": run.parts_expected,
        "tags": tags,
        "parts": [
            {
                "part": p.part,
                "part_id": p.id,
                "rows": p.rows,
                "uploaded": p.uploaded,
                "machine": {
                    "hostname": m.hostname,
                    "cpu_id": m.cpu_id,
                    "model_name": m.model_name,
                    "kernel": m.kernel,
                    "perf_version": m.perf_version,
                    "smt": m.smt,
                    "nmi_watchdog": m.nmi_watchdog,
                    "perf_event_paranoid": m.perf_event_paranoid,
                    "counters": m.counters,
                },
                "options": p.manifest.get("options", {}),
                "report": p.report,
                "records": len(p.records),
            }
            for p, m in parts
        ],
        "functions": functions,  # per sampled recording: events, totals, top functions
    }


def export_functions(conn: Connection, ident: str, recording: str | None = None) -> str:
    """A recording's per-function rows, as `autoprof report --csv` writes them."""
    from autoprof.functions.render import CsvRenderer

    run = find_run(conn, ident)
    tables = read_functions(conn, run.id)
    if not tables:
        raise AutoprofError(f"run {run.uuid} has no per-function rows (no recording was uploaded)")
    if recording is None and len(tables) > 1:
        names = ", ".join(tables)
        raise AutoprofError(f"run {run.uuid} holds recordings {names}: choose one (--recording)")
    name = recording if recording is not None else next(iter(tables))
    if name not in tables:
        raise AutoprofError(f"run {run.uuid} has no recording {name!r} ({', '.join(tables)})")
    return CsvRenderer().render(tables[name])


def delete_run(conn: Connection, ident: str) -> tuple[str, int]:
    """Delete a run with its parts, tags and measurements; returns (uuid, rows deleted)."""
    run = find_run(conn, ident)
    parts = conn.scalars(select(RunPart.id).where(RunPart.run_id == run.id)).all()
    if conn.dialect.name == "postgresql":  # each part's rows are a table of its own
        for part_id in parts:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {measurement_partition(part_id)}")
    else:
        conn.execute(delete(Measurement).where(Measurement.part_id.in_(parts)))
    conn.execute(delete(Run).where(Run.id == run.id))  # cascades to parts, series, tags
    return run.uuid, run.rows
