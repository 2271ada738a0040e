"""What `autoprof profile` adds to perf: fixed cost and per-run overhead.

The same breakpoint plans (16 events = 4 runs, 96 events = 24 runs, on the example workload
doing next to nothing) run two ways, alternately, ROUNDS times each:

- `autoprof profile` end to end (a fresh output folder each time);
- bare: the exact `perf stat` argv of every run (from `profile --dry-run`), one after the other.

The 4-run and 24-run totals give, by difference, the per-run cost and the fixed cost of each
way (cost = fixed + runs x per_run). Targets (issue 11): autoprof's fixed cost beyond bare perf
under 0.4 s, its per-run cost beyond bare perf under 10 ms. Each figure is the best of ROUNDS:
on a loaded machine the minimum is the least disturbed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autoprof.examples import build_writes, slot_addresses  # noqa: E402

ROUNDS = 7
WRITES = "1"  # the workload does next to nothing: what is timed is the runner
FIXED_TARGET_S = 0.4
PER_RUN_TARGET_MS = 10.0
SMALL, LARGE = 4, 24  # runs of the two plans (4 breakpoints per run)
AUTOPROF = [sys.executable, "-m", "autoprof"]


def events(binary: Path, count: int) -> list[str]:
    """`count` distinct breakpoint events: each slot address and 4-byte steps above it."""
    base = [int(a, 16) for a in slot_addresses(binary)]
    addresses = [a + 4 * k for k in range(8) for a in base][:count]
    return [arg for a in addresses for arg in ("-e", f"mem:{a:#x}:w")]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_autoprof(args: list[str], out: Path) -> None:
    proc = subprocess.run(
        [*AUTOPROF, "profile", *args[:-2], "-o", str(out), "--", *args[-2:]],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"autoprof profile failed: {proc.stderr.strip()}")


def bare_argvs(args: list[str], out: Path) -> list[list[str]]:
    dry = subprocess.run(
        [*AUTOPROF, "profile", "--dry-run", *args[:-2], "-o", str(out), "--", *args[-2:]],
        capture_output=True,
        text=True,
        check=True,
    )
    return [shlex.split(line)[1:] for line in dry.stdout.splitlines()]  # drop LC_ALL=C


def run_bare(argvs: list[list[str]]) -> None:
    env = dict(os.environ, LC_ALL="C")
    for argv in argvs:
        folder = Path(argv[argv.index("-o") + 1]).parent
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "stdout").open("wb") as out, (folder / "stderr").open("wb") as err:
            subprocess.run(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)


def main() -> int:
    # an installed autoprof has its bytecode compiled (this checkout may run with
    # PYTHONDONTWRITEBYTECODE=1, which would time the compiler at every start)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "autoprof")], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        binary = build_writes(root / "bin")
        sizes = {SMALL: events(binary, 4 * SMALL), LARGE: events(binary, 4 * LARGE)}
        times: dict[tuple[str, int], list[float]] = {}
        for i in range(ROUNDS):
            for runs, evs in sizes.items():
                args = [*evs, str(binary), WRITES]
                argvs = bare_argvs(args, root / f"bare{runs}-{i}")
                assert len(argvs) == runs, (runs, len(argvs))
                out = root / f"prof{runs}-{i}"
                times.setdefault(("autoprof", runs), []).append(
                    timed(lambda a=args, o=out: run_autoprof(a, o))
                )
                times.setdefault(("bare", runs), []).append(timed(lambda v=argvs: run_bare(v)))
    best = {key: min(values) for key, values in times.items()}
    fit = {}
    for way in ("bare", "autoprof"):
        per_run = (best[(way, LARGE)] - best[(way, SMALL)]) / (LARGE - SMALL)
        fit[way] = (best[(way, SMALL)] - SMALL * per_run, per_run)
    print(f"autoprof profile vs bare perf stat, breakpoint groups, best of {ROUNDS}")
    small, large = f"{SMALL} runs s", f"{LARGE} runs s"
    print(f"{'way':<10}{small:>10}{large:>11}{'fixed s':>10}{'per run ms':>12}")
    for way in ("bare", "autoprof"):
        fixed, per_run = fit[way]
        print(
            f"{way:<10}{best[(way, SMALL)]:>10.3f}{best[(way, LARGE)]:>11.3f}"
            f"{fixed:>10.3f}{1000 * per_run:>12.1f}"
        )
    fixed = fit["autoprof"][0] - fit["bare"][0]
    per_run = 1000 * (fit["autoprof"][1] - fit["bare"][1])
    print(f"{'overhead':<10}{'':>10}{'':>11}{fixed:>10.3f}{per_run:>12.1f}")
    print(
        f"targets: fixed < {FIXED_TARGET_S} s ({'met' if fixed < FIXED_TARGET_S else 'MISSED'}), "
        f"per run < {PER_RUN_TARGET_MS:g} ms "
        f"({'met' if per_run < PER_RUN_TARGET_MS else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
