"""uvicorn with limits (`limits.Limits`): what keeps many idle, half-open or never-reading
connections (slowloris, slow readers) from holding the server's file descriptors forever and
filling its log with tracebacks.

uvicorn (h11) waits for a request's headers without a deadline, waits for a reader to take its
answer without one either, and accepts connections until the process runs out of file
descriptors, then logs a traceback per failed accept(). Here:
- a connection must send its whole request, headers and body, within `header_timeout_s` (the
  first one and each next one on a kept-alive connection), else it is closed: 250 POSTs that
  announced 100 KB and sent one byte held every slot;
- an answer whose reader takes nothing of it for `write_timeout_s` (the transport's buffer stays
  over its high-water mark: a client that asked for a large file and reads nothing) is cut;
- at most `max_connections` are open, and `max_connections_per_client` from one client address:
  one more evicts the oldest (of all, or of that address) that is still waiting for its request,
  else the one whose reader has stalled longest (so neither idle nor stalled ones can starve
  real clients), or is closed when all are busy. Connections already closing do not count
  (uvicorn's own cap counted them: 200 clients met 503s, or lost a live connection); uvicorn's
  503 cap is off, one task runs per connection;
- the descriptor limit is raised to the hard limit, and every refusal is one log line, once a
  minute per kind, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from autoprof.errors import AutoprofError
from autoprof.perf.process import keep_private
from autoprof.web.limits import Limits

LOG = logging.getLogger("autoprof.serve")
QUIET_S = 60.0  # a refusal of one kind is logged at most once in this time
# uvicorn's own one-line refusals, rate-limited as ours are
UVICORN_REFUSALS = ("Exceeded concurrency limit.", "Invalid HTTP request received.")


@dataclass
class RefusalLog:
    """One line per refusal kind, then silence for QUIET_S seconds (with a count)."""

    last: dict[str, float] = field(default_factory=dict)
    hidden: dict[str, int] = field(default_factory=dict)

    def should_log(self, kind: str, now: float) -> str | None:
        """The suffix to log this refusal with, or None when it is to stay quiet."""
        if now - self.last.get(kind, -QUIET_S) < QUIET_S:
            self.hidden[kind] = self.hidden.get(kind, 0) + 1
            return None
        self.last[kind] = now
        hidden = self.hidden.pop(kind, 0)
        return f" ({hidden} more since the last such line)" if hidden else ""

    def note(self, kind: str, message: str) -> None:
        suffix = self.should_log(kind, time.monotonic())
        if suffix is not None:
            LOG.warning("autoprof serve: %s%s", message, suffix)


REFUSALS = RefusalLog()


class _OneLine(logging.Filter):
    """uvicorn's refusal warnings through REFUSALS (one line per kind a minute)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in UVICORN_REFUSALS:
            REFUSALS.note(message, message.rstrip(".").lower())
            return False
        return True


