"""How much one client may take of the server: the sizes of a request, how long an answer may
wait for its reader, how many live streams stay open. `server.py` holds connections to these
limits (uvicorn's protocol), `guard.py` requests (sizes, smuggling), `LimitedStream` the live
streams of jobs.

Why: the server has a few hundred connections to share (`max_connections`). A client that
sends a huge body, or requests a large file and never reads it, or opens hundreds of live
streams, must not hold them all; each such refusal answers in one line (413, 431, 429) and the
server's log says it once a minute (`server.REFUSALS`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import JSONResponse, StreamingResponse
from starlette.types import Receive, Scope, Send


@dataclass(frozen=True)
class Limits:
    max_connections: int = 200
    max_connections_per_client: int = 100  # from one client address: others still get in
    header_timeout_s: float = 10.0  # a request's headers must arrive within this
    keep_alive_s: int = 5
    max_header_bytes: int = 16 * 1024  # request line and headers, as they arrived
    max_body_bytes: int = 1024 * 1024  # a job is a few KB of JSON
    # an answer whose reader takes nothing of it for this long is cut (its connection closed)
    write_timeout_s: float = 15.0
    max_streams_per_client: int = 16  # live streams of one client address, token or not
    max_anonymous_streams: int = 32  # live streams without the token, all clients together


DEFAULTS = Limits()


@dataclass
class Streams:
    """The live streams open now, per client address and without the token (event-loop use
    only: no lock)."""

    limits: Limits
    per_client: Counter[str] = field(default_factory=Counter)
    anonymous: int = 0

    def open(self, client: str, anonymous: bool) -> str | None:
        """Count a new stream; or why it is refused (nothing counted)."""
        if self.per_client[client] >= self.limits.max_streams_per_client:
            return (
                f"{self.limits.max_streams_per_client} live streams are open from {client}: "
                "close one first"
            )
        if anonymous and self.anonymous >= self.limits.max_anonymous_streams:
            return (
                f"{self.limits.max_anonymous_streams} live streams are open without the token: "
                "log in (the address `autoprof serve` printed) or try again later"
            )
        self.per_client[client] += 1
        self.anonymous += anonymous
        return None

    def close(self, client: str, anonymous: bool) -> None:
        self.per_client[client] -= 1
        if not self.per_client[client]:
            del self.per_client[client]
        self.anonymous -= anonymous


class LimitedStream(StreamingResponse):
    """A StreamingResponse that holds one of `streams` while it runs: past the caps it answers
    429 instead, and its body is never started."""

    def __init__(self, streams: Streams, client: str, anonymous: bool, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self.streams, self.client, self.anonymous = streams, client, anonymous

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = self.streams.open(self.client, self.anonymous)
        if refused is not None:
            answer = JSONResponse({"error": refused}, status_code=429, headers={"Retry-After": "5"})
            await answer(scope, receive, send)
            return
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.streams.close(self.client, self.anonymous)
