"""The ASGI app: settings, the token check, static files and downloads; pages and the JSON API
are in `routes.py`.

Safety: reading runs is open to whoever reaches the address (127.0.0.1 by default); starting and
stopping jobs, deleting runs and reading what a workload printed (stdout, stderr, the job's log)
need the token (header X-Autoprof-Token, or the cookie that /login?token=... sets once checked,
SameSite=Strict), and jobs a server started with --allow. `guard.py` checks Host, Origin and
Content-Type first. Every page escapes what users wrote (Jinja2 autoescape; the scripts set
textContent, never HTML). Downloads name files inside a run's own out/ folder and are refused
(404) when the path leaves it, when out/ is a symlink, or when the file has other hard links.
"""

from __future__ import annotations

import contextlib
import hmac
import io
import os
import re
import stat
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse

from autoprof import results
from autoprof.catalog.model import Catalog
from autoprof.errors import AutoprofError
from autoprof.run import outdir
from autoprof.store import export
from autoprof.store.engine import Store
from autoprof.store.queries import find_run
from autoprof.web.analyses import FrameCache
from autoprof.web.guard import TOKEN_COOKIE, Guard, host_names
from autoprof.web.jobs import Backend, LocalQueue
from autoprof.web.limits import DEFAULTS, Limits, Streams

if TYPE_CHECKING:
    from autoprof.catalog.model import Catalog

TOKEN_HEADER = "X-Autoprof-Token"
EXPORTS = "exports"  # data_dir's folder of results.csv files already downloaded once
EXPORT_CACHE_BYTES = 4 << 30
KEPT_CHUNK_BYTES = 1 << 20  # a kept file goes out a MiB per write (Starlette's 64 KiB: 3x slower)
# what a workload printed: readable with the token only (it may hold anything the program saw)
PRIVATE_FILES = frozenset({outdir.STDOUT, outdir.STDERR})
HERE = Path(__file__).parent
# the flame graph runs its own inline script: sandboxed, it reaches nothing of this origin;
# only this server's record page may embed it
FLAME_HEADERS = {
    "Content-Security-Policy": "sandbox allow-scripts; default-src 'none'; "
    "script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'self'",
    "X-Frame-Options": "SAMEORIGIN",
}


@dataclass
class Settings:
    store: Store
    data_dir: Path  # jobs' folders (out/, logs, flame graphs)
    token: str
    allow: list[re.Pattern] = field(default_factory=list)
    allow_env: frozenset[str] = frozenset()  # variables a job may set (--allow-env)
    redis_url: str | None = None  # jobs go to RQ (a worker for this host runs them)
    hosts: frozenset[str] = host_names("127.0.0.1")  # Host names answered (guard.host_names)
    limits: Limits = DEFAULTS  # what one client may take (sizes, live streams)

    @property
    def read_only(self) -> bool:
        return not self.allow


@dataclass
class State:
    settings: Settings
    queue: Backend
    streams: Streams  # the live streams open now (limits.Streams)
    frames: FrameCache = field(default_factory=FrameCache)
    catalog: Catalog | None = None  # this machine's catalog (tracepoints too), built on first use
    catalog_events: list[dict] | None = None  # the events of it this machine can count


def state_of(request: Request) -> State:
    return request.app.state.autoprof


