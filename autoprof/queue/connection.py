"""Redis URLs and queue names.

The URL comes from --redis or $AUTOPROF_REDIS; redis-py parses it, so passwords and ACL users
(``redis://USER:PASSWORD@HOST:6379/0``) and TLS (``rediss://...``) just work. Every message
that shows a URL or a driver error goes through `autoprof.util.urls.mask`/`scrub`: passwords never
reach a terminal or a log.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import redis

from autoprof.errors import AutoprofError
from autoprof.util.urls import mask, scrub

ENV_VAR = "AUTOPROF_REDIS"
CONNECT_TIMEOUT_S = 10
_FORMS = "redis://[USER:PASSWORD@]HOST[:PORT][/DB] or rediss://... for TLS"


def resolve(option: str | None) -> str:
    """The Redis the user means: --redis, else $AUTOPROF_REDIS; there is no default queue."""
    text = (option or os.environ.get(ENV_VAR) or "").strip()
    if not text:
        raise AutoprofError(f"no Redis to use: give --redis URL or set ${ENV_VAR} ({_FORMS})")
    return text


@contextlib.contextmanager
def errors(text: str) -> Iterator[None]:
    """Redis errors -> one masked line."""
    try:
        yield
    except redis.RedisError as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise AutoprofError(scrub(f"Redis {mask(text)}: {first}", text)) from None


def connect(text: str) -> redis.Redis:
    """A connected client for the URL `text` (checked with PING)."""
    try:
        client = redis.Redis.from_url(
            text, socket_connect_timeout=CONNECT_TIMEOUT_S, health_check_interval=30
        )
    except ValueError as err:
        raise AutoprofError(scrub(f"malformed Redis URL {mask(text)}: {err}", text)) from None
    with errors(text):
        client.ping()
    return client


def host_queue(hostname: str) -> str:
    return f"host:{hostname}"


def cpu_queue(cpu_id: str) -> str:
    return f"cpu:{cpu_id}"
