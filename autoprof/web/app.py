"""The ASGI app: settings, the token check, static files and downloads; pages and the JSON API
are in `routes.py`.

Safety: reading is open to whoever reaches the address (127.0.0.1 by default); starting and
stopping jobs and deleting runs need the token (header X-Autoprof-Token, or the cookie that
/login?token=... sets, SameSite=Strict) and a server started with --allow. Every page escapes
what users wrote (Jinja2 autoescape; the scripts set textContent, never HTML). Downloads name
files inside a run's own out/ folder and are refused (404) when the path leaves it.
"""

from __future__ import annotations

import contextlib
import hmac
import io
import re
import tarfile
import tempfile
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse

from autoprof import results
from autoprof.errors import AutoprofError
from autoprof.run import outdir
from autoprof.store.engine import Store
from autoprof.store.queries import export_frame, find_run
from autoprof.web.analyses import FrameCache
from autoprof.web.jobs import Backend, LocalQueue

TOKEN_HEADER = "X-Autoprof-Token"
TOKEN_COOKIE = "autoprof_token"
HERE = Path(__file__).parent


@dataclass
class Settings:
    store: Store
    data_dir: Path  # jobs' folders (out/, logs, flame graphs)
    token: str
    allow: list[re.Pattern] = field(default_factory=list)
    allow_env: frozenset[str] = frozenset()  # variables a job may set (--allow-env)
    redis_url: str | None = None  # jobs go to RQ (a worker for this host runs them)

    @property
    def read_only(self) -> bool:
        return not self.allow


@dataclass
class State:
    settings: Settings
    queue: Backend
    frames: FrameCache = field(default_factory=FrameCache)
    catalog_events: list[dict] | None = None  # this machine's events, built on first use


def state_of(request: Request) -> State:
    return request.app.state.autoprof


def require_token(request: Request) -> State:
    """403 unless the request carries the server's token; 403 too when read-only."""
    state = state_of(request)
    given = request.headers.get(TOKEN_HEADER) or request.cookies.get(TOKEN_COOKIE) or ""
    if not hmac.compare_digest(given.encode(), state.settings.token.encode()):
        raise HTTPException(403, "a token is needed: open the address `autoprof serve` printed")
    if state.settings.read_only:
        raise HTTPException(403, "this server is read-only (start it with --allow REGEX)")
    return state


def plotly_js(request: Request) -> Response:
    """plotly.min.js as the plotly package ships it: the pages need no internet."""
    path = resources.files("plotly") / "package_data" / "plotly.min.js"
    return FileResponse(str(path), media_type="application/javascript")


def static_file(request: Request) -> Response:
    name = request.path_params["name"]
    path = HERE / "static" / name
    if "/" in name or not path.is_file():
        raise HTTPException(404)
    return FileResponse(path)


def local_out(state: State, uuid: str) -> Path | None:
    """The run's out/ folder when a job of this server made it (else None)."""
    for manifest in state.settings.data_dir.glob(f"*/out/{outdir.MANIFEST}"):
        try:
            if outdir.read_manifest(manifest.parent).id == uuid:
                return manifest.parent
        except AutoprofError:
            continue  # broken, or written by a newer autoprof: not this run's
    return None


def inside(root: Path, relative: str) -> Path:
    """`root/relative` when it is a file inside `root` (links resolved), else 404."""
    base = root.resolve()
    path = (base / relative).resolve()
    if not path.is_relative_to(base) or not path.is_file():
        raise HTTPException(404)
    return path


def _run_uuid(state: State, ident: str) -> str:
    with state.settings.store.read() as conn:
        return find_run(conn, ident).uuid


def download(request: Request) -> Response:
    """results.csv (byte for byte `runs export`), results.parquet, out.tar.gz, or a raw file
    of the run's out/ folder: /runs/ID/files/PATH."""
    state = state_of(request)
    ident, kind = request.path_params["run_id"], request.path_params["kind"]
    uuid = _run_uuid(state, ident)
    if kind in ("results.csv", "results.parquet"):
        with state.settings.store.read() as conn:
            frame = export_frame(conn, uuid, partial=True)
        if kind == "results.parquet":
            buffer = io.BytesIO()
            frame.to_parquet(buffer, index=False)
            return _attachment(buffer.getvalue(), f"{uuid}.parquet", "application/octet-stream")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "results.csv"
            results.write_csv(frame, path)
            return _attachment(path.read_bytes(), f"{uuid}.csv", "text/csv")
    root = local_out(state, uuid)
    if root is None:
        raise HTTPException(404, "this run's out/ folder is not on this machine")
    if kind == "out.tar.gz":
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            tar.add(root, arcname=uuid)
        return _attachment(buffer.getvalue(), f"{uuid}.tar.gz", "application/gzip")
    if kind == "files":
        return FileResponse(inside(root, request.path_params.get("path", "")))
    raise HTTPException(404)


def record_file(request: Request) -> Response:
    state = state_of(request)
    job = state.queue.get(request.path_params["job_id"])
    if job is None or job.folder is None:
        raise HTTPException(404)
    return FileResponse(inside(job.folder / "out", request.path_params["path"]))


def _attachment(data: bytes, name: str, media_type: str) -> Response:
    return StreamingResponse(
        iter([data]),
        media_type=media_type,
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


def _warm_up(state: State) -> None:
    """Build this machine's event list before a page needs it; a failure shows on that page."""
    from autoprof.web import routes

    with contextlib.suppress(AutoprofError):
        routes.catalog_events(state)


def create_app(settings: Settings) -> Starlette:
    from autoprof.web import routes

    queue: Backend
    if settings.redis_url:
        from autoprof.web.rqjobs import RqQueue

        queue = RqQueue(settings.redis_url)
    else:
        queue = LocalQueue(settings.data_dir, settings.store.text)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        # this machine's event list (thousands of tracepoints) is built before a page needs it
        threading.Thread(target=_warm_up, args=(state,), daemon=True).start()
        yield
        queue.close()  # nothing a job started keeps running after the server

    state = State(settings, queue)
    app = Starlette(routes=routes.ROUTES, exception_handlers=routes.HANDLERS, lifespan=lifespan)
    app.state.autoprof = state
    return app
