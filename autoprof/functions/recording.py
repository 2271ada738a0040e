"""A recording (an `autoprof record` folder, a perf.data, `perf script` text, or a trace flame
graph kept with `flamegraph --trace --save`) -> its per-function Table: parsing every event's
samples, in the order the events were recorded."""

from __future__ import annotations

from pathlib import Path

from autoprof.errors import AutoprofError
from autoprof.flame import kept
from autoprof.flame.capture import read_info
from autoprof.flame.source import load, open_input, parse_notes
from autoprof.functions.table import Table, build, from_folded
from autoprof.perf.script import ParseReport, ScriptOptions, parse


def recorded_events(path: Path) -> list[str]:
    """The events of an `autoprof record` folder, in the order they were asked for."""
    try:
        return list(read_info(path).options["events"])
    except (OSError, ValueError, KeyError, TypeError):
        return []


def read_table(path: Path, by: str = "symbol", sort: str | None = None) -> tuple[Table, list[str]]:
    """The per-function table of a recording, and the notes reading it left."""
    if kept.is_kept(path):
        folded = load(path)
        return from_folded(folded, by, sort), folded.notes
    report = ParseReport()
    with open_input(path) as source:
        if source.folded:
            raise AutoprofError(f"{path}: folded stacks carry no events; give perf.data or text")
        samples = parse(source.lines, report, ScriptOptions(every_event=True))
        table = build(samples, by, sort, recorded_events(path))
    return table, source.notes + parse_notes(report)
