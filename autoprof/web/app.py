"""The ASGI app: its routes (`routes.py`: pages and the JSON API; `files.py`: static files and
downloads), its state (`state.py`: settings, the token check) and its guard.

Safety: reading runs is open to whoever reaches the address (127.0.0.1 by default); starting and
stopping jobs, deleting runs and reading what a workload printed (stdout, stderr, the job's log)
need the token (`state.py`), and jobs a server started with --allow. `guard.py` checks Host,
Origin and Content-Type first. Every page escapes what users wrote (Jinja2 autoescape; the
scripts set textContent, never HTML). Downloads stay inside a run's own out/ folder (`files.py`).
"""

from __future__ import annotations

import contextlib
import threading

from starlette.applications import Starlette
from starlette.middleware import Middleware

from autoprof.analysis import correlation
from autoprof.errors import AutoprofError
from autoprof.web import routes
from autoprof.web.guard import Guard
from autoprof.web.job import Backend
from autoprof.web.limits import Streams
from autoprof.web.localqueue import LocalQueue
from autoprof.web.state import Settings, State


def _warm_up(state: State) -> None:
    """Build this machine's event list, and import what a run page's first open needs (the
    correlation's clustering), before a page needs them; a failure shows on that page."""
    with contextlib.suppress(AutoprofError):
        routes.countable_events(state)
    with contextlib.suppress(ImportError):  # a broken scipy: the page that needs it says so
        correlation.clustering()


def create_app(settings: Settings) -> Starlette:
    queue: Backend
    if settings.redis_url:
        from autoprof.web.rqjobs import RqQueue

        queue = RqQueue(settings.redis_url)
    else:
        queue = LocalQueue(settings.data_dir, settings.store.database.text)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        # this machine's event list (thousands of tracepoints) is built before a page needs it,
        # and scipy's clustering imported
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
