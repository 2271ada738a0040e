"""CLI start-up: how long `autoprof --help`, every `autoprof COMMAND --help` and
`autoprof schedule --cpu SKX --json` take, whole processes, beside `python -c pass`.

    python bench/cli.py [--runs 7] [--events-dir DIR]

Prints the median wall and CPU time of each and its target (#11: help under 0.2 s, the
Skylake-X plan under 0.6 s), then `autoprof --help` over `autoprof schedule --help` (#30:
within 1.3x; the listing imports no command module), then every `--help` over `python -c pass`
(#40: within 1.5x, CPU: a help comes from the help cache that `make install` writes, which the
table's head says when it is not current). The schedule row needs Intel perfmon
data (--events-dir, $AUTOPROF_EVENTS_DIR or ../shared/events/intel) and is skipped without
it. Wall times on a shared, loaded machine are noisy: the CPU time column is steadier there.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from autoprof.commands import COMMANDS, helpcache

DEFAULT_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "events" / "intel"
HELP_TARGET_S = 0.2
SCHEDULE_TARGET_S = 0.6
HELP_RATIO = 1.3  # autoprof --help over autoprof schedule --help (#30)
START_RATIO = 1.5  # any autoprof COMMAND --help over python -c pass, CPU (#40)


def median_seconds(argv: list[str], runs: int, env: dict[str, str]) -> tuple[float, float]:
    """Median wall time and median CPU time (user + system) of `argv` over `runs` runs, after
    one warm-up run; it must succeed. On a loaded machine the CPU time is the steadier figure."""
    walls, cpus = [], []
    for k in range(runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode().strip()}")
        if k:  # the first run warms the page cache and .pyc files
            walls.append(wall)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--events-dir", type=Path, default=None)
    args = parser.parse_args()
    autoprof = [sys.executable, "-m", "autoprof"]
    events_dir = args.events_dir or Path(os.environ.get("AUTOPROF_EVENTS_DIR") or DEFAULT_DIR)
    env = os.environ | {"AUTOPROF_EVENTS_DIR": str(events_dir)}
    rows: list[tuple[str, list[str], float | None]] = [
        ("python -c pass", [sys.executable, "-c", "pass"], None),
        ("autoprof --help", [*autoprof, "--help"], HELP_TARGET_S),
    ]
    rows += [
        (f"autoprof {name} --help", [*autoprof, name, "--help"], HELP_TARGET_S) for name in COMMANDS
    ]
    if (events_dir / "mapfile.csv").is_file():
        argv = [*autoprof, "schedule", "--cpu", "SKX", "--json"]
        rows.append(("autoprof schedule --cpu SKX --json", argv, SCHEDULE_TARGET_S))
    else:
        print(f"schedule row skipped: no Intel perfmon data at {events_dir} (pass --events-dir)")
    print(f"medians of {args.runs} runs; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    cache = helpcache.load()
    if cache is None or not helpcache.current(cache, env, list(COMMANDS)):
        print("help cache missing or not current (a source edited since): run make install")
    print(f"{'command':<40} {'wall s':>8} {'cpu s':>8} {'target s':>9}  verdict (wall)")
    missed = 0
    measured = {}
    for label, argv, target in rows:
        wall, cpu = median_seconds(argv, args.runs, env)
        measured[label] = (wall, cpu)
        verdict = "" if target is None else ("ok" if wall < target else "MISSED")
        missed += verdict == "MISSED"
        shown = "-" if target is None else f"{target:.2f}"
        print(f"{label:<40} {wall:>8.3f} {cpu:>8.3f} {shown:>9}  {verdict}")
    (wall, cpu), (wall_s, cpu_s) = measured["autoprof --help"], measured["autoprof schedule --help"]
    ratio = wall / wall_s
    missed += ratio > HELP_RATIO
    print(
        f"autoprof --help / autoprof schedule --help: {ratio:.2f}x wall, {cpu / cpu_s:.2f}x cpu "
        f"(target {HELP_RATIO}x): {'ok' if ratio <= HELP_RATIO else 'MISSED'}"
    )
    base = measured["python -c pass"][1]
    helps = {k: v[1] / base for k, v in measured.items() if k.endswith("--help")}
    worst = max(helps, key=helps.__getitem__)
    missed += helps[worst] > START_RATIO
    print(
        f"COMMAND --help / python -c pass, cpu: {min(helps.values()):.2f}x to {helps[worst]:.2f}x"
        f" ({worst}; target {START_RATIO}x): {'ok' if helps[worst] <= START_RATIO else 'MISSED'}"
    )
    print(f"targets missed: {missed} (wall time; compare the cpu column when the load is high)")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
