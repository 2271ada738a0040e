"""Trace-driven flame graphs: lines per second and peak memory on a multi-million-line trace.

Builds the bundled calls.c (static), traces every instruction under QEMU user mode
(`qemu-x86_64 -singlestep -d exec,nochain`), then times `autoprof flamegraph --trace LOG
--binary calls --folded` end to end (start-up included) with its peak RSS (GNU time), and the
in-process parse + unwind alone. The trace is streamed: memory should not grow with its length,
so the two sizes' peak RSS should be alike.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autoprof.examples import build_calls  # noqa: E402
from autoprof.flame.unwind import load_trace  # noqa: E402

ROUNDS = (2000, 8000)  # calls.c rounds: about 0.5 and 2 million instructions


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


def main() -> int:
    if shutil.which("qemu-x86_64") is None:
        print("skipped: no qemu-x86_64 (apt-get install qemu-user)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        binary = build_calls(Path(tmp))
        print(
            f"{'trace lines':>12}{'MB':>8}{'command s':>11}{'lines/s':>11}"
            f"{'in-process s':>14}{'lines/s':>11}{'peak RSS':>10}"
        )
        for rounds in ROUNDS:
            log = Path(tmp) / f"calls-{rounds}.log"
            subprocess.run(
                [
                    "qemu-x86_64",
                    "-singlestep",
                    "-d",
                    "exec,nochain",
                    "-D",
                    str(log),
                    str(binary),
                    str(rounds),
                ],
                check=True,
            )
            with log.open("rb") as f:
                lines = sum(1 for _ in f)
            argv = [
                *autoprof_argv(),
                "flamegraph",
                "--trace",
                str(log),
                "--binary",
                str(binary),
                "--folded",
            ]
            seconds, rss = timed_command(argv)
            start = time.perf_counter()
            load_trace(log, [binary])
            inside = time.perf_counter() - start
            rss_text = f"{rss:.0f} MiB" if rss is not None else "-"
            print(
                f"{lines:>12,}{log.stat().st_size / 1e6:>8.0f}{seconds:>11.2f}"
                f"{lines / seconds:>11,.0f}{inside:>14.2f}{lines / inside:>11,.0f}"
                f"{rss_text:>10}"
            )
            log.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
