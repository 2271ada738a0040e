"""`out/` -> `results.csv` (the `results.csvfile` contract) and a sanity report, run by run.

Every perf.csv is read by `autoprof.perf.stat_arrow` (pyarrow when the file is regular, the
general parser otherwise); perf's event labels are mapped back to catalog events through the
run's `run.json` EventRefs, with any modifier perf added (`task-clock:u`) recorded. One run is
in memory at a time: its rows are written and tallied (`autoprof.results.tally`), then dropped.

Nothing is trusted silently: multiplexed counts, events counted in no interval (or with no line
at all), idle intervals, events perf refused, failed and missing runs, and files that could not
be read all end up in the report (`OUT/report.json`). Rows without a value (`not counted`, `not
supported`) stay in the report and out of results.csv; `exact_only` keeps only rows counted
100% of the time. A broken file is reported and skipped; it never stops the others.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autoprof.errors import AutoprofError, NewerFormat
from autoprof.perf import stat_arrow, stat_csv, threads
from autoprof.perf.unsupported import Unsupported
from autoprof.results import csvfile, regions, rows, tally
from autoprof.results.sanity_report import (
    BrokenFile,
    BrokenRun,
    FailedRun,
    Report,
    RetriedRun,
    RunId,
    RunsSummary,
    write_report,
)
from autoprof.run import outdir
from autoprof.util.owned import own_folder
from autoprof.util.prefetch import prefetched
from autoprof.util.status import FINAL_RUN_STATUSES, RowStatus, RunStatus

MAX_PROBLEMS_PER_FILE = 20  # a garbage file should not drown the report
WRITTEN = (RowStatus.OK.code, RowStatus.MULTIPLEXED.code)  # rows with a value
EXACT = (RowStatus.OK.code,)  # --exact-only: counted 100% of the time


@dataclass
class Aggregation:
    frame: Any  # pandas DataFrame of csvfile.COLUMNS, or None when the rows went to a file
    report: Report
    lines: int = 0  # perf CSV lines read (for the benchmark)
    notes: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return self.report.usable


def aggregate(
    out: Path, results_name: str = outdir.RESULTS, exact_only: bool = False
) -> Aggregation:
    """Aggregate the profile folder `out` in memory (the frame is what results.csv would hold)."""
    import pyarrow as pa

    tables: list[Any] = []
    aggregation = _aggregate(Path(out), tables.append, results_name, exact_only)
    decoded = [csvfile.decoded(t) for t in tables]
    frame = pa.concat_tables(decoded).to_pandas() if tables else csvfile.empty_frame()
    aggregation.frame = csvfile.normalize(frame)
    return aggregation


def aggregate_to(
    out: Path, path: Path | None = None, results_name: str | None = None, exact_only: bool = False
) -> Aggregation:
    """Aggregate `out` straight into results.csv (default OUT/results.csv) and report.json,
    one run at a time: memory stays that of the largest run, whatever the profile's size."""
    out = Path(out)
    _check_profile(out)
    out = own_folder(out)  # its files are written by name
    path = Path(path) if path else out / outdir.RESULTS
    partial = path.with_name(path.name + ".partial")  # an older results.csv stays until done
    try:
        with csvfile.ResultsWriter(partial) as writer:
            aggregation = _aggregate(out, writer.write, results_name or str(path), exact_only)
        aggregation.report.results_sha256 = writer.sha256
        # the report first: on a full disk, no results.csv is left without its report
        write_report(out / outdir.REPORT, aggregation.report)
        os.replace(partial, path)
    except OSError as err:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        if err.filename in (None, str(partial)):  # the file asked for is news, not its scratch
            raise OSError(err.errno, err.strerror, str(path)) from None
        raise
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return aggregation


def write(out: Path, aggregation: Aggregation, path: Path | None = None) -> Path:
    """Write results.csv (canonical writer) and report.json; return the results path."""
    path = Path(path) if path else Path(out) / outdir.RESULTS
    aggregation.report.results_sha256 = csvfile.write_csv(aggregation.frame, path)
    write_report(Path(out) / outdir.REPORT, aggregation.report)
    return path


