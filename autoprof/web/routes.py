"""Pages (Jinja2) and the JSON API under /api/ (the same data, described at /api/schema).

Handlers that touch the store or files are plain functions: Starlette runs them in its thread
pool, so a slow query never stalls the live stream of a running job.
"""

from __future__ import annotations

import asyncio
import json
import math
import shlex
from pathlib import Path
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from autoprof.analysis.stats import COLUMNS_NOTE
from autoprof.catalog.model import Catalog
from autoprof.errors import AutoprofError
from autoprof.run.options import ProfileOptions
from autoprof.store import queries, summary
from autoprof.web import analyses, views
from autoprof.web.admission import check_allowed, check_env, check_events
from autoprof.web.files import download, favicon, local_out, plotly_js, record_file, static_file
from autoprof.web.form import JobRequest
from autoprof.web.guard import TOKEN_COOKIE
from autoprof.web.limits import LimitedStream
from autoprof.web.state import has_token, require_token, state_of, token_matches

TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=select_autoescape(["html"]),
)
STREAM_PERIOD_S = 0.2


def page(request: Request, name: str, **context) -> HTMLResponse:
    state = state_of(request)
    context.update(read_only=state.settings.read_only, path=request.url.path)
    return HTMLResponse(TEMPLATES.get_template(name).render(**context))


def _filters(request: Request) -> views.RunFilters:
    q = request.query_params
    return views.RunFilters(
        q.get("text", ""),
        q.get("machine", ""),
        q.get("tag", ""),
        q.get("since", ""),
        q.get("until", ""),
    )


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    """A whole-number query parameter, clamped to low..high; 400 when it is not a number."""
    text = request.query_params.get(name) or str(default)
    try:
        return min(max(int(text), low), high)
    except ValueError:
        raise HTTPException(400, f"{name}={text!r} is not a whole number") from None


def _runs(request: Request) -> dict:
    state = state_of(request)
    page_number = _int_param(request, "page", 1, 1, 10**9)
    with state.settings.store.read() as conn:
        return views.runs_page(conn, _filters(request), page_number)


def runs_html(request: Request) -> Response:
    filters = _filters(request)
    query = urlencode({k: v for k, v in vars(filters).items() if v})
    return page(request, "runs.html", data=_runs(request), filters=filters, request_query=query)


def api_runs(request: Request) -> Response:
    """List stored runs, newest first: filters text, machine, tag (KEY=VALUE), since, until;
    page (50 a page)."""
    return JSONResponse(_runs(request))


def _overview(request: Request) -> dict:
    state = state_of(request)
    with state.settings.store.read() as conn:
        data = views.run_overview(conn, request.path_params["run_id"])
        data["events"] = views.event_table(conn, data["id"])
    descriptions = {e["name"]: e["description"] for e in countable_events(state)}
    for event in data["events"]:
        event["description"] = descriptions.get(event["event"], "")
    data["local_out"] = local_out(state, data["id"]) is not None
    return data


def run_html(request: Request) -> Response:
    return page(request, "run.html", run=_overview(request), columns_note=COLUMNS_NOTE)


def api_run(request: Request) -> Response:
    """One run: facts, plan, options, tags, sanity report and the per-event table."""
    return _json(_overview(request))


def _json(data) -> Response:
    """`data` as JSON, which has no NaN nor Infinity (a browser refuses them): null instead."""
    return Response(
        json.dumps(_finite(data), default=str, allow_nan=False), media_type="application/json"
    )


def _finite(data):
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(v) for v in data]
    return data


def api_series(request: Request) -> Response:
    """An event's per-interval counts (summed over CPUs), LTTB-downsampled to `points`
    (default 1000) per (run, repeat), and its histogram."""
    state = state_of(request)
    ident = request.path_params["run_id"]
    event = request.query_params.get("event", "")
    points = _int_param(request, "points", summary.CHART_POINTS, 10, 10_000)
    if points == summary.CHART_POINTS:  # what the page plots: kept in the run's summary
        text = summary.stored(state.settings.store, ident, summary.TIMELINE + event)
        if text is None:
            raise AutoprofError(f"no event {event!r} in run {ident}")
        return Response(text, media_type="application/json")
    with state.settings.store.read() as conn:
        uuid = queries.find_run(conn, ident).uuid
        return _json(views.event_series(conn, uuid, event, points))


