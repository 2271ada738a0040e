"""What the server sends as files: static files, a run's downloads (results.csv and .parquet
streamed from the store, out.tar.gz, a raw file of out/) and a job's records.

Downloads name files inside a run's own out/ folder and are refused (404) when the path leaves
it, when out/ is a symlink, or when the file has other hard links; what a workload printed
(stdout, stderr) goes out with the token only. A workload writes what it likes into its folder
(`report.html`, `r.js`, `img.svg`): a raw file goes out as an attachment of no known type, in a
CSP sandbox, never as a page or a script of this origin; only the files autoprof itself renders
(`OWN_RUN_FILES`, `OWN_RECORD_FILES`) are shown inline, with the type autoprof gives them.
"""

from __future__ import annotations

import io
import os
import re
import stat
import tarfile
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from importlib import resources
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse

from autoprof.errors import AutoprofError
from autoprof.perf.record import RECORD_INFO
from autoprof.results import csvfile
from autoprof.run import outdir, spool
from autoprof.store import export
from autoprof.store.engine import Store
from autoprof.store.queries import find_run
from autoprof.web.state import State, has_token, state_of
from autoprof.web.task import FLAME_SVG, TOP_FUNCTIONS

EXPORTS = "exports"  # data_dir's folder of results.csv files already downloaded once
EXPORT_CACHE_BYTES = 4 << 30
KEPT_CHUNK_BYTES = 1 << 20  # a kept file goes out a MiB per write (Starlette's 64 KiB: 3x slower)
# what a workload printed: readable with the token only (it may hold anything the program saw)
PRIVATE_FILES = frozenset({outdir.STDOUT, outdir.STDERR, *spool.NAMES})
HERE = Path(__file__).parent
# the flame graph runs its own inline script: sandboxed, it reaches nothing of this origin;
# only this server's record page may embed it
FLAME_HEADERS = {
    "Content-Security-Policy": "sandbox allow-scripts; default-src 'none'; "
    "script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'self'",
    "X-Frame-Options": "SAMEORIGIN",
}
# what autoprof renders into a run's out/ or a recording's, served inline as this type (whatever
# the bytes hold: JSON is no page, and the flame graph runs in its own sandbox)
OWN_RUN_FILES = {outdir.MANIFEST: "application/json", outdir.REPORT: "application/json"}
OWN_RECORD_FILES = {
    FLAME_SVG: "image/svg+xml",
    RECORD_INFO: "application/json",
    TOP_FUNCTIONS: "application/json",
}
# any other file: downloaded, never rendered; a sandbox (no scripts, an origin of its own) even if
# a browser were to show it, and `nosniff` (every answer's) keeps it from running as a script
RAW_HEADERS = {"Content-Security-Policy": "sandbox; default-src 'none'"}


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
        return raw_file(inside(root, path, has_token(request)), root, OWN_RUN_FILES)
    raise HTTPException(404)


def raw_file(path: Path, root: Path, own: dict[str, str]) -> Response:
    """A file of out/: inline when autoprof rendered it (a name of `own` at out/'s top), else
    an attachment of no known type in a sandbox (what a workload wrote)."""
    media = own.get(path.name) if path.parent == root.resolve() else None
    if media is None:
        name = re.sub(r'[^ -~]|["\\]', "_", path.name)  # printable ASCII, no quote
        headers = {**RAW_HEADERS, "Content-Disposition": f'attachment; filename="{name}"'}
        return FileResponse(path, media_type="application/octet-stream", headers=headers)
    return FileResponse(
        path, media_type=media, headers=FLAME_HEADERS if media.endswith("svg+xml") else None
    )


def _results_download(state: State, uuid: str, rows: int, kind: str) -> Response:
    """The run's results streamed from the store as they are read, a window of rows at a time
    (`store.export`): the first bytes leave at once, and memory stays flat. results.csv
    written from rows is kept as it goes out (data_dir/exports, the newest
    EXPORT_CACHE_BYTES), so that the next download of the run is a file sent at the disk's
    speed; keyed by the run's rows, since a stored run changes only by gaining parts. A run
    whose text the store keeps (`store.text`) is sent decompressed each time, nearly as fast
    as a file: a copy of it would cost its first download a third of its time (writing 85 MB
    per million rows), for little."""
    store = state.settings.store
    if kind == "results.parquet":
        name, media_type = f"{uuid}.parquet", "application/octet-stream"
        headers = {"Content-Disposition": f'attachment; filename="{name}"'}
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
        with store.read() as conn:  # a kept text's length is known: no chunked encoding
            length = export.csv_length(conn, uuid, partial=True)
        body = _from_store(store, uuid, export.csv_chunks)
        if length is not None:
            headers["Content-Length"] = str(length)
        else:
            body = _kept(kept, body)
    return StreamingResponse(body, media_type=media_type, headers=headers)


def _kept(path: Path, chunks: Iterator[bytes]) -> Iterator[bytes]:
    """`chunks`, written to `path` too once all of them went out (a download cut short keeps
    nothing); then the oldest kept files go until EXPORT_CACHE_BYTES are left. Each chunk is
    written in a thread while it is sent (one write in flight): the copy to disk does not
    hold up the download."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.NamedTemporaryFile(dir=path.parent, suffix=".partial", delete=False) as file,
        ThreadPoolExecutor(max_workers=1) as writer,
    ):
        written: Future | None = None
        try:
            for chunk in chunks:
                if written is not None:
                    written.result()
                written = writer.submit(file.write, chunk)
                yield chunk
            if written is not None:
                written.result()
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

    schema = pa.Schema.from_pandas(csvfile.empty_frame(), preserve_index=False)
    sink = _Drained()
    with pq.ParquetWriter(sink, schema) as writer:
        for table in export.chunks(conn, uuid, partial=partial):
            writer.write_table(csvfile.decoded(table).cast(schema))
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
    root = job.folder / "out"
    return raw_file(
        inside(root, request.path_params["path"], has_token(request)), root, OWN_RECORD_FILES
    )


def _attachment(data: bytes, name: str, media_type: str) -> Response:
    return StreamingResponse(
        iter([data]),
        media_type=media_type,
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
