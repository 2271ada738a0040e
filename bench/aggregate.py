"""Aggregate speed and memory: profiles made of real perf output shapes, against pandas' read_csv.

Two profiles, built in a temp dir:

- `--runs 50 --intervals 4000` (2 M lines): every perf.csv repeats the intervals of a real
  `perf stat -x, -I 100 -a -A` recording (tests/data/perf61/interval_percpu.csv: five events on
  two CPUs, one `<not supported>`) with advancing timestamps. Times pandas.read_csv alone,
  stat_arrow.read (the parse), `aggregate_to` (parse, event mapping, report and the streamed
  write of results.csv) and the in-memory `aggregate` + `csvfile.write_csv` of the old API.
- `--system-wide` (16 M lines): a two-socket server, 224 CPUs (2 x 56 cores x 2 threads), 600
  core events in runs of 5 (one `CPUn` line per CPU and interval), 100 uncore events in runs of
  4 printed per CHA box (56 boxes per socket, on the socket's first CPU, without the box's name
  as perf prints a name= event), 110 intervals; the lines copy the recording's shapes. Runs
  `autoprof aggregate` in a child process and reports its wall time and peak RSS.

- `--one-run 1000000,10000000`: one run whose perf.csv has that many lines (the recording's
  intervals repeated); prints the peak RSS of `autoprof aggregate` in a child process per size.
  A run is read in chunks of whole intervals, so the peak stays flat as the file grows.

    python bench/aggregate.py [--runs 50] [--intervals 4000] [--system-wide [--intervals 110]]
    python bench/aggregate.py --one-run 1000000,10000000
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from autoprof.catalog.facts import MachineFacts
from autoprof.perf import stat_arrow
from autoprof.results import aggregate, csvfile
from autoprof.results.sanity_report import read_report
from autoprof.run import outdir
from autoprof.util.status import RunStatus

SOURCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "perf61" / "interval_percpu.csv"
HEADER = "# started on Sun Nov 22 04:24:29 2026\n\n"
ARGV = ["perf", "stat", "-x,", "-I", "100", "-a", "-A", "--", "sleep", "1"]


def interval_block() -> list[tuple[str, str]]:
    """The lines of the recording's first interval, split into (timestamp, rest)."""
    lines = [x for x in SOURCE.read_text().splitlines() if x.strip() and not x.startswith("#")]
    first = lines[0].split(",", 1)[0]
    return [tuple(x.split(",", 1)) for x in lines if x.split(",", 1)[0] == first]


def stamp(i: int) -> str:
    return f"{0.1 * (i + 1) + 0.000181730:16.9f}"


def write_profile(out: Path, runs: list, topology, planned: int) -> None:
    """Write each (events, perf.csv text or iterable of texts) of `runs` (an iterable: the
    texts are made one at a time, so this process stays small beside the one it measures),
    then the manifest whose plan names their events (aggregate keeps planned events only)."""
    plan_runs = []
    for run, (refs, text) in enumerate(runs, 1):
        folder = outdir.run_dir(out, run, 1)
        folder.mkdir(parents=True)
        with (folder / outdir.PERF_OUTPUT).open("w") as perf_csv:
            perf_csv.writelines([text] if isinstance(text, str) else text)
        record = outdir.RunRecord(run, 1, refs, ARGV, status=RunStatus.OK)
        outdir.write_run_record(folder, record)
        plan_runs.append({"events": [{"name": r.name, "pmu": r.pmu} for r in refs]})
    plan_runs += [{"events": []}] * (planned - len(plan_runs))
    plan = {"cpu": "bench", "lower_bound": planned, "runs": plan_runs}
    machine = MachineFacts("bench", "bench", "bench", "6.1", "6.1", True, False, 2)
    machine.topology = topology
    manifest = outdir.Manifest("bench", "0.1.0", "", ["bench"], machine, plan)
    outdir.write_manifest(out, manifest)