def api_analysis(request: Request) -> Response:
    """Stats per event and the clustered correlation matrix of a run (`analyze` over it),
    computed once per run and kept in the store (`store.summary`)."""
    state = state_of(request)
    text = summary.stored(state.settings.store, request.path_params["run_id"], summary.ANALYSIS)
    return Response(text or "{}", media_type="application/json")


def api_metrics(request: Request) -> Response:
    """The metrics of a run (`analyze metrics` by the CPU id it recorded): the top-down tree
    as rows, with the bottleneck path, and the notes; `error` when the CPU has no metrics."""
    state = state_of(request)
    uuid, frame = state.frames.get(state.settings.store, request.path_params["run_id"])
    with state.settings.store.read() as conn:
        machine = views.run_machine(conn, uuid)
    return _json(analyses.run_metrics(frame, machine))


def _compare(request: Request) -> dict:
    state = state_of(request)
    a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
    test = request.query_params.get("test", "welch")
    if not a or not b:
        return {"a": a, "b": b, "test": test, "rows": None}
    with state.settings.store.read() as conn:
        runs = [views.run_overview(conn, ident) for ident in (a, b)]
    cpus = [{p["machine"]["cpu_id"] for p in run["parts"]} for run in runs]
    if cpus[0] != cpus[1]:
        raise AutoprofError(f"runs measured on different CPUs ({cpus[0]} vs {cpus[1]})")
    frames = [state.frames.get(state.settings.store, run["id"])[1] for run in runs]
    return {
        "a": runs[0]["id"],
        "b": runs[1]["id"],
        "test": test,
        "runs": runs,
        "rows": analyses.compare_runs(frames[0], frames[1], test),
    }


def compare_html(request: Request) -> Response:
    return page(request, "compare.html", data=_compare(request))


def api_compare(request: Request) -> Response:
    """`analyze compare` of runs a and b (query parameters; test welch or mannwhitney)."""
    return _json(_compare(request))


def api_delete(request: Request) -> Response:
    """Delete a run (token needed)."""
    state = require_token(request)
    with state.settings.store.write() as conn:
        uuid, rows = queries.delete_run(conn, request.path_params["run_id"])
    state.frames.forget(uuid)
    return _json({"deleted": uuid, "rows": rows})


def machine_catalog(state) -> Catalog:
    """This machine's catalog, tracepoints included (built once: it takes a second or two)."""
    if state.catalog is None:
        from autoprof.catalog import host

        state.catalog = host.build_catalog(tracepoints=True)
    return state.catalog


def countable_events(state) -> list[dict]:
    """The events of this machine that its kernel can count (a VM without a PMU: no
    hardware events), for the form's picker."""
    if state.countable is None:
        from autoprof.catalog import host

        catalog = host.countable(machine_catalog(state))
        state.countable = [
            {"name": e.name, "pmu": e.pmu, "description": e.description} for e in catalog.events
        ]
    return state.countable


def api_events(request: Request) -> Response:
    """This machine's events, the most used in stored runs first."""
    state = state_of(request)
    with state.settings.store.read() as conn:
        usage = views.event_usage(conn)
    events = [dict(e, used=usage.get(e["name"], 0)) for e in countable_events(state)]
    events.sort(key=lambda e: (-e["used"], e["name"]))
    return _json(events)