def _check_profile(out: Path) -> None:
    if not out.is_dir() or not ((out / outdir.MANIFEST).is_file() or (out / outdir.RUNS).is_dir()):
        raise AutoprofError(f"{out} is not a profile folder (no {outdir.MANIFEST}, no runs/)")


def _aggregate(
    out: Path, sink: Callable[[Any], None], results_name: str, exact_only: bool
) -> Aggregation:
    _check_profile(out)
    broken: list[BrokenFile] = []
    manifest = _read_manifest(out)
    topology = _topology(manifest)
    planned = manifest.event_names()
    seen = tally.Tally()
    state = _RunState()
    lines = 0
    keep = np.asarray(EXACT if exact_only else WRITTEN, np.int8)

    def emit(run: tally.RunRows) -> None:
        if planned is not None:
            run, unknown = rows.outside(run, planned)
            state.unknown.update(dict.fromkeys(unknown))
        if state.region_state is not None:
            regions.add_totals(state.totals, run)
        seen.add(run)
        written = np.isin(run.status, keep)
        seen.rows += int(written.sum())
        sink(rows.table(run, written))

    def finish(mapper: rows.RunMapper) -> None:
        """The rest of a run: its events that perf printed no line for are not counted,
        unless the run is broken (its file is at fault, not the events). The reading thread
        noted a broken run before it read on, so `state.broken` is complete for it here."""
        record = mapper.record
        if not any((b.run, b.repeat) == (record.run, record.repeat) for b in state.broken):
            emit(mapper.rest())
            if state.region_state is not None:
                table = state.region_state.run(record, state.totals)
                if table is not None:
                    seen.rows += table.num_rows
                    sink(table)
        state.totals = {}

    if manifest.options.regions:
        state.region_state = regions.Regions(out, manifest.options.regions)
    mapper = None
    for kind, item, problems in prefetched(_pieces(out, state, manifest.options.emulate)):
        broken.extend(problems)
        if kind == _CHUNK and mapper is not None:
            lines += len(item) if item is not None else 0
            emit(mapper.chunk(item))
            continue
        if kind == _THREAD:
            if mapper is not None:
                mapper.thread(item)
            continue
        if mapper is not None:
            finish(mapper)
        mapper = (
            None
            if item is None
            else rows.RunMapper(item, _refused(item, state), topology, state.modifiers)
        )
    if mapper is not None:
        finish(mapper)
    report = tally.build(
        seen,
        manifest,
        runs_summary(manifest, state.finished, state.failed, state.retried, state.broken),
        state.reasons,
        list(state.modifiers.values()),
        broken,
        results_name,
    )
    report.unknown_events = list(state.unknown)
    if state.region_state is not None:
        report.regions, report.region_problems = state.region_state.summaries()
    return Aggregation(None, report, lines)


@dataclass
class _RunState:
    finished: set[tuple[int, int]] = field(default_factory=set)
    failed: list[FailedRun] = field(default_factory=list)
    retried: list[RetriedRun] = field(default_factory=list)
    broken: list[BrokenRun] = field(default_factory=list)  # appended by the reading thread
    reasons: dict[tally.Label, str] = field(default_factory=dict)
    modifiers: rows.Modifiers = field(default_factory=dict)
    unknown: dict[str, None] = field(default_factory=dict)  # events not in the plan, in order
    region_state: regions.Regions | None = None  # a profile with --region
    totals: dict[tally.Label, regions.Total] = field(default_factory=dict)  # the run's, so far


_RUN, _THREAD, _CHUNK = "run", "thread", "chunk"