def build(out: Path, runs: int, intervals: int) -> tuple[int, int]:
    """The 2 M-line profile; (lines, lines with a value)."""
    block = interval_block()
    events = sorted({rest.split(",")[3] for _, rest in block})
    body = [f"{stamp(i)},{rest}\n" for i in range(intervals) for _, rest in block]
    refs = [outdir.EventRef(name=e, pmu="software", spec=e, label=e) for e in events]
    write_profile(out, [(refs, HEADER + "".join(body))] * runs, [], runs)
    counted = sum(1 for x in body if "<not " not in x)
    return runs * len(body), runs * counted


SOCKETS, CORES, THREADS, BOXES = 2, 56, 2, 56


def server_topology() -> list[dict[str, int]]:
    """Linux's numbering on a 2-socket SMT server: threads 0 of every core first."""
    cpus = []
    for thread in range(THREADS):
        for socket in range(SOCKETS):
            for core in range(CORES):
                cpu = (thread * SOCKETS + socket) * CORES + core
                cpus.append({"cpu": cpu, "socket": socket, "core": core, "node": socket})
    return sorted(cpus, key=lambda c: c["cpu"])


def build_system_wide(out: Path, intervals: int) -> int:
    """The 16 M-line system-wide profile; returns its lines."""
    cpus = SOCKETS * CORES * THREADS
    # the recorded msr/tsc/ line: CPU0,VALUE,,EVENT,RUN_TIME,100.00,METRIC,METRIC_UNIT
    tsc = next(rest for _, rest in interval_block() if ",msr/tsc/," in rest).split(",")

    def run_text(names: list[str], where: list[tuple[int, int]]) -> str:
        """One -I -a -A perf.csv: per interval, per event, a line per (cpu, repeat) in `where`."""
        parts = [HEADER]
        for i in range(intervals):
            t = stamp(i)
            for e, name in enumerate(names):
                value = 260_000_000 + 1_000 * i + e
                parts.extend(
                    f"{t},CPU{cpu},{value + cpu + k},,{name},{tsc[4]},100.00,{tsc[6]},{tsc[7]}\n"
                    for cpu, k in where
                )
        return "".join(parts)

    core_where = [(cpu, 0) for cpu in range(cpus)]
    first_cpus = [(socket * CORES, box) for socket in range(SOCKETS) for box in range(BOXES)]

    def runs():
        for r in range(120):
            names = [f"CORE_EVENT.{5 * r + e}" for e in range(5)]
            refs = [outdir.EventRef(n, "cpu", f"cpu/event=0x{r:x},name={n}/", n) for n in names]
            yield refs, run_text(names, core_where)
        for r in range(25):
            names = [f"UNC_CHA_EVENT.{4 * r + e}" for e in range(4)]
            refs = [
                outdir.EventRef(n, "uncore_cha", f"uncore_cha/event=0x{r:x},name={n}/", n)
                for n in names
            ]
            yield refs, run_text(names, first_cpus)

    write_profile(out, runs(), server_topology(), 145)
    return (120 * 5 * len(core_where) + 25 * 4 * len(first_cpus)) * intervals


def best(fn, times: int = 3) -> float:
    """Best of `times` wall times: the machine is shared, the minimum is the least disturbed."""
    seconds = []
    for _ in range(times):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return min(seconds)


def table(lines: int, rows: list[tuple[str, float, str]]) -> None:
    print(f"{'step':<40} {'seconds':>8} {'lines/s':>12} {'vs pandas':>10} {'peak RSS':>9}")
    base = rows[0][1]
    for name, seconds, rss in rows:
        speed = f"{lines / seconds:>12,.0f}"
        print(f"{name:<40} {seconds:>8.2f} {speed} {base / seconds:>10.2f} {rss:>9}")


def read_all(files: list[Path]) -> None:
    for f in files:
        pd.read_csv(f, header=None, comment="#")