def token_matches(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def has_token(request: Request) -> bool:
    """Whether the request carries the server's token (header or login cookie)."""
    given = request.headers.get(TOKEN_HEADER) or request.cookies.get(TOKEN_COOKIE) or ""
    return token_matches(given, state_of(request).settings.token)


def require_token(request: Request) -> State:
    """403 unless the request carries the server's token; 403 too when read-only."""
    state = state_of(request)
    if not has_token(request):
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


def favicon(request: Request) -> Response:
    """The tab's icon, where browsers ask for it by default (an SVG: no binary kept here)."""
    return FileResponse(HERE / "static" / "favicon.svg", media_type="image/svg+xml")


def local_out(state: State, uuid: str) -> Path | None:
    """The run's out/ folder when a job of this server made it (else None)."""
    for manifest in state.settings.data_dir.glob(f"*/out/{outdir.MANIFEST}"):
        try:
            if outdir.read_manifest(manifest.parent).id == uuid:
                return manifest.parent
        except AutoprofError:
            continue  # broken, or written by a newer autoprof: not this run's
    return None


def servable(path: Path) -> bool:
    """A plain file with no other name: a hard link made inside out/ to a file elsewhere (a
    key, another user's data) cannot be told from its original except by its link count, and
    nothing autoprof writes has two names; a symlink out/ is refused by `inside`."""
    try:
        info = path.stat()
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1


def inside(root: Path, relative: str, private: bool = True) -> Path:
    """`root/relative` when it is a servable file inside `root` (links resolved; `root` itself
    and its job folder no symlinks), else 404; a workload's output only when `private`."""
    if "\0" in relative:
        raise HTTPException(400, "a file path cannot hold a NUL byte")
    if root.is_symlink() or root.parent.is_symlink():
        raise HTTPException(404)
    base = root.resolve()
    path = (base / relative).resolve()
    if not path.is_relative_to(base) or not servable(path):
        raise HTTPException(404)
    if path.name in PRIVATE_FILES and not private:
        raise HTTPException(403, "what the workload printed is shown with the token only")
    return path


def _tar_out(root: Path, name: str, private: bool) -> bytes:
    """out/ as a .tar.gz of its servable files (a workload's output only when `private`)."""
    if root.is_symlink() or root.parent.is_symlink():
        raise HTTPException(404)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(root.rglob("*")):
            if path.is_symlink() or not servable(path):
                continue
            if path.name in PRIVATE_FILES and not private:
                continue
            tar.add(path, arcname=f"{name}/{path.relative_to(root)}", recursive=False)
    return buffer.getvalue()


def download(request: Request) -> Response:
    """results.csv (byte for byte `runs export`), results.parquet, out.tar.gz, or a raw file
    of the run's out/ folder: /runs/ID/files/PATH."""
    state = state_of(request)
    ident, kind = request.path_params["run_id"], request.path_params["kind"]
    with state.settings.store.read() as conn:
        run = find_run(conn, ident)
    uuid = run.uuid
    if kind in ("results.csv", "results.parquet"):
        return _results_download(state, uuid, run.rows, kind)
    root = local_out(state, uuid)
    if root is None:
        raise HTTPException(404, "this run's out/ folder is not on this machine")
    if kind == "out.tar.gz":
        data = _tar_out(root, uuid, has_token(request))
        return _attachment(data, f"{uuid}.tar.gz", "application/gzip")
    if kind == "files":
        path = request.path_params.get("path", "")
        return FileResponse(inside(root, path, has_token(request)))
    raise HTTPException(404)


def _results_download(state: State, uuid: str, rows: int, kind: str) -> Response:
    """The run's results streamed from the store as they are read, a window of rows at a time
    (`store.export`): the first bytes leave at once, and memory stays flat. results.csv is
    kept as it goes out (data_dir/exports, the newest EXPORT_CACHE_BYTES), so that the next
    download of the run is a file sent at the disk's speed; keyed by the run's rows, since a
    stored run changes only by gaining parts."""
    store = state.settings.store
    if kind == "results.parquet":
        name, media_type = f"{uuid}.parquet", "application/octet-stream"
        body = _from_store(store, uuid, _parquet_chunks)
    else:
        name, media_type = f"{uuid}.csv", "text/csv"
        kept = state.settings.data_dir / EXPORTS / f"{uuid}-{rows}.csv"
        headers = {"Content-Disposition": f'attachment; filename="{name}"'}
        if kept.is_file():
            os.utime(kept)  # newest used: the last to go
            response = FileResponse(kept, media_type=media_type, headers=headers)
            response.chunk_size = KEPT_CHUNK_BYTES
            return response
        body = _kept(kept, _from_store(store, uuid, export.csv_chunks))
    return StreamingResponse(
        body,
        media_type=media_type,
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


def _kept(path: Path, chunks: Iterator[bytes]) -> Iterator[bytes]:
    """`chunks`, written to `path` too once all of them went out (a download cut short keeps
    nothing); then the oldest kept files go until EXPORT_CACHE_BYTES are left."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".partial", delete=False) as file:
        try:
            for chunk in chunks:
                file.write(chunk)
                yield chunk
        except BaseException:  # the reader went away, or the store failed: nothing kept
            Path(file.name).unlink(missing_ok=True)
            raise
    os.replace(file.name, path)
    kept = sorted(path.parent.glob("*.csv"), key=lambda p: p.stat().st_mtime, reverse=True)
    total = 0
    for old in kept:
        total += old.stat().st_size
        if total > EXPORT_CACHE_BYTES:
            old.unlink(missing_ok=True)


def _from_store(store: Store, uuid: str, make) -> Iterator[bytes]:
    """`make(conn, uuid)`'s bytes, read in one transaction that stays open while they are sent
    (Starlette runs this generator in its thread pool)."""
    with store.read() as conn:
        yield from make(conn, uuid, partial=True)


def _parquet_chunks(conn, uuid: str, partial: bool) -> Iterator[bytes]:
    """results.parquet, a row group per window of rows, each sent once written; with pandas'
    metadata, so that pandas reads the results dtypes back (nullable integers, strings)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.Schema.from_pandas(results.empty_frame(), preserve_index=False)
    sink = _Drained()
    with pq.ParquetWriter(sink, schema) as writer:
        for table in export.chunks(conn, uuid, partial=partial):
            writer.write_table(results.decoded(table).cast(schema))
            yield sink.drain()
    yield sink.drain()


class _Drained(io.RawIOBase):
    """A write-only file whose bytes are taken away as they come (`drain`)."""

    def __init__(self) -> None:
        self.pending = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.pending += data
        return len(data)

    def drain(self) -> bytes:
        data, self.pending = bytes(self.pending), bytearray()
        return data


def record_file(request: Request) -> Response:
    state = state_of(request)
    job = state.queue.get(request.path_params["job_id"])
    if job is None or job.folder is None:
        raise HTTPException(404)
    path = inside(job.folder / "out", request.path_params["path"], has_token(request))
    return FileResponse(path, headers=FLAME_HEADERS if path.suffix == ".svg" else None)


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

    state = State(settings, queue, Streams(settings.limits))
    app = Starlette(
        routes=routes.ROUTES,
        exception_handlers=routes.HANDLERS,
        lifespan=lifespan,
        middleware=[Middleware(Guard, hosts=settings.hosts, limits=settings.limits)],
    )
    app.state.autoprof = state
    return app
