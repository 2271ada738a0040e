"""`autoprof runs show`'s text: one stored run (`ShownRun`: what `queries.run_details` knows
of it, with its regions or threads side by side) drawn by `RunRenderer`, so that the command
only loads it and writes the text.

pandas and SQLAlchemy are imported by the functions that need them, as the store's commands
import this module inside themselves.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autoprof.util.clock import when
from autoprof.util.renderer import Renderer

if TYPE_CHECKING:
    import pandas as pd
    from sqlalchemy import Connection

    from autoprof.results.sanity_report import Report


@dataclass
class ShownRun:
    """A stored run as `runs show` shows it."""

    details: dict[str, Any]  # queries.run_details: the run, its parts, tags and recordings
    # the series totals of its parts (summary.series_totals), when a part has regions or threads
    totals: pd.DataFrame | None = None

    @property
    def regions(self) -> bool:
        """A part counted regions (`profile --region`)."""
        return any(p["report"] and p["report"].get("regions") for p in self.details["parts"])

    @property
    def threads(self) -> bool:
        """A part counted each thread apart (`profile --per-thread`)."""
        return any(p["options"].get("per_thread") for p in self.details["parts"])


def shown_run(conn: Connection, ident: str, totals: bool = True) -> ShownRun:
    """The run `ident` names (a prefix of its id will do), with its series totals where it has
    regions or threads to set side by side and `totals` asks for them (the text does, the JSON
    does not)."""
    from autoprof.store import queries

    shown = ShownRun(queries.run_details(conn, ident))
    if totals and (shown.regions or shown.threads):
        from autoprof.store.summary import series_totals

        shown.totals = series_totals(conn, [p["part_id"] for p in shown.details["parts"]])
    return shown


class RunRenderer(Renderer[ShownRun]):
    """The run's command, times, status and tags; per part its machine and a summary of its
    sanity report; its regions or threads side by side; the top functions of its recordings."""

    extensions = (".txt",)

    def render(self, data: ShownRun) -> str:
        info = data.details
        parts = f"{len(info['parts'])} of {info['parts_expected']} parts"
        lines = [
            f"run        {info['id']}",
            f"command    {shlex.join(info['command'])}",  # as runs list and the web show it
            f"created    {when(info['created'])} UTC",
            f"ran        {when(info['started'])} .. {when(info['ended'])} UTC",
            f"status     {info['status']} ({parts})",
            f"rows       {info['rows']}",
            f"autoprof   {info['autoprof_version']}",
        ]
        if info["tags"]:
            lines.append("tags       " + " ".join(f"{k}={v}" for k, v in info["tags"].items()))
        for part in info["parts"]:
            lines += _part(part)
        lines += _side_by_side(data)
        for name, rec in info["functions"].items():
            totals = ", ".join(f"{e} {n:,}" for e, n in rec["totals"].items())
            lines.append(f"recording {name}: {totals}")
            for f in rec["functions"][:5]:
                shares = "  ".join(f"{e} {f[e]['percent']:6.2f}%" for e in rec["events"])
                lines.append(f"  {shares}  {f['symbol']} ({f['dso']})")
        return "".join(f"{line}\n" for line in lines)


def _part(part: dict[str, Any]) -> list[str]:
    """One part: when it came, its machine, its sanity report in one line (and its regions)."""
    from autoprof.results.sanity_report import Report

    m = part["machine"]
    lines = [
        f"part {part['part']}: {part['rows']} rows, uploaded {when(part['uploaded'])} UTC",
        f"  machine  {m['hostname']}: {m['cpu_id']} ({m['model_name']})",
        f"           kernel {m['kernel']}, perf {m['perf_version']}, "
        f"SMT {'on' if m['smt'] else 'off'}, "
        f"NMI watchdog {'on' if m['nmi_watchdog'] else 'off'}",
    ]
    if part["report"] is None:
        return [*lines, "  report   none (aggregate wrote no report.json)"]
    report = Report.from_json(part["report"], f"part {part['part']}'s report")
    return lines + _report(report)


def _report(report: Report) -> list[str]:
    runs, events = report.runs, report.events
    lines = [
        f"  report   {report.events_measured} events measured; runs "
        f"{runs.finished}/{'?' if runs.expected is None else runs.expected} finished, "
        f"{len(runs.failed)} failed, {len(runs.broken)} broken, {len(runs.missing)} missing; "
        f"{len(events.multiplexed)} multiplexed, "
        f"{len(events.not_counted)} not counted, "
        f"{len(events.not_supported)} not supported, "
        f"{len(report.broken_files)} broken files"
    ]
    if report.regions:
        entered = ", ".join(f"{r.name} ({r.entries} entries)" for r in report.regions)
        never = [r.name for r in report.regions if r.never_entered]
        lines.append(
            f"  regions  {entered}; never entered: {', '.join(never) or 'none'}; "
            f"{len(report.region_problems)} problems"
        )
    return lines


def _side_by_side(data: ShownRun) -> list[str]:
    """The regions (whole program first) and the threads, each a column of totals per
    execution, as `analyze stats` sets them side by side."""
    if data.totals is None:
        return []
    from autoprof.analysis import data as frames

    lines = []
    for shown, what, sides in (
        (data.regions, "regions", frames.region_totals),
        (data.threads, "threads", frames.thread_totals),
    ):
        if shown:
            lines.append(f"{what} side by side (total per execution):")
            lines.append(sides(data.totals).to_string())
    return lines
