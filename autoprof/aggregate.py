"""`out/` -> one results frame (the `autoprof.results` contract) and a sanity report.

Every perf.csv is parsed by `autoprof.perf.stat_csv`; perf's event labels are mapped back to
catalog events through the run's `run.json` EventRefs. Nothing is trusted silently: multiplexed
counts, events counted in no interval, idle intervals, events perf refused, failed and missing
runs, and files that could not be read all end up in the report (`OUT/report.json`). A broken
file is reported and skipped; it never stops the aggregation of the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from autoprof import __version__, outdir, results
from autoprof.errors import AutoprofError
from autoprof.perf import stat_csv

FINAL_STATUSES = (
    outdir.RUN_OK,
    outdir.RUN_WORKLOAD_FAILED,
    outdir.RUN_PERF_FAILED,
    outdir.RUN_TIMEOUT,
)
MAX_PROBLEMS_PER_FILE = 20  # a garbage file should not drown the report


@dataclass
class Aggregation:
    frame: pd.DataFrame  # results.COLUMNS
    report: dict[str, Any]
    lines: int = 0  # perf CSV lines read (for the benchmark)
    notes: list[str] = field(default_factory=list)


def aggregate(out: Path, results_name: str = outdir.RESULTS) -> Aggregation:
    """Read every finished run of the profile folder `out`; pure apart from reading files."""
    out = Path(out)
    if not out.is_dir() or not ((out / outdir.MANIFEST).is_file() or (out / outdir.RUNS).is_dir()):
        raise AutoprofError(f"{out} is not a profile folder (no {outdir.MANIFEST}, no runs/)")
    broken: list[dict[str, str]] = []
    manifest = _read_manifest(out, broken)

    frames, failed, retried, finished, unsupported_reasons = [], [], [], set(), {}
    lines = 0
    for folder in outdir.run_folders(out):
        rel = folder.relative_to(out)
        try:
            record = outdir.read_run_record(folder)
        except FileNotFoundError:
            continue  # a run that never got its record: planned runs report it as missing
        except (ValueError, TypeError, KeyError) as err:
            broken.append({"path": str(rel / outdir.RUN_RECORD), "error": _one_line(err)})
            continue
        if record.status not in FINAL_STATUSES:
            continue  # interrupted: the next `profile` runs it again
        finished.add((record.run, record.repeat))
        if record.attempt > 1 and record.part == 1:
            retried.append({"run": record.run, "repeat": record.repeat, "attempt": record.attempt})
        if record.status != outdir.RUN_OK:
            failed.append(
                {
                    "run": record.run,
                    "repeat": record.repeat,
                    "status": record.status,
                    "workload_exit": record.workload_exit,
                    "error": record.error,
                }
            )
        frame, n = _run_frame(folder, rel, record, broken)
        lines += n
        frames.append(frame)
        for item in record.unsupported:
            name, pmu = _unsupported_key(item, record)
            unsupported_reasons.setdefault((name, pmu), item.get("reason", ""))

    frame = pd.concat(frames, ignore_index=True) if frames else results.empty_frame()
    frame = results.normalize(frame)
    report = build_report(frame, manifest, finished, failed, unsupported_reasons, broken, retried)
    report["results"] = results_name
    return Aggregation(frame, report, lines)


def write(out: Path, aggregation: Aggregation, path: Path | None = None) -> Path:
    """Write results.csv (canonical writer) and report.json; return the results path."""
    path = Path(path) if path else Path(out) / outdir.RESULTS
    results.write_csv(aggregation.frame, path)
    outdir.write_json(Path(out) / outdir.REPORT, aggregation.report)
    return path


def _read_manifest(out: Path, broken: list[dict[str, str]]) -> outdir.Manifest | None:
    if not (out / outdir.MANIFEST).is_file():
        broken.append({"path": outdir.MANIFEST, "error": "missing"})
        return None
    try:
        return outdir.read_manifest(out)
    except (ValueError, TypeError, KeyError) as err:
        broken.append({"path": outdir.MANIFEST, "error": _one_line(err)})
        return None


def _one_line(err: Exception) -> str:
    return f"{type(err).__name__}: {err}".splitlines()[0]


def _unsupported_key(item: dict[str, str], record: outdir.RunRecord) -> tuple[str, str]:
    """(catalog name, pmu) of an entry of RunRecord.unsupported, whatever it was keyed by."""
    key = item.get("name") or item.get("event") or item.get("label") or item.get("spec") or ""
    for ref in record.events:
        if key in (ref.name, ref.label, ref.spec):
            return ref.name, item.get("pmu") or ref.pmu
    return key, item.get("pmu", "")


def _run_frame(
    folder: Path, rel: Path, record: outdir.RunRecord, broken: list[dict[str, str]]
) -> tuple[pd.DataFrame, int]:
    """The results rows of one run: perf's lines mapped to catalog events, plus a `not
    supported` row for each event perf refused to open (it printed no line for those)."""
    perf_path = folder / outdir.PERF_OUTPUT
    parsed = None
    lines = 0
    if perf_path.is_file():
        data = perf_path.read_bytes()
        lines = data.count(b"\n")
        sep, interval = stat_csv.argv_options(record.perf_argv)
        try:
            parsed = stat_csv.parse(data, sep=sep, interval=interval)
        except stat_csv.StatCsvError as err:
            broken.append({"path": str(rel / outdir.PERF_OUTPUT), "error": str(err)})
        else:
            for problem in parsed.problems[:MAX_PROBLEMS_PER_FILE]:
                broken.append({"path": str(rel / outdir.PERF_OUTPUT), "error": str(problem)})
            extra = len(parsed.problems) - MAX_PROBLEMS_PER_FILE
            if extra > 0:
                broken.append(
                    {"path": str(rel / outdir.PERF_OUTPUT), "error": f"... and {extra} more lines"}
                )
    elif record.status != outdir.RUN_PERF_FAILED:
        broken.append({"path": str(rel / outdir.PERF_OUTPUT), "error": "missing"})

    rows = _map_events(parsed.frame, record) if parsed is not None else results.empty_frame()
    refused = _refused_rows(rows, record)
    if not refused.empty:
        rows = pd.concat([rows, refused], ignore_index=True) if len(rows) else refused
    return rows, lines


def _lookup(record: outdir.RunRecord) -> dict[str, outdir.EventRef]:
    """Every text perf may print for an event of this run -> its EventRef."""
    table: dict[str, outdir.EventRef] = {}
    for ref in record.events:
        for key in (f"{ref.pmu}/{ref.label}/", ref.spec, ref.label):
            table[key] = ref
    return table


def _map_events(parsed: pd.DataFrame, record: outdir.RunRecord) -> pd.DataFrame:
    """perf rows -> results rows (without any per-line Python work: maps go over unique names)."""
    table = _lookup(record)
    uniq = pd.unique(parsed["EVENT_BASE"].astype(object))
    refs = {u: table.get(u) or table.get(_inner_name(u)) for u in uniq}
    ref_of = parsed["EVENT_BASE"].astype(object).map(refs)
    name = ref_of.map(lambda r: r.name if r else None, na_action="ignore")
    name = name.fillna(parsed["EVENT"].astype(object))  # unknown to run.json: kept as printed
    pmu = ref_of.map(lambda r: r.pmu if r else None, na_action="ignore")

    time = parsed["TIME"].to_numpy()
    if np.isnan(time).all():
        index = np.zeros(len(parsed), dtype=np.int64)
    else:
        index = np.unique(time, return_inverse=True)[1].reshape(-1)

    unit = parsed["PMU_INSTANCE"].astype(object).fillna(pmu)
    status = parsed["STATE"].astype(object).copy()
    counted = status == stat_csv.COUNTED
    multiplexed = counted & (parsed["PERCENT_RUNNING"] < 100)
    status[counted] = results.STATUS_OK
    status[multiplexed] = results.STATUS_MULTIPLEXED

    frame = pd.DataFrame(
        {
            "EVENT_NAME": name,
            "INDEX": index,
            "TIME": parsed["TIME"],
            "SOCKET": parsed["SOCKET"],
            "CORE": parsed["CORE"],
            "CPU": parsed["CPU"],
            "NODE": parsed["NODE"],
            "UNIT": unit,
            "SAMPLE_VALUE": parsed["VALUE"],
            "RUN": record.run,
            "REPEAT": record.repeat,
            "PMU": pmu,
            "VALUE_UNIT": parsed["UNIT"],
            "PERCENT_RUNNING": parsed["PERCENT_RUNNING"],
            "STATUS": status,
        }
    )
    _number_boxes(frame, parsed)
    return frame


def _inner_name(printed: str) -> str:
    """``uncore_cha/UNC_CHA_CLOCKTICKS/`` -> ``UNC_CHA_CLOCKTICKS`` (perf wraps a name= event)."""
    if printed.count("/") == 2 and printed.endswith("/"):
        return printed.split("/")[1]
    return printed


def _number_boxes(frame: pd.DataFrame, parsed: pd.DataFrame) -> None:
    """An uncore event opened with name= prints one line per box without naming the box; number
    the boxes in perf's print order (UNIT ``uncore_cha_0``, ``uncore_cha_1``, ...)."""
    keys = ["EVENT_NAME", "INDEX", "CPU", "SOCKET", "CORE", "NODE", "UNIT"]
    no_box = parsed["PMU_INSTANCE"].isna().to_numpy()
    dup = frame.duplicated(keys, keep=False).to_numpy() & no_box
    if not dup.any():
        return
    nth = frame[dup].groupby(keys, dropna=False, sort=False).cumcount()
    frame.loc[dup, "UNIT"] = frame.loc[dup, "UNIT"].astype(str) + "_" + nth.astype(str)


def _refused_rows(rows: pd.DataFrame, record: outdir.RunRecord) -> pd.DataFrame:
    """A `not supported` row for each refused event that perf printed no line for."""
    if not record.unsupported:
        return results.empty_frame()
    pairs = rows[["EVENT_NAME", "PMU"]].drop_duplicates()
    present = set(zip(pairs["EVENT_NAME"], pairs["PMU"], strict=True))
    missing = []
    for item in record.unsupported:
        name, pmu = _unsupported_key(item, record)
        if (name, pmu) not in present:
            present.add((name, pmu))
            missing.append((name, pmu))
    if not missing:
        return results.empty_frame()
    frame = results.empty_frame().reindex(range(len(missing)))
    frame["EVENT_NAME"] = [m[0] for m in missing]
    frame["PMU"] = [m[1] for m in missing]
    frame["UNIT"] = frame["PMU"]
    frame["INDEX"] = 0
    frame["RUN"] = record.run
    frame["REPEAT"] = record.repeat
    frame["STATUS"] = results.STATUS_NOT_SUPPORTED
    return results.normalize(frame)


def build_report(
    frame: pd.DataFrame,
    manifest: outdir.Manifest | None,
    finished: set[tuple[int, int]],
    failed: list[dict[str, Any]],
    unsupported_reasons: dict[tuple[str, str], str],
    broken: list[dict[str, str]],
    retried: list[dict[str, int]] | None = None,
) -> dict[str, Any]:
    """The sanity report (report.json contract) of an aggregated results frame."""
    expected, missing = None, []
    if manifest is not None:  # a part of a split profile expects only its share of the plan
        options = manifest.options
        pairs = outdir.planned(
            len(manifest.plan.get("runs", [])),
            int(options.get("repeat", 1) or 1),
            int(options.get("part", 1)),
            int(options.get("parts", 1)),
        )
        expected = len(pairs)
        missing = [{"run": r, "repeat": k} for r, k in pairs if (r, k) not in finished]
    status = frame["STATUS"]
    key = ["EVENT_NAME", "PMU"]
    ok = frame[status == results.STATUS_OK]
    return {
        "autoprof_version": __version__,
        "profile_id": manifest.id if manifest else None,
        "results": outdir.RESULTS,
        "rows": len(frame),
        "events_measured": len(ok[key].drop_duplicates()),
        "runs": {
            "expected": expected,
            "finished": len(finished),
            "failed": sorted(failed, key=lambda f: (f["run"], f["repeat"])),
            "missing": missing,
            # finished on a later attempt (`profile --retries`); earlier ones are in attempts/
            "retried": retried or [],
        },
        "events": {
            "multiplexed": _multiplexed(frame[status == results.STATUS_MULTIPLEXED]),
            **_counted_in(frame),
            "not_supported": [
                {
                    "event": e,
                    "pmu": _text(p),
                    "reason": unsupported_reasons.get((e, p)) or "perf printed <not supported>",
                }
                for e, p in frame.loc[status == results.STATUS_NOT_SUPPORTED, key]
                .drop_duplicates()
                .itertuples(index=False)
            ],
        },
        "broken_files": broken,
    }


def _text(value: Any) -> str | None:
    return None if pd.isna(value) else str(value)


def _multiplexed(rows: pd.DataFrame) -> list[dict[str, Any]]:
    grouped = rows.groupby(["EVENT_NAME", "PMU"], dropna=False, sort=True)["PERCENT_RUNNING"]
    return [
        {"event": e, "pmu": _text(p), "min_percent_running": float(lo), "rows": int(n)}
        for (e, p), lo, n in zip(grouped.min().index, grouped.min(), grouped.size(), strict=True)
    ]


def _counted_in(frame: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Events counted in no interval of a run (not_counted), or in only some (idle_intervals).

    An interval is (run, repeat, INDEX); it is uncounted for an event when perf printed
    `<not counted>` for it there (on any CPU or box).
    """
    measured = frame[frame["STATUS"] != results.STATUS_NOT_SUPPORTED]
    cols = ["EVENT_NAME", "PMU", "RUN", "REPEAT", "INDEX"]
    intervals = measured[cols].drop_duplicates()
    idle = measured.loc[measured["STATUS"] == results.STATUS_NOT_COUNTED, cols].drop_duplicates()
    per_run = ["EVENT_NAME", "PMU", "RUN", "REPEAT"]
    total = intervals.groupby(per_run, dropna=False).size().rename("of")
    uncounted = idle.groupby(per_run, dropna=False).size().rename("intervals")
    both = pd.concat([uncounted, total], axis=1, join="inner").reset_index()
    both["none"] = both["intervals"] == both["of"]
    out: dict[str, list[dict[str, Any]]] = {}
    parts = (("not_counted", both[both["none"]]), ("idle_intervals", both[~both["none"]]))
    for label, rows in parts:
        summed = rows.groupby(["EVENT_NAME", "PMU"], dropna=False, sort=True)
        out[label] = [
            {
                "event": e,
                "pmu": _text(p),
                "intervals": int(g["intervals"].sum()),
                "of": int(g["of"].sum()),
                "runs": [
                    outdir.run_folder_name(r, k) for r, k in zip(g["RUN"], g["REPEAT"], strict=True)
                ],
            }
            for (e, p), g in summed
        ]
    return out


WARNINGS = ("events with idle intervals", "runs retried")  # worth a look, not wrong numbers


def render_report(report: dict[str, Any], console: Any) -> None:
    """Print the sanity report for a human: one summary table, then every list that is not empty."""
    from rich.table import Table

    runs, events = report["runs"], report["events"]
    summary = Table(title="autoprof aggregate: sanity report", show_header=False)
    summary.add_row("rows", str(report["rows"]))
    summary.add_row("events measured", str(report["events_measured"]))
    expected = "?" if runs["expected"] is None else str(runs["expected"])
    summary.add_row("runs finished", f"{runs['finished']} of {expected}")
    for name, items in (
        ("runs failed", runs["failed"]),
        ("runs missing", runs["missing"]),
        ("runs retried", runs.get("retried", [])),
        ("events multiplexed", events["multiplexed"]),
        ("events not counted", events["not_counted"]),
        ("events with idle intervals", events["idle_intervals"]),
        ("events not supported", events["not_supported"]),
        ("broken files", report["broken_files"]),
    ):
        style = "green" if not items else ("yellow" if name in WARNINGS else "red")
        summary.add_row(name, f"[{style}]{len(items)}[/{style}]")
    console.print(summary)
    _detail(console, "failed runs", runs["failed"], ["run", "repeat", "status", "error"])
    _detail(console, "missing runs", runs["missing"], ["run", "repeat"])
    _detail(console, "retried runs", runs.get("retried", []), ["run", "repeat", "attempt"])
    _detail(console, "multiplexed", events["multiplexed"], ["event", "pmu", "min_percent_running"])
    _detail(console, "not counted", events["not_counted"], ["event", "pmu", "intervals", "of"])
    _detail(console, "not supported", events["not_supported"], ["event", "pmu", "reason"])
    _detail(console, "broken files", report["broken_files"], ["path", "error"])


def _detail(console: Any, title: str, items: list[dict[str, Any]], keys: list[str]) -> None:
    from rich.table import Table

    if not items:
        return
    table = Table(title=f"{title} ({len(items)})")
    for k in keys:
        table.add_column(k)
    for item in items[:25]:
        table.add_row(*("" if item.get(k) is None else str(item.get(k)) for k in keys))
    if len(items) > 25:
        table.add_row(f"... {len(items) - 25} more (see report.json)", *[""] * (len(keys) - 1))
    console.print(table)
