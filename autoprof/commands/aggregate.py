"""`autoprof aggregate OUT`: a profile folder -> results.csv and report.json, and the sanity
report printed for a human (`autoprof.results.aggregate` computes; printing is done here)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from autoprof.commands.common import console
from autoprof.errors import AutoprofError
from autoprof.run import outdir

if TYPE_CHECKING:
    from autoprof.results.sanity_report import Report

# lists that make a profile's numbers less exact, not wrong: yellow, not red
WARNINGS = ("events with idle intervals", "runs retried", "events with a modifier")
SHOWN = 25  # items of a list printed; the rest are in report.json
# aggregate's status when it wrote results but skipped something (a broken run or file, an
# unreadable journal line): a script can tell it from 0 (all read) and 2 (an error)
GAPS_STATUS = 3


@click.command("aggregate")
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"results file (default OUT/{outdir.RESULTS}); the report goes to OUT/{outdir.REPORT}",
)
@click.option(
    "--exact-only",
    is_flag=True,
    help="write only rows counted 100% of the time (default: every row with a value, "
    "multiplexed ones marked in STATUS)",
)
def aggregate(out: Path, output: Path | None, exact_only: bool) -> None:
    """Turn a profile folder into results.csv and a report.

    Parses every run of the profile folder OUT into one long-format results.csv."""
    from autoprof.results import aggregate as agg
    from autoprof.results.sanity_report import not_planned
    from autoprof.run import journal

    if not out.exists():
        raise AutoprofError(f"{out}: no such folder (give the -o folder of autoprof profile)")
    result = agg.aggregate_to(out, output, str(output or outdir.RESULTS), exact_only)
    render(result.report, console())
    path = output or Path(out) / outdir.RESULTS
    click.echo(f"results: {path}")
    click.echo(f"report:  {Path(out) / outdir.REPORT}")
    if result.report.unknown_events:
        raise AutoprofError(
            f"{out}: {not_planned(result.report.unknown_events)}; their rows were left out "
            f"of {path} (an edited run.json or perf.csv?)"
        )
    if not result.usable:
        raise AutoprofError(f"nothing usable in {out}: {result.report.summary()}")
    gaps = skipped(result.report, journal.unreadable(out))
    if gaps:
        click.echo(
            f"autoprof: warning: {out}: skipped {gaps}; {path.name} holds the rest "
            f"(status {GAPS_STATUS})",
            err=True,
        )
        raise SystemExit(GAPS_STATUS)


def skipped(report: Report, journal_lines: list[int]) -> str:
    """What aggregation had to skip, in words ("" when nothing): broken runs and files (a
    perf.csv missing or cut), lines of the journal that cannot be read."""
    parts = []
    if report.runs.broken:
        first = report.runs.broken[0]
        parts.append(
            f"{_count(len(report.runs.broken), 'broken run')} (run {first.run} rep "
            f"{first.repeat}: {first.reason})"
        )
    runs = {str(outdir.run_dir(Path(), b.run, b.repeat)) for b in report.runs.broken}
    files = [b for b in report.broken_files if str(Path(b.path).parent) not in runs]
    if files:
        parts.append(f"{_count(len(files), 'broken file')} ({files[0].path}: {files[0].error})")
    if journal_lines:
        shown = ", ".join(map(str, journal_lines[:5])) + (" ..." if len(journal_lines) > 5 else "")
        parts.append(
            f"{_count(len(journal_lines), 'unreadable line')} of {outdir.JOURNAL} ({shown})"
        )
    return "; ".join(parts)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def render(report: Report, out: Any) -> None:
    """Print the sanity report on the rich console `out`: one summary table, then every list
    that is not empty."""
    from rich.table import Table

    runs, events = report.runs, report.events
    summary = Table(title="autoprof aggregate: sanity report", show_header=False)
    summary.add_row("rows", str(report.rows))
    summary.add_row("events measured", str(report.events_measured))
    expected = "?" if runs.expected is None else str(runs.expected)
    style = "green" if runs.expected is not None and runs.ok == runs.expected else "red"
    summary.add_row("runs ok", f"[{style}]{runs.ok} of {expected}[/{style}]")
    for name, items in (
        ("runs failed", runs.failed),
        ("runs broken", runs.broken),
        ("runs missing", runs.missing),
        ("runs retried", runs.retried),
        ("events multiplexed", events.multiplexed),
        ("events not counted", events.not_counted),
        ("events with idle intervals", events.idle_intervals),
        ("events not supported", events.not_supported),
        ("events with a modifier", events.modifiers),
        ("PMUs short of counters", events.too_few_counters),
        ("broken files", report.broken_files),
        ("unknown events", report.unknown_events),
        ("regions never entered", [r for r in report.regions if r.never_entered]),
        ("region problems", report.region_problems),
    ):
        style = "green" if not items else ("yellow" if name in WARNINGS else "red")
        summary.add_row(name, f"[{style}]{len(items)}[/{style}]")
    out.print(summary)
    _detail(out, "failed runs", runs.failed, ["run", "repeat", "status", "error"])
    _detail(out, "broken runs", runs.broken, ["run", "repeat", "reason"])
    _detail(out, "missing runs", runs.missing, ["run", "repeat"])
    _detail(out, "retried runs", runs.retried, ["run", "repeat", "attempt"])
    _detail(out, "multiplexed", events.multiplexed, ["event", "pmu", "min_percent_running"])
    _detail(out, "not counted", events.not_counted, ["event", "pmu", "intervals", "of"])
    _detail(out, "not supported", events.not_supported, ["event", "pmu", "reason"])
    _detail(out, "modifiers", events.modifiers, ["event", "printed", "modifier"])
    _detail(out, "broken files", report.broken_files, ["path", "error"])
    _detail(out, "regions", report.regions, ["name", "entries", "runs", "never_entered"])
    _detail(out, "region problems", report.region_problems, ["run", "repeat", "problem"])
    for shortfall in events.too_few_counters:
        out.print(f"[red]{shortfall.line()}[/red]", highlight=False)


def _detail(out: Any, title: str, items: list, keys: list[str]) -> None:
    from rich.table import Table

    if not items:
        return
    table = Table(title=f"{title} ({len(items)})")
    for k in keys:
        table.add_column(k)
    for item in items[:SHOWN]:
        table.add_row(*("" if getattr(item, k) is None else str(getattr(item, k)) for k in keys))
    if len(items) > SHOWN:
        more = f"... {len(items) - SHOWN} more (see {outdir.REPORT})"
        table.add_row(more, *[""] * (len(keys) - 1))
    out.print(table)
