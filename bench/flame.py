"""Folding speed: the example `perf script` input repeated 10 times (31 MB), read from a file.

stackcollapse-perf.pl folds it at about 24 MB/s on this machine (the figure given by issue 7;
FlameGraph's scripts are not packaged by Debian or PyPI, so it is not re-measured here).
The goal is at least twice that. Also times the SVG and speedscope renderers on the result.
"""

from __future__ import annotations

import gzip
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autoprof.flame.renderer import FoldedRenderer  # noqa: E402
from autoprof.flame.source import load  # noqa: E402
from autoprof.flame.speedscope import SpeedscopeRenderer  # noqa: E402
from autoprof.flame.svg import SvgRenderer  # noqa: E402

SAMPLE = REPO.parent / "shared" / "samples" / "example-perf-stacks.txt.gz"
REFERENCE_MB_S = 24.0  # stackcollapse-perf.pl on this machine (issue 7)
REPEAT = 10
ROUNDS = 3


def best_of(fn, rounds: int = ROUNDS) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> int:
    if not SAMPLE.is_file():
        print(f"skipped: {SAMPLE} not found (a fresh clone has no ../shared)")
        return 0
    text = gzip.decompress(SAMPLE.read_bytes())
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "example-x10.script"
        plain.write_bytes(text * REPEAT)
        packed = Path(tmp) / "example-x10.script.gz"
        packed.write_bytes(gzip.compress(text * REPEAT, compresslevel=6))
        mb = plain.stat().st_size / 1e6
        t_plain, folded = best_of(lambda: load(plain))
        t_gz, _ = best_of(lambda: load(packed))
    t_text, _ = best_of(lambda: FoldedRenderer().render(folded))
    t_svg, svg = best_of(lambda: SvgRenderer().render(folded))
    t_ss, _ = best_of(lambda: SpeedscopeRenderer().render(folded))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = [
        ("fold perf script text", f"{mb:.1f} MB", t_plain, f"{mb / t_plain:.0f} MB/s"),
        ("fold the same, gzip", f"{mb:.1f} MB", t_gz, f"{mb / t_gz:.0f} MB/s"),
        ("stackcollapse-perf.pl (reference)", f"{mb:.1f} MB", mb / REFERENCE_MB_S, "24 MB/s"),
        ("write folded text", f"{len(folded.stacks)} stacks", t_text, ""),
        ("render SVG", f"{len(svg) / 1e6:.1f} MB out", t_svg, ""),
        ("render speedscope JSON", f"{len(folded.stacks)} stacks", t_ss, ""),
    ]
    print(f"{'step':<36}{'size':>14}{'seconds':>10}{'speed':>12}")
    for name, size, seconds, speed in rows:
        print(f"{name:<36}{size:>14}{seconds:>10.3f}{speed:>12}")
    ratio = mb / t_plain / REFERENCE_MB_S
    print(f"folding is {ratio:.1f}x stackcollapse-perf.pl (goal: >= 2x); peak RSS {rss:.0f} MiB")
    return 0 if ratio >= 2 else 1


if __name__ == "__main__":
    sys.exit(main())