def _form_defaults(request: Request) -> dict:
    """The form's fields, from a past run (?run=ID) or a past job (?job=ID) when given (a
    job's environment with the token only)."""
    state, q = state_of(request), request.query_params
    if q.get("job") and (job := state.queue.get(q["job"])):
        r = job.request
        return {
            "tool": r.tool,
            "command": r.command_line,
            "events": r.events,
            # the values a job set are for token holders (they may be anything the user typed)
            "env": "\n".join(f"{k}={v}" for k, v in r.env.items()) if has_token(request) else "",
            "pid": r.pid or "",
            "duration": r.duration,
            "interval_ms": r.interval_ms,
            "repeat": r.repeat,
            "tags": "\n".join(f"{k}={v}" for k, v in r.tags.items()),
            **_where_fields(r.options),
        }
    if q.get("run"):
        with state.settings.store.read() as conn:
            run = views.run_overview(conn, q["run"])
        options = ProfileOptions.from_json(run["parts"][0]["options"] if run["parts"] else {})
        return {
            "tool": "profile" if options.repeat > 1 else "stat",
            "command": shlex.join(run["command"]),
            "events": sorted({e for names in run["plan_runs"] for e in names}),
            "env": "",
            "pid": "",  # a past run's processes are gone
            "duration": options.duration or 10,
            "interval_ms": options.interval_ms or 100,
            "repeat": options.repeat,
            "tags": "\n".join(f"{k}={v}" for k, v in run["tags"].items()),
            **_where_fields(options),
        }
    return {
        "tool": "stat",
        "command": "",
        "events": [],
        "env": "",
        "pid": "",
        "duration": 10,
        "interval_ms": 100,
        "repeat": 1,
        "tags": "",
        **_where_fields(ProfileOptions()),
    }


def _where_fields(options: ProfileOptions) -> dict:
    """The form's fields of what part of the program is counted: regions, threads, cores."""
    return {
        "regions": "\n".join(options.regions),
        "per_thread": options.per_thread,
        "pin": options.pin or "",
        "core_type": options.core_type or "",
        "emulate": options.emulate,
    }


def new_html(request: Request) -> Response:
    state = state_of(request)
    if state.settings.read_only:
        raise HTTPException(404, "this server is read-only (start it with --allow REGEX)")
    form, jobs = _form_defaults(request), state.queue.list()
    # logged in (the cookie): the token goes with every request, no field asks for it
    return page(request, "new.html", form=form, jobs=jobs, logged_in=has_token(request))


async def api_submit(request: Request) -> Response:
    """Queue a measurement (token needed; the command must match --allow). Returns at once."""
    state = require_token(request)
    try:
        job_request = JobRequest.from_form(json.loads(await request.body()))
    except (ValueError, RecursionError):  # RecursionError: arrays nested thousands deep
        raise HTTPException(400, "expected a JSON object") from None
    check_allowed(job_request, state.settings.allow)
    check_env(job_request, state.settings.allow_env)
    check_events(job_request, await asyncio.to_thread(machine_catalog, state))
    job = state.queue.submit(job_request)
    return Response(
        json.dumps(job.to_dict(private=True)), status_code=202, media_type="application/json"
    )


def _job(request: Request):
    job = state_of(request).queue.get(request.path_params["job_id"])
    if job is None:
        raise HTTPException(404, "no such job")
    return job


def api_jobs(request: Request) -> Response:
    """Jobs of this server, newest first (environment values and server paths with the token
    only)."""
    private = has_token(request)
    return _json([j.to_dict(private) for j in state_of(request).queue.list()])


def _tails(request: Request, job) -> dict:
    """The job's stdout/stderr/log tails with the token; without it, None each (a workload
    prints what it likes: keys, data, the paths it read)."""
    tails = job.tails()
    return tails if has_token(request) else dict.fromkeys(tails)


def api_job(request: Request) -> Response:
    """One job: state, request, stored run id; stdout/stderr/log tails (token needed for
    those, else null)."""
    job = _job(request)
    return _json(dict(job.to_dict(has_token(request)), **_tails(request, job)))


def api_stop(request: Request) -> Response:
    """Stop a job (token needed): a queued one is dropped, a running one stopped."""
    state = require_token(request)
    return _json(state.queue.stop(_job(request).id).to_dict(private=True))


async def api_stream(request: Request) -> Response:
    """Server-Sent Events: `points` (new intervals), `tails`, and `end` with the job's state
    (429 past the caps on live streams per client and without the token)."""
    state = state_of(request)
    job = _job(request)
    tail = state.queue.live(job)

    async def events():
        sent = 0
        while True:
            # a queue job's state lives in Redis
            now = await asyncio.to_thread(state.queue.get, job.id) or job
            finished = now.finished
            await asyncio.to_thread(tail.poll)
            if len(tail.points) > sent:
                yield f"event: points\ndata: {json.dumps(tail.points[sent:])}\n\n"
                sent = len(tail.points)
            tails = dict(_tails(request, now), state=now.state)
            yield f"event: tails\ndata: {json.dumps(tails)}\n\n"
            if finished:
                yield f"event: end\ndata: {json.dumps(now.to_dict(has_token(request)))}\n\n"
                return
            if await request.is_disconnected():
                return
            await asyncio.sleep(STREAM_PERIOD_S)

    client = request.client.host if request.client else ""
    return LimitedStream(
        state.streams,
        client,
        not has_token(request),
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store"},
    )