class LimitedH11(H11Protocol):
    """h11 with a deadline for each request's headers and a cap on open connections."""

    limits = Limits()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.waiting_since = time.monotonic()
        self.header_timer: asyncio.TimerHandle | None = None
        self.stalled_since: float | None = None  # the reader took nothing of the answer since
        self.write_timer: asyncio.TimerHandle | None = None
        self._arm()
        limits = self.limits
        if len(self.connections) <= min(limits.max_connections, limits.max_connections_per_client):
            return  # under both caps even counting closing ones: nothing to scan
        # one pass that counts (two lists built per accept were a tenth of the server's CPU
        # with 200 clients); the lists only when one is evicted
        address = self._address()
        live, mine = 0, 0
        for c in self.connections:
            if isinstance(c, LimitedH11) and c._open():
                live += 1
                mine += c._address() == address
        if live > limits.max_connections:
            self._evict(self._live(), f"over {limits.max_connections} connections")
        elif mine > limits.max_connections_per_client:
            cap = limits.max_connections_per_client
            pool = [c for c in self._live() if c._address() == address]
            self._evict(pool, f"over {cap} connections from {address}")

    def _live(self) -> list[LimitedH11]:
        """The open connections (not closing already)."""
        return [c for c in self.connections if isinstance(c, LimitedH11) and c._open()]

    def _open(self) -> bool:
        """Not closing already (its connection_lost comes an event-loop turn later)."""
        return not self.transport.is_closing()

    def _address(self) -> str:
        return self.client[0] if self.client else "?"

    def _evict(self, pool: list[LimitedH11], why: str) -> None:
        """Close the oldest connection of `pool` waiting for its request, else the one whose
        reader stalled first, else this new one."""
        ours = [c for c in pool if c is not self]
        idle = [c for c in ours if c._waiting()]
        stalled = [c for c in ours if c.stalled_since is not None]
        if idle:
            victim, which = min(idle, key=lambda c: c.waiting_since), "waiting for its request"
        elif stalled:
            victim, which = min(stalled, key=lambda c: c.stalled_since or 0), "reading nothing"
        else:
            victim, which = self, ""
        REFUSALS.note(
            "connections",
            f"{why}: closed " + (f"the oldest one {which}" if which else "a new one"),
        )
        victim._drop()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self.header_timer, self.write_timer):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        """The transport's buffer is over its high-water mark: the reader has to take some of
        the answer within write_timeout_s."""
        super().pause_writing()
        self.stalled_since = time.monotonic()
        if self.write_timer is not None:
            self.write_timer.cancel()
        self.write_timer = self.loop.call_later(self.limits.write_timeout_s, self._stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        self.stalled_since = None
        if self.write_timer is not None:
            self.write_timer.cancel()
            self.write_timer = None

    def _stalled(self) -> None:
        if self.stalled_since is not None and not self.transport.is_closing():
            REFUSALS.note(
                "reader",
                "cut an answer whose reader took nothing of it in "
                f"{self.limits.write_timeout_s:g} s",
            )
            self._drop()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.waiting_since = time.monotonic()
        self._arm()  # the next request on this connection gets its own deadline

    def _waiting(self) -> bool:
        """No whole request in progress: its headers, or its body, have not all arrived (or
        none was sent)."""
        cycle = self.cycle
        return cycle is None or cycle.response_complete or cycle.more_body

    def _arm(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
        self.header_timer = self.loop.call_later(self.limits.header_timeout_s, self._expire)

    def _expire(self) -> None:
        if self._waiting() and not self.transport.is_closing():
            REFUSALS.note(
                "headers",
                f"closed a connection that sent no complete request in "
                f"{self.limits.header_timeout_s:g} s",
            )
            self._drop()

    def _drop(self) -> None:
        """Close now, dropping what is still buffered for the reader: asyncio's close() would
        wait for it to be read, and the kernel would keep sending the rest of its buffer after
        close(); a reset (SO_LINGER 0) frees both at once. Stop counting it at once too: its
        connection_lost comes an event-loop turn later, and a burst of connections would
        meanwhile count as open (uvicorn's 503s)."""
        self.connections.discard(self)
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()


class Server(uvicorn.Server):
    """uvicorn's server whose event loop logs errors (a failed accept(), say) as one line."""

    async def startup(self, sockets: Any = None) -> None:
        asyncio.get_running_loop().set_exception_handler(_loop_error)
        await super().startup(sockets)


def _loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    error = context.get("exception")
    kind = type(error).__name__ if error else "error"
    detail = f": {error}" if error else ""
    REFUSALS.note(kind, f"{context.get('message', 'event loop error')}{detail}")


def raise_fd_limit() -> None:
    """The soft limit on open files up to the hard one (1024 by default on Debian)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def listen(host: str, port: int, limits: Limits) -> socket.socket:
    """The server's listening socket, opened before anything is printed: a port in use is one
    error line (uvicorn would log its own after our banner and exit with status 3)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(limits.max_connections)
    except OSError as err:
        sock.close()
        busy = err.errno == errno.EADDRINUSE
        fix = ": another server uses it (choose another --port)" if busy else ""
        raise AutoprofError(
            f"cannot listen on {host} port {port}: {err.strerror or err}{fix}"
        ) from None
    return sock


def serve(app: Any, sock: socket.socket, limits: Limits) -> None:
    """Run `app` on the listening `sock` until Ctrl-C with `limits`; the jobs it runs cannot
    read its memory or environment (`process.keep_private`: they hold the store's password)."""
    keep_private()
    raise_fd_limit()
    logging.basicConfig(format="%(message)s")
    protocol = type("Http", (LimitedH11,), {"limits": limits})
    config = uvicorn.Config(
        app,
        http=protocol,
        log_level="warning",
        timeout_graceful_shutdown=3,  # open live streams must not hold the server up on Ctrl-C
        timeout_keep_alive=limits.keep_alive_s,
        limit_concurrency=None,  # LimitedH11 caps the connections (uvicorn counted closing ones)
        h11_max_incomplete_event_size=limits.max_header_bytes,
        backlog=limits.max_connections,
    )
    logging.getLogger("uvicorn.error").addFilter(_OneLine())  # after uvicorn's logging setup
    Server(config).run(sockets=[sock])
