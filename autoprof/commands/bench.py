"""`autoprof bench -- CMD [-- CMD2 ...]`: hyperfine with counters (autoprof.benchmark)."""

from __future__ import annotations

import json
import math
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from autoprof.catalog.facts import MachineFacts
    from autoprof.perf.process import Interrupted

from autoprof.benchmark.options import BaselineOptions, GateOptions
from autoprof.commands import common
from autoprof.errors import AutoprofError
from autoprof.util import atomic


def split_commands(words: tuple[str, ...]) -> list[list[str]]:
    """`CMD ARGS -- CMD2 ARGS`: the commands between the `--` separators."""
    commands: list[list[str]] = [[]]
    for word in words:
        if word == "--":
            commands.append([])
        else:
            commands[-1].append(word)
    commands = [c for c in commands if c]
    if not commands:
        raise AutoprofError("no command to benchmark: autoprof bench [OPTIONS] -- CMD [-- CMD2]")
    return commands


def _clean(value):
    """JSON has no NaN: null instead."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def report(result, summaries, ratios) -> dict:
    """The JSON export: the measurements, then each command's summary and ratio to the first."""
    from dataclasses import asdict

    from autoprof.benchmark import measure

    data = measure.to_json(result)
    for i, command in enumerate(data["commands"]):
        command["summary"] = [asdict(s) for s in summaries[i]]
        command["ratio_to_first"] = [asdict(r) for r in ratios[i - 1]] if i else None
    return _clean(data)


def _run_on(pin: str | None, core_type: str | None) -> None:
    """--pin, --core-type: the benchmark's processes (autoprof, perf and the commands, which
    inherit it) run on those CPUs only, as `profile` runs its command (`run.pinning`)."""
    import os

    from autoprof.run import pinning
    from autoprof.run.options import ProfileOptions

    options = ProfileOptions(pin=pin, core_type=core_type).check()
    cpus = pinning.workload_cpus(options)
    if cpus is not None:
        os.sched_setaffinity(0, cpus)


@click.command("bench")
@click.option(
    "-n", "--runs", default=10, show_default=True, type=click.IntRange(2), help="Timed runs."
)
@click.option(
    "--warmup", default=2, show_default=True, type=click.IntRange(0), help="Untimed runs first."
)
@click.option(
    "-e",
    "--event",
    "event_names",
    multiple=True,
    help="Count this event in every repetition (repeatable; they must fit one run). "
    "Default: task-clock, context-switches, cpu-migrations, page-faults.",
)
@click.option(
    "--events", "events_file", type=click.Path(dir_okay=False), help="File, one event a line."
)
@click.option("--prepare", metavar="CMD", help="Shell command run before every repetition.")
@click.option("--timeout", type=click.FloatRange(0, min_open=True), help="Seconds per run.")
@click.option(
    "--startup-correction/--no-startup-correction",
    default=True,
    show_default=True,
    help="Subtract an empty program's wall time (process start and exit) from every wall time.",
)
@click.option(
    "--events-dir",
    type=click.Path(file_okay=False),
    help="A folder of event data to use instead of the one shipped for this CPU (Intel's "
    "perfmon, perf's AMD or Arm JSON).",
)
@common.reserve_option
@click.option(
    "--export-json",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=common.existing_parent,
    help="Write repetitions, summaries and ratios as JSON.",
)
@click.option(
    "--export-csv",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=common.existing_parent,
    help="Write one row per command, repetition and metric.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    callback=common.existing_parent,
    help="Keep the benchmark in this folder (then `autoprof upload` stores it).",
)
@common.excel_safe_option
@common.where_flags
@common.declared_flags(BaselineOptions)
@common.declared_flags(GateOptions)
@common.fail_if_option
@click.option(
    "--tag", "tags", multiple=True, metavar="KEY=VALUE", help="With --save store: label the run."
)
@common.store_option
@click.argument(
    "words", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- CMD [-- CMD2 ...]"
)
def bench(
    runs, warmup, event_names, events_file, prepare, timeout, startup_correction, events_dir,
    reserve, export_json, export_csv, output, excel_safe, pin, core_type, emulate, gates, tags,
    store_text, words, **declared,
) -> None:  # fmt: skip
    """Time commands and count their events, many runs each.

    Run each COMMAND (separated by --) many times under perf stat, interleaved: times and
    counts per run, mean +- sd, outliers, and the ratio of each command to the first. With
    --fail-if, a regression gate for CI against --baseline or, with two commands, of the
    second against the first: exit 1 when a gate fails, 0 when all hold."""
    from autoprof.analysis import bench as stats
    from autoprof.analysis.renderers.bench import BenchRenderer, BenchTables
    from autoprof.benchmark import measure
    from autoprof.run import planning
    from autoprof.run.options import EventSelection
    from autoprof.run.request import Request
    from autoprof.util.renderer import write

    commands = split_commands(words)
    _run_on(pin, core_type)
    if output is not None and (output / "manifest.json").exists():
        raise AutoprofError(f"{output} already holds a profile or benchmark; use another -o")
    counting = common.declared_values(BaselineOptions, declared)
    gating = common.declared_values(GateOptions, declared)
    parsed_gates, baseline = _gates(counting.baseline, gates, commands, store_text)
    labels = common.key_values(tags, "--tag")
    named = common.event_names(event_names, events_file)
    if emulate:
        planned = None
        events = measure.emulated_events(commands, named)
    else:
        request = Request(
            events=named or measure.DEFAULT_EVENTS,
            selection=EventSelection(reserve=reserve),
            events_dir=events_dir,
        )
        planned = planning.plan(request.check(), common.note)
        events = measure.one_run_events(planned)
    options = measure.BenchOptions(
        runs, warmup, prepare, timeout, startup_correction, emulate=emulate
    )
    console = common.console(stderr=True)

    def stopped(stop: Interrupted) -> str:
        """What a signal stopped: the repetitions finished before it, kept where the exports
        go (none when it came before the benchmark began)."""
        if not isinstance(stop, measure.BenchInterrupted):
            return f"interrupted by {stop.name} after 0 timed repetitions"
        document = dict(measure.to_json(stop.partial), interrupted=stop.name)
        kept = _export(stop.partial, document, export_json, export_csv, excel_safe)
        return f"interrupted by {stop.name} after {stop.repetitions} timed repetitions" + (
            f" (kept in {', '.join(map(str, kept))})" if kept else ""
        )

    def work(progress: common.Progress) -> measure.BenchResult:
        return measure.bench(commands, events, options, lambda i, *_: progress.advance(i))

    bars = [(" ".join(c)[:40], warmup + runs) for c in commands]
    result = common.with_progress(bars, work, stopped)
    summaries, ratios = stats.summaries(result), stats.ratios(result)
    write(BenchRenderer(common.console()).render(BenchTables(result, summaries, ratios)), None)
    if startup_correction:
        console.print(
            f"wall times exclude a process's start and exit: {result.startup_s * 1000:.2f} ms "
            "(median wall time of `true`; --no-startup-correction keeps it)"
        )
    if result.lost_runs:
        console.print(
            f"perf lost {result.lost_runs} run(s) (the command ended before perf waited for it: "
            "no exit status, no rusage); each ran again"
        )
    for i, _ in enumerate(result.commands):
        slowdown = result.slowdown(i)
        if slowdown is not None:
            console.print(
                f"{' '.join(result.commands[i].command)[:60]}: counted under {result.emulator} "
                f"(emulated counts), {slowdown:.1f}x slower than natively"
            )
    if result.energy_note:
        console.print(f"note: {result.energy_note}")
    for warning in stats.warnings(result):
        console.print(f"[yellow]warning:[/] {warning}")
    document = report(result, summaries, ratios)
    facts: MachineFacts | None = None
    if output is not None or counting.save is not None:
        from autoprof.catalog import machine

        facts = machine.read_facts(planned.catalog if planned else None)
    if output is not None:
        from autoprof.benchmark import folder

        assert facts is not None
        manifest = folder.write(output, result, facts, document)
        console.print(f"benchmark {manifest.id} in {output}/; store it: autoprof upload {output}")
    for path in _export(result, document, export_json, export_csv, excel_safe):
        console.print(f"wrote {path}")
    _save(counting.save, result, document, facts, store_text, labels, output, console)
    if parsed_gates and _gated(parsed_gates, baseline, result, commands, gating, console):
        sys.exit(1)


