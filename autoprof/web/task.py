"""One web job, in a child process: `python -m autoprof.web.task FOLDER`.

stat/profile: the library's profile (every chosen event, scheduled without multiplexing), then
aggregate and upload to the store ($AUTOPROF_STORE); record: `perf record`, then the flame graph
SVG and the top functions. Writes FOLDER/result.json with the state; SIGINT (the Stop button)
stops perf as Ctrl-C does, and the job ends "stopped" with nothing stored.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from autoprof.errors import AutoprofError
from autoprof.run import outdir
from autoprof.web.jobs import REQUEST, RESULT, JobRequest

FLAME_SVG = "flame.svg"
TOP_FUNCTIONS = "top.json"
TOP = 30


def run_profile(request: JobRequest, out: Path) -> dict:
    from autoprof.catalog import host
    from autoprof.results import aggregate
    from autoprof.run.options import ProfileOptions
    from autoprof.run.profile import check_machine, plan_for, profile
    from autoprof.store import engine, upload

    options = ProfileOptions(interval_ms=request.interval_ms, repeat=request.repeat)
    if request.pid is not None:  # every group watches the running process for `duration`
        options = replace(options, pids=str(request.pid), duration=request.duration)
    options.check()
    catalog, plan = plan_for(host.build_catalog(), request.events)
    for warning in check_machine(catalog, options, request.command):
        print(f"autoprof: warning: {warning}", flush=True)
    outcome = profile(out, request.command, catalog, plan, options)
    aggregate.aggregate_to(out)
    done = upload.upload(engine.open_store(None), out, request.tags)
    failed = len(outcome.failed)
    return {
        "state": "done",
        "run_id": done.uuid,
        "error": f"{failed} run(s) failed" if failed else None,
    }


def run_record(request: JobRequest, out: Path) -> dict:
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
    return {"state": "done", "error": info.error}


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
        result = {"state": "stopped", "error": "stopped by the user"}
    except AutoprofError as err:
        print(f"autoprof: error: {err}", flush=True)
        result = {"state": "failed", "error": str(err)}
    outdir.write_json(folder / RESULT, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
