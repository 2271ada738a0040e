"""Synthetic but realistic profile output folders (out/) for the store's tests and benchmark.

Built only with `autoprof.run.outdir` and `autoprof.results`, so they follow the contracts exactly:
a manifest, one run.json per (run, repeat), results.csv written by `csvfile.write_csv` and a
report.json. Values look like `perf stat -I` output on this kind of machine: software events in
msec with fractional values, per-CPU and whole-process rows, an uncore box, a breakpoint, a
multiplexed event (percent running < 100), a `<not counted>` interval and an unsupported event.

`profile_from_plan` writes the folder a real plan leaves before `aggregate` (perf.csv per run,
counts of our choosing), for tests that must go through `aggregate` on another CPU's plan.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from autoprof.catalog.facts import MachineFacts
from autoprof.catalog.model import Event
from autoprof.results import csvfile
from autoprof.run import outdir
from autoprof.run.options import ProfileOptions
from autoprof.schedule.plan import Plan
from autoprof.util.records import write_json
from autoprof.util.status import RowStatus, RunStatus

# (name, pmu, unit, per_cpu, value_unit)
EVENTS = [
    ("task-clock", "software", "software", False, "msec"),
    ("page-faults", "software", "software", False, None),
    ("context-switches", "software", "software", True, None),
    ("INST_RETIRED.ANY", "cpu", "cpu", True, None),
    ("CPU_CLK_UNHALTED.THREAD", "cpu", "cpu", True, None),
    ("UNC_CHA_CLOCKTICKS", "uncore_cha", "uncore_cha_3", False, None),
    ("mem:0x406000:w", "breakpoint", "breakpoint", False, None),
    ("sched:sched_switch", "tracepoint", "tracepoint", True, None),
]

# planned: what was measured, and the event perf refused in every run
PLANNED = [*((e[0], e[1]) for e in EVENTS), ("OFFCORE_RESPONSE.ALL", "cpu")]


def machine(hostname: str = "node7") -> MachineFacts:
    return MachineFacts(
        cpu_id="GenuineIntel-6-55-4",
        model_name="Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz",
        hostname=hostname,
        kernel="6.1.0-21-amd64",
        perf_version="6.1.90",
        smt=True,
        nmi_watchdog=False,
        perf_event_paranoid=2,
        counters={"cpu": {"generic": 4, "fixed": 3}, "uncore_cha": {"generic": 4, "fixed": 0}},
    )


def frame_for(runs: list[int], repeats: int, intervals: int, cpus: int, seed: int) -> pd.DataFrame:
    """Rows for the given plan runs, ordered by run, repeat, interval, event, cpu. Each column
    is built as one array and the frame made once (a frame per event and repeat, concatenated,
    cost the store's tests ~40 ms a folder)."""
    rng = np.random.default_rng(seed)
    columns: dict[str, list] = {name: [] for name in _FRAME_COLUMNS}
    for run in runs:
        for rep in range(1, repeats + 1):
            for name, pmu, unit, per_cpu, value_unit in EVENTS:
                width = cpus if per_cpu else 1
                n = intervals * width
                index = np.repeat(np.arange(intervals), width)
                time = (index + 1) * 0.100 + rng.integers(0, 999_999, n) * 1e-9
                if value_unit == "msec":
                    value = np.round(rng.uniform(90.0, 100.5, n), 2)
                else:
                    value = rng.integers(0, 10**12, n).astype("float64")
                percent = np.full(n, 100.0)
                status = np.full(n, RowStatus.OK, dtype=object)
                if name == "CPU_CLK_UNHALTED.THREAD":  # multiplexed in some intervals
                    mux = rng.random(n) < 0.1
                    percent[mux] = np.round(rng.uniform(40.0, 99.9, mux.sum()), 2)
                    status[mux] = RowStatus.MULTIPLEXED
                if name == "page-faults":  # the task did not run in the last interval
                    value[-1], percent[-1] = np.nan, np.nan
                    status[-1] = RowStatus.NOT_COUNTED
                cpu = np.tile(np.arange(width, dtype=float), intervals) if per_cpu else None
                _extend(
                    columns,
                    n,
                    EVENT_NAME=name,
                    INDEX=index.astype(float),
                    TIME=time,
                    SOCKET=0.0 if unit.startswith("uncore") else np.nan,
                    CPU=np.full(n, np.nan) if cpu is None else cpu,
                    UNIT=unit,
                    SAMPLE_VALUE=value,
                    RUN=run,
                    REPEAT=rep,
                    PMU=pmu,
                    VALUE_UNIT=value_unit,
                    PERCENT_RUNNING=percent,
                    STATUS=status,
                )
        _extend(  # perf refused this one in every run
            columns, 1, EVENT_NAME="OFFCORE_RESPONSE.ALL", UNIT="cpu", RUN=run, REPEAT=1,
            PMU="cpu", STATUS=RowStatus.NOT_SUPPORTED,
        )  # fmt: skip
    frame = pd.DataFrame({name: np.concatenate(parts) for name, parts in columns.items()})
    return csvfile.normalize(frame)


# frame_for's columns and what a row leaves out holds (NaN: no number; None: no text)
_FRAME_COLUMNS = {
    "EVENT_NAME": None, "INDEX": np.nan, "TIME": np.nan, "SOCKET": np.nan, "CORE": np.nan,
    "CPU": np.nan, "NODE": np.nan, "UNIT": None, "SAMPLE_VALUE": np.nan, "RUN": np.nan,
    "REPEAT": np.nan, "PMU": None, "VALUE_UNIT": None, "PERCENT_RUNNING": np.nan, "STATUS": None,
}  # fmt: skip


def _extend(columns: dict[str, list], n: int, **values) -> None:
    """Add `n` rows to `columns`: each column's array or one value for all rows (its blank
    where not given)."""
    for name, parts in columns.items():
        value = values.get(name, _FRAME_COLUMNS[name])
        if not isinstance(value, np.ndarray):
            text = value is None or isinstance(value, str)
            value = np.full(n, value, dtype=object if text else float)
        parts.append(value)


def make_out(
    root: Path,
    *,
    runs: int = 3,
    repeats: int = 2,
    intervals: int = 20,
    cpus: int = 2,
    seed: int = 0,
    profile_id: str | None = None,
    hostname: str = "node7",
    command: tuple[str, ...] = ("./w", "1000"),
    part: int = 1,
    parts: int = 1,
) -> Path:
    """Write an aggregated out/ folder under `root`; part k of N holds plan runs k, k+N, ..."""
    root.mkdir(parents=True, exist_ok=True)
    profile_id = profile_id or str(
        uuidlib.UUID(bytes=np.random.default_rng(seed).bytes(16), version=4)
    )
    my_runs = [r for r in range(1, runs + 1) if (r - 1) % parts == part - 1]
    options = ProfileOptions(repeat=repeats, part=part, parts=parts)
    plan = {
        "cpu": "GenuineIntel-6-55-4",
        "lower_bound": runs,
        "runs": [{"events": [{"name": e[0], "pmu": e[1], "counter": None} for e in PLANNED]}]
        * runs,
        "excluded": [],
    }
    outdir.write_manifest(
        root,
        outdir.Manifest(
            id=profile_id,
            autoprof_version="0.1.0",
            created="2024-06-01T10:00:00+00:00",
            command=list(command),
            machine=machine(hostname),
            plan=plan,
            options=options,
        ),
    )
    for run in my_runs:
        for rep in range(1, repeats + 1):
            folder = outdir.run_dir(root, run, rep)
            folder.mkdir(parents=True, exist_ok=True)
            refs = [outdir.EventRef(e[0], e[1], e[0], e[0]) for e in EVENTS]
            argv = ["perf", "stat", "-x,", "-I", "100", "-o", "perf.csv", "--", *command]
            outdir.write_run_record(
                folder,
                outdir.RunRecord(
                    run=run,
                    repeat=rep,
                    events=refs,
                    perf_argv=argv,
                    start=f"2024-06-01T10:{run % 60:02d}:00+00:00",
                    end=f"2024-06-01T10:{run % 60:02d}:02.5+00:00",
                    elapsed_s=2.5,
                    perf_exit=0,
                    workload_exit=0,
                    status=RunStatus.OK,
                ),
            )
    frame = frame_for(my_runs, repeats, intervals, cpus, seed)
    digest = csvfile.write_csv(frame, root / outdir.RESULTS)
    write_json(
        root / outdir.REPORT,
        {
            "autoprof_version": "0.1.0",
            "profile_id": profile_id,
            "results": outdir.RESULTS,
            "rows": len(frame),
            "results_sha256": digest,  # as `aggregate` records it
            "events_measured": len(EVENTS),
            "runs": {
                "expected": len(my_runs) * repeats,
                "finished": len(my_runs) * repeats,
                "failed": [],
                "missing": [],
            },
            "events": {
                "multiplexed": [],
                "not_counted": [],
                "idle_intervals": [],
                "not_supported": [],
            },
            "broken_files": [],
        },
    )
    return root


def perf_stat_lines(counts: list[tuple[str, float]], intervals: int, period: float = 0.1) -> str:
    """`perf stat -x, -I` output (perf 6.1's shape: time, value, unit, event, run time, percent
    running, metric, metric unit) of events counting `value` in every interval."""
    lines = ["# started on Sun Nov 22 04:24:29 2026\n", "\n"]
    for i in range(intervals):
        stamp = f"{period * (i + 1) + 0.000189783:16.9f}"
        ns = int(period * 1e9)
        lines += [f"{stamp},{value:.0f},,{label},{ns},100.00,,\n" for label, value in counts]
    return "".join(lines)


def profile_from_plan(
    root: Path,
    plan: Plan,
    rate: Callable[[Event], float],
    *,
    intervals: int = 10,
    machine_facts: MachineFacts | None = None,
    command: tuple[str, ...] = ("./w", "1000"),
) -> Path:
    """An out/ folder as `autoprof profile` leaves it for `plan`, before `aggregate`: the
    manifest, and per run its run.json and a perf.csv in which every event counts `rate(event)`
    per interval (the same in every run that holds it). `aggregate` makes results.csv of it."""
    root.mkdir(parents=True, exist_ok=True)
    facts = machine_facts or replace(machine(), cpu_id=plan.cpu, model_name="synthetic")
    options = ProfileOptions(interval_ms=100)
    outdir.write_manifest(
        root,
        outdir.Manifest(
            id=str(uuidlib.uuid4()),
            autoprof_version="0.1.0",
            created="2024-06-01T10:00:00+00:00",
            command=list(command),
            machine=facts,
            plan=plan.to_json(),
            options=options,
        ),
    )
    argv = ["perf", "stat", "-x,", "-I", "100", "-o", outdir.PERF_OUTPUT, "--", *command]
    for number, run in enumerate(plan.runs, 1):
        folder = outdir.run_dir(root, number, 1)
        folder.mkdir(parents=True, exist_ok=True)
        events = list(run.events)
        refs = [outdir.EventRef(e.name, e.pmu, e.spec, e.label) for e in events]
        counts = [(e.label, rate(e)) for e in events]
        (folder / outdir.PERF_OUTPUT).write_text(perf_stat_lines(counts, intervals))
        record = outdir.RunRecord(
            number, 1, refs, argv, elapsed_s=0.1 * intervals, perf_exit=0, workload_exit=0,
            status=RunStatus.OK,
        )  # fmt: skip
        outdir.write_run_record(folder, record)
    return root


def counts_frame(
    runs: list[list[Event]], rate: Callable[[Event], float], intervals: int = 5
) -> pd.DataFrame:
    """A results frame (what `aggregate` makes) of a plan's `runs`: every event counts
    `rate(event)` in each interval of each run holding it, one whole-process row."""
    rows = [
        {
            "EVENT_NAME": event.name,
            "INDEX": i,
            "TIME": 0.1 * (i + 1),
            "UNIT": event.pmu,
            "SAMPLE_VALUE": rate(event),
            "RUN": number,
            "REPEAT": 1,
            "PMU": event.pmu,
            "PERCENT_RUNNING": 100.0,
            "STATUS": RowStatus.OK,
        }
        for number, events in enumerate(runs, 1)
        for event in events
        for i in range(intervals)
    ]
    frame = pd.DataFrame(rows)
    for column in set(csvfile.COLUMNS) - set(frame.columns):
        frame[column] = None
    return csvfile.normalize(frame)
