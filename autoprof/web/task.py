"""One web job, in a child process: `python -m autoprof.web.task FOLDER`.

stat/profile: `pipeline.measure`, as the CLI and the queue worker run it (every chosen event,
scheduled without multiplexing), aggregated and uploaded to the store; record: `perf record`,
then the flame graph SVG and the top functions. Writes FOLDER/result.json (a
`queue.model.JobResult`); SIGINT (the Stop button) stops perf as Ctrl-C does, and the job ends
"stopped" with nothing stored.

The store's URL comes on standard input, and the process is not dumpable: the workload, run as
the same user, reads neither its environment nor its memory. The job's environment variables go
to the workload alone, never to this process (they would choose its caches and settings).
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

from autoprof.errors import AutoprofError
from autoprof.queue.model import DONE, FAILED, STOPPED, JobResult
from autoprof.util.records import write_json
from autoprof.web.form import JobRequest
from autoprof.web.job import REQUEST, RESULT

FLAME_SVG = "flame.svg"
TOP_FUNCTIONS = "top.json"
TOP = 30


def run_profile(request: JobRequest, out: Path, store: str | None) -> JobResult:
    from autoprof.pipeline import measure
    from autoprof.store import url

    hooks = measure.Hooks(warn=lambda text: print(f"autoprof: warning: {text}", flush=True))
    return JobResult.of(measure.measure(request.measurement(), out, url.resolve(store), hooks))


def run_record(request: JobRequest, out: Path) -> JobResult:
    from autoprof.flame.capture import record
    from autoprof.flame.source import load
    from autoprof.flame.svg import SvgRenderer
    from autoprof.perf.record import RecordOptions
    from autoprof.util.renderer import write

    options = RecordOptions(events=request.events, pid=request.pid)
    info = record(options, out, request.command, request.env)
    folded = load(out)
    title = request.command_line or f"pid {request.pid}"
    write(SvgRenderer(title=title).render(folded), out / FLAME_SVG)
    write_json(out / TOP_FUNCTIONS, top_functions(folded.stacks, folded.total))
    return JobResult(DONE, error=info.error)


def top_functions(stacks: dict[tuple[str, ...], int], total: int, k: int = TOP) -> list[dict]:
    """Functions by self weight (the leaf of each stack), with their share of all samples."""
    own: Counter[str] = Counter()
    for stack, weight in stacks.items():
        if stack:
            own[stack[-1]] += weight
    return [
        {"function": name, "self": weight, "percent": 100.0 * weight / total if total else 0.0}
        for name, weight in own.most_common(k)
    ]


def read_store() -> str | None:
    """The store's URL, one line on standard input (`localqueue.LocalQueue` writes it there: the
    environment and the arguments are the workload's to read); standard input is then
    /dev/null, as it is for a job's workload."""
    line = sys.stdin.readline().strip()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return line or None


def main(folder: Path) -> int:
    from autoprof.perf.process import Interrupted, keep_private

    keep_private()  # before the store's URL is read: the workload runs as this user
    store = read_store()
    request = JobRequest(**json.loads((folder / REQUEST).read_text()))
    out = folder / "out"
    try:
        if request.tool == "record":
            result = run_record(request, out)
        else:
            result = run_profile(request, out, store)
    except (Interrupted, KeyboardInterrupt):
        result = JobResult(STOPPED, error="stopped by the user")
    except AutoprofError as err:
        print(f"autoprof: error: {err}", flush=True)
        result = JobResult(FAILED, error=str(err))
    write_json(folder / RESULT, result.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
