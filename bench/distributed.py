"""Distributed profiling: wall time of one profile on one worker vs `--split 2` over two.

Usage: python bench/distributed.py [--writes N] [--repeat R] [--redis redis://127.0.0.1:6379]

Workload: the example program under its 12 hardware breakpoints (3 runs of 4 watchpoints),
`--repeat 2` by default: 6 (run, repeat) tasks that the two parts share evenly (round robin
over the tasks). Two real `autoprof worker` processes on this machine stand in for two identical
machines (a 2-core VM: each workload is single-threaded); a SQLite store in a temporary folder.
Wall time is from enqueueing to the last part finished, workers already started; both stored runs
are checked to count exactly. The load check is off (--max-load 1000): the workers share a VM.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoprof.catalog import machine
from autoprof.examples import build_writes, expected_writes, slot_addresses
from autoprof.queue import connection, jobs
from autoprof.queue.spec import JobSpec
from autoprof.results import csvfile
from autoprof.testing.workers import WorkerProcess, claim, wait_ready


def submit(conn, spec: JobSpec, split: int) -> list[str]:
    """Enqueue through the library (what `autoprof submit` does, without its start-up time)."""
    queue = connection.cpu_queue(machine.cpu_id())
    return [job.id for job in jobs.submit(conn, queue, jobs.split_specs(spec, split))]


def finish(conn, ids: list[str], timeout: float = 900) -> list[jobs.JobInfo]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [j for j in jobs.list_jobs(conn) if j.id in ids]
        if len(found) == len(ids) and all(j.status in ("finished", "failed") for j in found):
            bad = [j for j in found if j.status != "finished"]
            if bad:
                raise SystemExit(f"job failed: {bad[0].error}")
            return found
        time.sleep(0.1)
    raise SystemExit(f"jobs {ids} did not finish in {timeout} s")


def check_exact(store: str, run_id: str, work: Path, n: int, repeat: int) -> None:
    path = work / f"{run_id}.csv"
    subprocess.run(
        [sys.executable, "-m", "autoprof", "runs", "export", run_id, "--store", store, "-o",
         str(path)], check=True, capture_output=True,
    )  # fmt: skip
    frame = csvfile.read_csv(path)
    got = frame[frame["PMU"] == "breakpoint"].groupby("EVENT_NAME")["SAMPLE_VALUE"].sum()
    want = dict(zip(slot_addresses(work / "writes"), expected_writes(n), strict=True))
    for address, count in want.items():
        assert got[f"mem:{address}:w"] == count * repeat, address


def parallel_efficiency(binary: Path, n: int) -> tuple[float, float]:
    """Seconds of one `perf stat` over 4 watchpoints, and of two at once with no queue at all:
    how independent two "machines" on this one VM really are."""
    argv = ["perf", "stat", "-x,", "-o", "/dev/null"]
    argv += [arg for a in slot_addresses(binary)[-4:] for arg in ("-e", f"mem:{a}:w")]
    argv += [str(binary), str(n)]
    timings = []
    for copies in (1, 2):
        began = time.monotonic()
        procs = [subprocess.Popen(argv, stdout=subprocess.DEVNULL) for _ in range(copies)]
        for proc in procs:
            proc.wait()
        timings.append(time.monotonic() - began)
    return timings[0], timings[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=4000, help="writes N (default 4000)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379")
    args = parser.parse_args()
    claimed = claim(args.redis)
    if claimed is None:
        raise SystemExit(f"no empty Redis database index at {args.redis}")
    redis_text, client = claimed
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        binary = build_writes(work)
        store = f"sqlite:///{work / 'results.db'}"
        allow = f"{binary} [0-9]+"
        spec = JobSpec(
            command=[str(binary), str(args.writes)],
            events=[f"mem:{a}:w" for a in slot_addresses(binary)],
            options={"repeat": args.repeat},
        )
        conn = connection.connect(redis_text)
        workers = [WorkerProcess(work, redis_text, store, "bench-1", allow)]
        try:
            wait_ready(conn, ["bench-1"])
            began = time.monotonic()
            one = finish(conn, submit(conn, spec, 1))
            one_s = time.monotonic() - began
            workers.append(WorkerProcess(work, redis_text, store, "bench-2", allow))
            wait_ready(conn, ["bench-1", "bench-2"])
            began = time.monotonic()
            two = finish(conn, submit(conn, spec, 2))
            two_s = time.monotonic() - began
        finally:
            for worker in workers:
                worker.stop()
            client.flushdb()
        check_exact(store, one[0].result.run_id, work, args.writes, args.repeat)
        check_exact(store, two[0].result.run_id, work, args.writes, args.repeat)
        alone, together = parallel_efficiency(binary, args.writes)
        tasks = 3 * args.repeat
        print(f"workload: writes {args.writes}, 12 watchpoints = 3 runs x repeat {args.repeat}")
        print(f"{'mode':<10} {'workers':>7} {'tasks':>5} {'wall s':>7} {'job s':>13} {'ratio':>6}")
        print(f"{'one':<10} {1:>7} {tasks:>5} {one_s:>7.2f} {one[0].seconds:>13.2f} {1:>6.2f}")
        job_s, ratio = "/".join(f"{j.seconds:.2f}" for j in two), two_s / one_s
        print(f"{'--split 2':<10} {2:>7} {tasks:>5} {two_s:>7.2f} {job_s:>13} {ratio:>6.2f}")
        hosts = ", ".join(sorted(j.host or "?" for j in two))
        print(f"split parts ran on: {hosts}; both stored runs count exactly")
        print(
            f"this VM without any queue: one perf run {alone:.2f} s, two at once {together:.2f} s "
            f"(x{together / alone:.2f}; 1.00 would be two independent machines)"
        )


if __name__ == "__main__":
    main()