def two_million(out: Path, runs: int, intervals: int) -> None:
    lines, counted = build(out, runs, intervals)
    files = [f / outdir.PERF_OUTPUT for f in outdir.run_folders(out)]
    size = sum(f.stat().st_size for f in files)
    sep, interval = ",", True
    kept: dict[str, aggregate.Aggregation] = {}
    rows = [
        ("pandas.read_csv (baseline)", best(lambda: read_all(files)), ""),
        (
            "stat_arrow.read (parse)",
            best(lambda: [stat_arrow.read(f.read_bytes(), sep, interval) for f in files]),
            "",
        ),
        (
            "aggregate_to (parse+map+report+write)",
            best(lambda: kept.setdefault("s", aggregate.aggregate_to(out))),
            "",
        ),
        (
            "aggregate (in memory, old API)",
            best(lambda: kept.update(m=aggregate.aggregate(out))),
            "",
        ),
        (
            "csvfile.write_csv of that frame",
            best(lambda: csvfile.write_csv(kept["m"].frame, out / "again.csv")),
            "",
        ),
    ]
    print(f"{lines:,} perf CSV lines in {len(files)} run folders ({size / 2**20:.0f} MiB)")
    table(lines, rows)
    assert kept["s"].report.rows == counted == len(kept["m"].frame)


def child_peak(argv: list[str]) -> tuple[float, int, int]:
    """Wall seconds, exit status and peak RSS (bytes) of a child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - start, status, usage.ru_maxrss * 1024


def system_wide(out: Path, intervals: int) -> None:
    lines = build_system_wide(out, intervals)
    files = [f / outdir.PERF_OUTPUT for f in outdir.run_folders(out)]
    size = sum(f.stat().st_size for f in files)
    reading = [
        sys.executable,
        "-c",
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})"
        f"; import aggregate as a; from pathlib import Path; "
        f"a.read_all(sorted(Path({str(out)!r}).glob('runs/*/perf.csv')))",
    ]
    base_s, _, base_rss = child_peak(reading)
    agg_s, status, agg_rss = child_peak([sys.executable, "-m", "autoprof", "aggregate", str(out)])
    written = (out / outdir.RESULTS).stat().st_size
    print(
        f"{lines:,} perf CSV lines in {len(files)} run folders ({size / 2**20:.0f} MiB), "
        f"224 CPUs, {SOCKETS * BOXES} CHA boxes; results.csv {written / 2**20:.0f} MiB"
    )
    table(
        lines,
        [
            ("pandas.read_csv of every perf.csv", base_s, f"{base_rss / 2**20:.0f} MiB"),
            ("autoprof aggregate OUT (whole command)", agg_s, f"{agg_rss / 2**20:.0f} MiB"),
        ],
    )
    assert status == 0, "autoprof aggregate failed"


def one_run(root: Path, sizes: list[int]) -> None:
    """Peak memory of `autoprof aggregate` against the length of a single run's perf.csv: the
    recording's intervals repeated (advancing times) to each size, aggregated in a child."""
    block = interval_block()
    events = sorted({rest.split(",")[3] for _, rest in block})
    refs = [outdir.EventRef(name=e, pmu="software", spec=e, label=e) for e in events]
    print(f"{'lines':>12} {'perf.csv':>10} {'seconds':>8} {'peak RSS':>10} {'results rows':>13}")
    for lines in sizes:
        out = root / f"one-{lines}"
        intervals = -(-lines // len(block))
        texts = (
            f"{stamp(i)},{rest}\n" for i in range(intervals) for _, rest in block
        )  # made as written: this process stays small
        write_profile(out, [(refs, texts)], [], 1)
        size = (outdir.run_dir(out, 1, 1) / outdir.PERF_OUTPUT).stat().st_size
        seconds, status, rss = child_peak([sys.executable, "-m", "autoprof", "aggregate", str(out)])
        report = read_report(out / outdir.REPORT) if status == 0 else None
        shown = f"{report.rows:,}" if report else f"failed ({status})"
        print(
            f"{intervals * len(block):>12,} {size / 2**20:>7.0f} MiB {seconds:>8.1f} "
            f"{rss / 2**20:>6.0f} MiB {shown:>13}"
        )
        shutil.rmtree(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--intervals", type=int, default=None)
    parser.add_argument("--system-wide", action="store_true")
    parser.add_argument(
        "--one-run",
        metavar="LINES,...",
        help="Peak memory of aggregate vs the lines of one run, e.g. 1000000,10000000.",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.one_run:
            one_run(Path(tmp), [int(n) for n in args.one_run.split(",")])
        elif args.system_wide:
            system_wide(Path(tmp), args.intervals or 110)
        else:
            two_million(Path(tmp), args.runs, args.intervals or 4000)


if __name__ == "__main__":
    main()