def _gated(gates, baseline, result, commands, gating, console) -> bool:
    """The gates reported: the command against the --baseline, or the second command against
    the first (interleaved in this bench: paired). Whether one failed."""
    from autoprof.analysis import gate

    if baseline is not None:
        (samples, name), paired = baseline, False
    else:
        samples, name, paired = gate.bench_samples(result, 0), shlex.join(commands[0]), True
    now = gate.bench_samples(result, len(commands) - 1)
    names = (name, shlex.join(commands[-1]))
    found = gate.check(gates, samples, now, names, gating.confidence, paired)
    common.report_gates(found, gating, console)
    return found.failed


def _gates(ref, texts, commands, store_text):
    """The --fail-if gates and the --baseline's samples and name, checked before anything runs
    (bad input: exit 2)."""
    from autoprof.analysis import gate

    if ref is not None and not texts:
        raise AutoprofError("--baseline needs --fail-if: a baseline is compared by gates")
    if texts and ref is None and len(commands) != 2:
        raise AutoprofError(
            "--fail-if compares with a baseline: --baseline FILE, or two commands in one "
            f"bench (-- BASE -- NEW; {len(commands)} were given)"
        )
    if ref is not None and len(commands) != 1:
        raise AutoprofError(f"--baseline gates one command; {len(commands)} were given")
    gates = [gate.parse(t) for t in texts]
    if ref is None:
        return gates, None
    from autoprof.store import baseline

    return gates, baseline.samples(ref, store_text)


def _save(target, result, document, facts, store_text, labels, output, console) -> None:
    """--save: the benchmark as a baseline, in a file or the store."""
    if target is None:
        return
    if len(result.commands) != 1:
        raise AutoprofError(f"--save keeps a baseline of one command; {len(result.commands)} ran")
    from autoprof.store import baseline

    if target.startswith(baseline.PREFIX):
        if target != baseline.PREFIX:
            raise AutoprofError("--save store: takes no name: the store is --store, labels --tag")
        uuid = baseline.save(result, document, facts, store_text, labels, output)
        console.print(f"saved the baseline as stored run {uuid} (--baseline store:{uuid})")
        return
    atomic.write(Path(target), json.dumps(_clean(document), indent=1) + "\n")
    console.print(f"saved the baseline in {target}")


def _export(
    result, document: dict, json_path: Path | None, csv_path: Path | None, excel_safe: bool
):
    """Write the --export-json document and the --export-csv rows that were asked for (their
    cells made safe for spreadsheets with --excel-safe); the paths written."""
    import csv

    from autoprof.benchmark import measure
    from autoprof.util import spreadsheet

    written = []
    if json_path:
        atomic.write(json_path, json.dumps(_clean(document), indent=1) + "\n")
        written.append(json_path)
    if csv_path:
        with atomic.replacing(csv_path, text=True, newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(measure.CSV_COLUMNS)
            rows = measure.rows(result)
            writer.writerows(map(spreadsheet.row, rows) if excel_safe else rows)
        written.append(csv_path)
    return written
