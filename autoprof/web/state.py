"""The server's settings and state (`Settings`, `State`, one per app), and the token check:
reading runs is open to whoever reaches the address; starting and stopping jobs, deleting runs
and reading what a workload printed need the token (header X-Autoprof-Token, or the cookie that
/login?token=... sets once checked, SameSite=Strict), and jobs a server started with --allow.
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass, field
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request

from autoprof.catalog.model import Catalog
from autoprof.store.engine import Store
from autoprof.web.analyses import FrameCache
from autoprof.web.guard import TOKEN_COOKIE, host_names
from autoprof.web.job import Backend
from autoprof.web.limits import DEFAULTS, Limits, Streams

TOKEN_HEADER = "X-Autoprof-Token"


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
    countable: list[dict] | None = None  # the events of it this machine can count


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