def _pieces(
    out: Path, state: _RunState, emulated: bool = False
) -> Iterator[tuple[str, Any, list[BrokenFile]]]:
    """The finished runs as a flat stream: (_RUN, record, problems) then a (_CHUNK, Counts or
    None, problems) per chunk of its perf.csv (an `emulated` profile's: one chunk of its
    emulated.json); a broken run.json comes as (_RUN, None, problems)."""
    for folder, record, bad in _finished(out, state):
        yield _RUN, record, bad
        if record is None:
            continue
        if emulated:
            yield _CHUNK, *_emulated_counts(folder, folder.relative_to(out), record, state)
            continue
        counted: list[threads.ThreadRecord | None] = [*record.threads] or [None]
        for thread in counted:
            name = outdir.PERF_OUTPUT
            if thread is not None:  # --per-thread: each thread's perf wrote a file of its own
                yield _THREAD, thread, []
                name = threads.output_name(thread.tid, thread.parent is None)
            chunks = _read_chunks(folder, folder.relative_to(out), record, state, name)
            for counts, problems in chunks:
                yield _CHUNK, counts, problems


def _refused(record: outdir.RunRecord, state: _RunState) -> list[tally.Label]:
    """(name, pmu) of each event perf refused in this run, its reason noted in `state`."""
    refused = []
    for item in record.unsupported:
        label = _unsupported_key(item, record)
        state.reasons.setdefault(label, item.reason)
        refused.append(label)
    return refused


def _finished(
    out: Path, state: _RunState
) -> Iterator[tuple[Path, outdir.RunRecord | None, list[BrokenFile]]]:
    """The run folders that reached a final status, with their records (noted in `state`), and
    those whose record is broken (with a None record and the problem)."""
    for folder in outdir.run_folders(out):
        try:
            record = outdir.read_run_record(folder)
        except FileNotFoundError:
            continue  # a run that never got its record: planned runs report it as missing
        except (ValueError, TypeError, KeyError) as err:
            path = str(folder.relative_to(out) / outdir.RUN_RECORD)
            yield folder, None, [BrokenFile(path, outdir.one_line(err))]
            continue
        if record.status not in FINAL_RUN_STATUSES:
            continue  # interrupted: the next `profile` runs it again
        state.finished.add((record.run, record.repeat))
        if record.attempt > 1 and record.part == 1:
            state.retried.append(RetriedRun(record.run, record.repeat, record.attempt))
        if record.status != RunStatus.OK:
            state.failed.append(
                FailedRun(
                    record.run, record.repeat, record.status, record.workload_exit, record.error
                )
            )
        yield folder, record, []


def runs_summary(
    manifest: outdir.Manifest,
    finished: set[tuple[int, int]],
    failed: list[FailedRun] | None = None,
    retried: list[RetriedRun] | None = None,
    broken: list[BrokenRun] | None = None,
) -> RunsSummary:
    """The report's runs: expected (a part of a split profile expects only its share of the
    plan), finished, ok, failed, broken, missing and retried runs."""
    options = manifest.options
    shape = (len(manifest.plan.get("runs", [])), options.repeat, options.part, options.parts)
    missing = [RunId(r, k) for r, k in outdir.planned(*shape) if (r, k) not in finished]
    failed = sorted(failed or [], key=lambda f: (f.run, f.repeat))
    broken = sorted(broken or [], key=lambda b: (b.run, b.repeat))
    bad = {(f.run, f.repeat) for f in failed} | {(b.run, b.repeat) for b in broken}
    return RunsSummary(
        expected=outdir.planned_count(*shape),
        finished=len(finished),  # reached an end, failed or not
        ok=len(finished - bad),  # finished with perf and the workload content, output read
        failed=failed,
        missing=missing,
        # finished on a later attempt (`profile --retries`); earlier ones are in attempts/
        retried=retried or [],
        broken=broken,
    )


def _read_manifest(out: Path) -> outdir.Manifest:
    """The profile's manifest, or one error line: without its plan nothing can say which runs
    and events were expected (a report of "2 of ? runs ok" would pass for good), so nothing
    is written and the runs stay as they are, as `upload` refuses it too."""
    kept = f"nothing aggregated (the runs in {out / outdir.RUNS} are untouched)"
    if not (out / outdir.MANIFEST).is_file():
        raise AutoprofError(f"{out / outdir.MANIFEST} is missing: {kept}")
    try:
        return outdir.read_manifest(out)
    except NewerFormat:
        raise
    except AutoprofError as err:
        raise AutoprofError(f"{err}: {kept}") from None


