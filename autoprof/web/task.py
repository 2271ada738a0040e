"""One web job, in a child process: `python -m autoprof.web.task FOLDER`.

stat/profile: `pipeline.measure`, as the CLI and the queue worker run it (every chosen event,
scheduled without multiplexing), aggregated and uploaded to the store ($AUTOPROF_STORE);
record: `perf record`, then the flame graph SVG and the top functions. Writes FOLDER/result.json
(a `queue.model.JobResult`); SIGINT (the Stop button) stops perf as Ctrl-C does, and the job
ends "stopped" with nothing stored.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from autoprof.errors import AutoprofError
from autoprof.queue.model import DONE, FAILED, STOPPED, JobResult
from autoprof.run import outdir
from autoprof.web.jobs import REQUEST, RESULT, JobRequest

FLAME_SVG = "flame.svg"
TOP_FUNCTIONS = "top.json"
TOP = 30


def run_profile(request: JobRequest, out: Path) -> JobResult:
    from autoprof.pipeline import measure
    from autoprof.run.options import EventSelection, ProfileOptions
    from autoprof.store import url

    options = ProfileOptions(interval_ms=request.interval_ms, repeat=request.repeat)
    if request.pid is not None:  # every group watches the running process for `duration`
        options = replace(options, pids=str(request.pid), duration=request.duration)
    spec = measure.MeasureSpec(
        request.command,
        request.events,
        options.check(),
        EventSelection(reserve=request.reserve),
        tags=request.tags,
    )
    hooks = measure.Hooks(warn=lambda text: print(f"autoprof: warning: {text}", flush=True))
    return JobResult.of(measure.measure(spec, out, url.resolve(None), hooks))


def run_record(request: JobRequest, out: Path) -> JobResult:
    from autoprof.flame.capture import record
    from autoprof.flame.source import load
    from autoprof.flame.svg import SvgRenderer
    from autoprof.perf.record import RecordOptions

    options = RecordOptions(events=request.events, pid=request.pid)
    info = record(options, out, request.command)
    folded = load(out)
    title = request.command_line or f"pid {request.pid}"
    SvgRenderer(title=title).render(folded, out / FLAME_SVG)
    outdir.write_json(out / TOP_FUNCTIONS, top_functions(folded.stacks, folded.total))
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


def main(folder: Path) -> int:
    request = JobRequest(**json.loads((folder / REQUEST).read_text()))
    os.environ.update(request.env)
    out = folder / "out"
    from autoprof.perf.process import Interrupted

    try:
        result = run_record(request, out) if request.tool == "record" else run_profile(request, out)
    except (Interrupted, KeyboardInterrupt):
        result = JobResult(STOPPED, error="stopped by the user")
    except AutoprofError as err:
        print(f"autoprof: error: {err}", flush=True)
        result = JobResult(FAILED, error=str(err))
    outdir.write_json(folder / RESULT, result.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