def job_html(request: Request) -> Response:
    job = _job(request)
    if job.state == "done" and job.run_id:
        return RedirectResponse(f"/runs/{job.run_id}", status_code=303)
    if job.state == "done" and job.request.tool == "record":
        return RedirectResponse(f"/records/{job.id}", status_code=303)
    return page(request, "job.html", job=job.to_dict(has_token(request)))


def record_html(request: Request) -> Response:
    job = _job(request)
    top_path = job.folder / "out" / "top.json" if job.folder else None
    top = json.loads(top_path.read_text()) if top_path and top_path.is_file() else []
    return page(request, "record.html", job=job.to_dict(has_token(request)), top=top)


def login(request: Request) -> Response:
    """/login?token=T: keep the token in a cookie (SameSite=Strict) for the buttons, once
    checked (a wrong one is 403, never stored)."""
    token = request.query_params.get("token", "")
    if not token_matches(token, state_of(request).settings.token):
        raise HTTPException(403, "wrong token: open the address `autoprof serve` printed")
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
    return response


def openapi(request: Request) -> Response:
    """The OpenAPI description of /api/: every route, its methods and its docstring."""
    paths: dict[str, dict] = {}
    for route in ROUTES:
        if not route.path.startswith("/api/") or not route.include_in_schema:
            continue
        doc = " ".join((route.endpoint.__doc__ or "").split())
        for method in sorted((route.methods or set()) - {"HEAD"}):
            paths.setdefault(route.path, {})[method.lower()] = {
                "summary": doc.split(". ")[0],
                "description": doc,
                "responses": {"200": {"description": "JSON"}},
            }
    return JSONResponse(
        {"openapi": "3.0.0", "info": {"title": "autoprof", "version": "1"}, "paths": paths}
    )


async def error(request: Request, exc: Exception) -> Response:
    """AutoprofError -> 400 with its one line; HTTPException -> its status. JSON for /api/."""
    status = exc.status_code if isinstance(exc, HTTPException) else 400
    if isinstance(exc, AutoprofError) and str(exc).startswith(("no run ", "run id ")):
        status = 404  # an unknown or ambiguous run id names nothing here
    detail = exc.detail if isinstance(exc, HTTPException) else str(exc)
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": detail}, status_code=status)
    body = TEMPLATES.get_template("error.html").render(
        status=status, detail=detail, read_only=True, path=""
    )
    return HTMLResponse(body, status_code=status)


HANDLERS = {HTTPException: error, AutoprofError: error}
ROUTES = [
    Route("/", runs_html),
    Route("/runs/{run_id}", run_html),
    Route("/runs/{run_id}/{kind:str}", download),
    Route("/runs/{run_id}/{kind:str}/{path:path}", download),
    Route("/compare", compare_html),
    Route("/new", new_html),
    Route("/jobs/{job_id}", job_html),
    Route("/records/{job_id}", record_html),
    Route("/records/{job_id}/files/{path:path}", record_file),
    Route("/login", login),
    Route("/favicon.ico", favicon),
    Route("/static/plotly.min.js", plotly_js),
    Route("/static/{name}", static_file),
    Route("/api/schema", openapi, include_in_schema=False),
    Route("/api/runs", api_runs),
    Route("/api/runs/{run_id}", api_run),
    Route("/api/runs/{run_id}", api_delete, methods=["DELETE"]),
    Route("/api/runs/{run_id}/series", api_series),
    Route("/api/runs/{run_id}/analysis", api_analysis),
    Route("/api/runs/{run_id}/metrics", api_metrics),
    Route("/api/compare", api_compare),
    Route("/api/events", api_events),
    Route("/api/jobs", api_jobs),
    Route("/api/jobs", api_submit, methods=["POST"]),
    Route("/api/jobs/{job_id}", api_job),
    Route("/api/jobs/{job_id}/stop", api_stop, methods=["POST"]),
    Route("/api/jobs/{job_id}/stream", api_stream),
]
