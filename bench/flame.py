"""Folding speed and memory: the example `perf script` input repeated 10 times (31 MB).

End to end, start-up included: `autoprof flamegraph X --folded` against FlameGraph's
stackcollapse-perf.pl on the same file (the Perl script is found at $FLAMEGRAPH_DIR or on PATH;
it is not packaged by Debian or PyPI, so without it that row is skipped). Goal (issue 11): at
least 2x the Perl script's speed, peak RSS under 100 MB. Also times the in-process fold and the
SVG and speedscope renderers.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
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
REPEAT = 10
ROUNDS = 3
GOAL_SPEEDUP, GOAL_RSS_MB = 2.0, 100.0


def stackcollapse() -> Path | None:
    home = os.environ.get("FLAMEGRAPH_DIR")
    if home and (Path(home) / "stackcollapse-perf.pl").is_file():
        return Path(home) / "stackcollapse-perf.pl"
    found = shutil.which("stackcollapse-perf.pl")
    return Path(found) if found else None


def autoprof_argv() -> list[str]:
    script = Path(sys.executable).with_name("autoprof")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "autoprof"]


def run_best(argv: list[str], out: Path) -> tuple[float, float | None]:
    """Best wall time of ROUNDS runs and the command's largest peak RSS (MiB), as GNU time
    measures it (a child forked by this Python would count this process's memory too)."""
    gnu_time = Path("/usr/bin/time")
    best, rss = float("inf"), None
    for _ in range(ROUNDS):
        with tempfile.NamedTemporaryFile("r") as peak, out.open("wb") as sink:
            timed = [str(gnu_time), "-f", "%M", "-o", peak.name] if gnu_time.is_file() else []
            start = time.perf_counter()
            subprocess.run([*timed, *argv], stdout=sink, stderr=subprocess.DEVNULL, check=True)
            best = min(best, time.perf_counter() - start)
            if timed:
                rss = max(rss or 0.0, int(peak.read().split()[-1]) / 1024)
    return best, rss


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
    perl = stackcollapse()
    rows = []
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "example-x10.script"
        with plain.open("wb") as f:
            for _ in range(REPEAT):
                f.write(text)
        mb = plain.stat().st_size / 1e6
        ours = Path(tmp) / "ours.folded"
        t_ours, rss_ours = run_best([*autoprof_argv(), "flamegraph", str(plain), "--folded"], ours)
        rows.append(("autoprof flamegraph --folded", t_ours, f"{mb / t_ours:.0f} MB/s", rss_ours))
        if perl is not None:
            theirs = Path(tmp) / "perl.folded"
            t_perl, rss_perl = run_best(["perl", str(perl), str(plain)], theirs)
            rows.append(("stackcollapse-perf.pl", t_perl, f"{mb / t_perl:.0f} MB/s", rss_perl))
            same = ours.read_bytes() == theirs.read_bytes()
        t_fold, folded = best_of(lambda: load(plain))
    t_svg, svg = best_of(lambda: SvgRenderer().render(folded))
    t_text, _ = best_of(lambda: FoldedRenderer().render(folded))
    t_ss, _ = best_of(lambda: SpeedscopeRenderer().render(folded))
    rows += [
        ("fold in process (no start-up)", t_fold, f"{mb / t_fold:.0f} MB/s", None),
        ("write folded text", t_text, f"{len(folded.stacks)} stacks", None),
        ("render SVG", t_svg, f"{len(svg) / 1e6:.1f} MB out", None),
        ("render speedscope JSON", t_ss, "", None),
    ]
    print(f"input: {mb:.1f} MB of perf script text; best of {ROUNDS}; whole commands first")
    print(f"{'step':<34}{'seconds':>9}{'speed':>14}{'peak RSS':>12}")
    for name, seconds, speed, rss in rows:
        rss_text = f"{rss:.0f} MiB" if rss is not None else ""
        print(f"{name:<34}{seconds:>9.3f}{speed:>14}{rss_text:>12}")
    if rss_ours is None:
        print("no /usr/bin/time (Debian package time): peak RSS not measured")
    elif rss_ours >= GOAL_RSS_MB:
        ok = False
    if perl is None:
        print("stackcollapse-perf.pl not found (set FLAMEGRAPH_DIR): no speed-up measured")
    else:
        speedup = t_perl / t_ours
        ok = ok and speedup >= GOAL_SPEEDUP and same
        print(
            f"autoprof is {speedup:.1f}x stackcollapse-perf.pl end to end"
            f" (goal >= {GOAL_SPEEDUP}x);"
            f" outputs {'identical' if same else 'DIFFER'}"
        )
    if rss_ours is not None:
        print(f"peak RSS {rss_ours:.0f} MiB (goal < {GOAL_RSS_MB:.0f} MiB)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
