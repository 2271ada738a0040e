"""Trace-driven flame graphs: speed against a plain regex loop, and peak memory.

Builds the bundled calls.c (static), traces every instruction under QEMU user mode
(`qemu-x86_64 -singlestep -d exec,nochain`), then times on the same file, in the same run:
- the reference: a plain Python loop that only pulls each line's address out with a regex
  (``for line in f: m = QEMU.match(line); int(m.group(1), 16)``), nothing else;
- autoprof's parse + unwind in-process (`load_trace`), whose ratio to the loop is the target
  (at most 1: unwinding costs less than reading the addresses line by line would);
- `autoprof flamegraph --trace LOG --binary calls --folded` end to end (start-up included),
  with its peak RSS (GNU time). The trace is streamed: memory should not grow with its length,
  so the two sizes' peak RSS should be alike.
Each timing is the best of three, the loop and autoprof taking turns.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autoprof.examples import build_calls  # noqa: E402
from autoprof.flame.unwind import load_trace  # noqa: E402

ROUNDS = (2000, 8000)  # calls.c rounds: about 0.5 and 2 million instructions
_QEMU = re.compile(r"Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")  # trace.py's pattern


def autoprof_argv() -> list[str]:
    script = Path(sys.executable).with_name("autoprof")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "autoprof"]


def timed_command(argv: list[str]) -> tuple[float, float | None]:
    """Wall time and peak RSS (MiB, from GNU time when installed) of one command."""
    gnu_time = Path("/usr/bin/time")
    with tempfile.NamedTemporaryFile("r") as peak:
        timed = [str(gnu_time), "-f", "%M", "-o", peak.name] if gnu_time.is_file() else []
        start = time.perf_counter()
        subprocess.run(
            [*timed, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
        )
        seconds = time.perf_counter() - start
        rss = int(peak.read().split()[-1]) / 1024 if timed else None
    return seconds, rss


def regex_loop(log: Path) -> None:
    """The reference: every line's address pulled out with a regex, nothing more."""
    with log.open() as lines:
        for line in lines:
            found = _QEMU.match(line)
            if found:
                int(found.group(1), 16)


def best_of(rounds: int, *runs: Callable[[], object]) -> list[float]:
    """Each run's best time over `rounds`, the runs taking turns."""
    best = [float("inf")] * len(runs)
    for _ in range(rounds):
        for i, run in enumerate(runs):
            start = time.perf_counter()
            run()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def main() -> int:
    if shutil.which("qemu-x86_64") is None:
        print("skipped: no qemu-x86_64 (apt-get install qemu-user)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        binary = build_calls(Path(tmp))
        print(
            f"{'trace lines':>12}{'MB':>6}{'regex loop s':>14}{'autoprof s':>12}{'ratio':>7}"
            f"{'lines/s':>11}{'command s':>11}{'peak RSS':>10}"
        )
        for rounds in ROUNDS:
            log = Path(tmp) / f"calls-{rounds}.log"
            qemu = ["qemu-x86_64", "-singlestep", "-d", "exec,nochain", "-D", str(log)]
            subprocess.run([*qemu, str(binary), str(rounds)], check=True)
            with log.open("rb") as f:
                lines = sum(1 for _ in f)
            loop, inside = best_of(3, partial(regex_loop, log), partial(load_trace, log, [binary]))
            argv = [*autoprof_argv(), "flamegraph", "--trace", str(log)]
            seconds, rss = timed_command([*argv, "--binary", str(binary), "--folded"])
            rss_text = f"{rss:.0f} MiB" if rss is not None else "-"
            print(
                f"{lines:>12,}{log.stat().st_size / 1e6:>6.0f}{loop:>14.2f}{inside:>12.2f}"
                f"{inside / loop:>7.2f}{lines / inside:>11,.0f}{seconds:>11.2f}{rss_text:>10}"
            )
            log.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