def _topology(manifest: outdir.Manifest) -> np.ndarray:
    """(socket, core, node) per CPU number from the manifest's machine facts; -1 where unknown.
    Manifests written before topology was recorded have none: their columns stay empty."""
    cpus = manifest.machine.topology
    table = np.full((max((c["cpu"] for c in cpus), default=-1) + 1, 3), -1, np.int64)
    for c in cpus:
        table[c["cpu"]] = (c.get("socket", -1), c.get("core", -1), c.get("node", -1))
    return table


def _unsupported_key(item: Unsupported, record: outdir.RunRecord) -> tally.Label:
    """(catalog name, pmu) of an event perf refused, named by its label or spec in old files."""
    for ref in record.events:
        if item.name in (ref.name, ref.label, ref.spec):
            return ref.name, item.pmu or ref.pmu
    return item.name, item.pmu


def _read_chunks(
    folder: Path,
    rel: Path,
    record: outdir.RunRecord,
    state: _RunState,
    file: str = outdir.PERF_OUTPUT,
) -> Iterator[tuple[stat_arrow.Counts | None, list[BrokenFile]]]:
    """The run's perf.csv (or a thread's `file`) as Counts, chunk by chunk (whole intervals
    each: memory stays that of a chunk), with the problems of its lines; (None, [why]) when
    absent or unreadable (a file that turns out unreadable after some chunks keeps what came
    before). A run that finished well but whose file gave no line of perf's is noted in `state`
    as broken."""
    perf_path = folder / file
    name = str(rel / file)
    if not perf_path.is_file():
        if record.status != RunStatus.PERF_FAILED:
            yield None, [BrokenFile(name, "missing")]
            _broken(state, record, f"{file} is missing")
        return
    sep, interval = stat_csv.argv_options(record.perf_argv)
    reported = lines = 0
    first: str | None = None
    try:
        for counts, problems in stat_arrow.read_file(perf_path, sep, interval):
            lines += len(counts)
            first = first or (str(problems[0]) if problems else None)
            shown = problems[: max(0, MAX_PROBLEMS_PER_FILE - reported)]
            reported += len(problems)
            yield counts, [BrokenFile(name, str(p)) for p in shown]
    except stat_csv.StatCsvError as err:
        first = first or str(err)
        yield None, [BrokenFile(name, str(err))]
    if reported > MAX_PROBLEMS_PER_FILE:
        extra = reported - MAX_PROBLEMS_PER_FILE
        yield None, [BrokenFile(name, f"... and {extra} more lines")]
    if not lines and first is not None:
        _broken(state, record, f"{file} holds no count of perf's: {first}")


def _emulated_counts(
    folder: Path, rel: Path, record: outdir.RunRecord, state: _RunState
) -> tuple[stat_arrow.Counts | None, list[BrokenFile]]:
    """An emulated run's counts (`outdir.EMULATED`) in perf's shape, or (None, [why]) when its
    file is missing (a run that counted, noted in `state` as broken) or unreadable."""
    name = str(rel / outdir.EMULATED)
    try:
        return stat_arrow.totals(outdir.read_emulated(folder).counts), []
    except FileNotFoundError:
        if record.status not in (RunStatus.OK, RunStatus.WORKLOAD_FAILED):
            return None, []  # it failed, and says why
        problem = "missing"
    except (OSError, ValueError, TypeError, KeyError) as err:
        problem = outdir.one_line(err)
    _broken(state, record, f"{outdir.EMULATED}: {problem}")
    return None, [BrokenFile(name, problem)]


def _broken(state: _RunState, record: outdir.RunRecord, reason: str) -> None:
    """A run whose output gave nothing: broken, unless it failed already (it says why)."""
    if record.status == RunStatus.OK:
        state.broken.append(BrokenRun(record.run, record.repeat, reason))
