"""The checks every HTTP request passes before any route sees it, and the headers every answer
carries: what keeps a page open in the user's browser (or a DNS name that points at 127.0.0.1)
from reading runs or starting jobs.

- Host must name this server (DNS rebinding: evil.example resolving to 127.0.0.1 sends
  `Host: evil.example`), else 400.
- A state-changing request (POST, DELETE, ...) must come from this server's own pages: its Origin,
  when sent, is this server's; one that carries the login cookie must send an Origin (browsers
  do), else 403.
- A state-changing /api/ request with a body sends it as application/json, else 415: a cross-site
  form or `text/plain` fetch can send a body without a CORS preflight, JSON cannot.
- A request's size is bounded (`limits.Limits`): headers over max_header_bytes get 431, a body
  over max_body_bytes 413 (announced, or counted as it arrives, chunked); one that gives both
  Content-Length and Transfer-Encoding 400 (request smuggling: a proxy in front and this server
  could read its end differently). Each closes the connection: its body is left unread.
- Every answer forbids framing (clickjacking) and MIME sniffing, and carries a CSP that lets
  pages run only this server's own scripts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import cookie_parser
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from autoprof.web.limits import DEFAULTS, Limits

TOKEN_COOKIE = "autoprof_token"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
JSON = "application/json"
# plotly sets inline styles on the charts it draws; scripts and everything else: this server only
CSP = (
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "object-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": CSP,
    "Referrer-Policy": "no-referrer",  # a page's address may carry ?token= (/login)
}


def host_names(bound: str, extra: tuple[str, ...] | list[str] = ()) -> frozenset[str]:
    """The Host names this server answers to: loopback, the address it binds, the extra ones
    (`serve --allow-host`), lower-case, IPv6 addresses in brackets as in a Host header."""
    names = [*LOOPBACK_NAMES, bound, *extra]
    return frozenset(f"[{n}]" if ":" in n and not n.startswith("[") else n.lower() for n in names)


def host_name(header: str) -> str:
    """The name part of a Host header (port dropped), lower-case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header.partition("]")[0] + "]"
    return header.rpartition(":")[0] if ":" in header else header


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str
    close: bool = False  # the connection cannot go on: what the client sent is left unread


def refusal(
    method: str,
    path: str,
    scheme: str,
    headers: Mapping[str, str],
    hosts: frozenset[str],
    limits: Limits = DEFAULTS,
    header_bytes: int = 0,
) -> Refusal | None:
    """Why this request is refused before routing, or None when it may go on; `header_bytes`:
    the size of its request line and headers."""
    if header_bytes > limits.max_header_bytes:
        return Refusal(
            431, f"request headers over {limits.max_header_bytes} bytes: refused", close=True
        )
    if "content-length" in headers and "transfer-encoding" in headers:
        return Refusal(
            400,
            "a request with both Content-Length and Transfer-Encoding is refused "
            "(request smuggling)",
            close=True,
        )
    length = headers.get("content-length", "0")
    if length.isdigit() and int(length) > limits.max_body_bytes:
        return Refusal(413, _too_large(limits), close=True)
    host = headers.get("host", "")
    if host_name(host) not in hosts:
        return Refusal(
            400, f"Host {host!r} is not a name of this server (serve --allow-host NAME adds one)"
        )
    if method in SAFE_METHODS:
        return None
    origin = headers.get("origin")
    if origin is not None and origin.lower() != f"{scheme}://{host}".lower():
        return Refusal(403, f"Origin {origin!r} is not this server: refused")
    if origin is None and _carries_login_cookie(headers):
        return Refusal(403, "a request with the login cookie must send its Origin: refused")
    media = headers.get("content-type", "").partition(";")[0].strip().lower()
    has_body = headers.get("content-length", "0") != "0" or "transfer-encoding" in headers
    if path.startswith("/api/") and (media or has_body) and media != JSON:
        return Refusal(415, f"send the body as {JSON}, not {media or 'untyped'}")
    return None


def _carries_login_cookie(headers: Mapping[str, str]) -> bool:
    return TOKEN_COOKIE in cookie_parser(headers.get("cookie", ""))


def _too_large(limits: Limits) -> str:
    return f"request body over {limits.max_body_bytes} bytes: refused"


def head_bytes(scope: Scope) -> int:
    """The size of a request's line and headers as they came (`NAME: VALUE\\r\\n` each)."""
    line = len(scope["method"]) + len(scope.get("raw_path", b"")) + len(scope["query_string"])
    return line + 12 + sum(len(k) + len(v) + 4 for k, v in scope["headers"])


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None when it passes `limit` bytes (or the client left first)."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            return bytes(body)


class Guard:
    """ASGI middleware: `refusal` before the app, the body read (within its limit) before the
    app sees it, HEADERS on every answer (a route's own, as the flame graph's, win)."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str], limits: Limits = DEFAULTS):
        self.app = app
        self.hosts = hosts
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for key, value in HEADERS.items():
                    headers.setdefault(key, value)
            await send(message)

        headers = Headers(scope=scope)
        refused = refusal(
            scope["method"],
            scope["path"],
            scope["scheme"],
            headers,
            self.hosts,
            self.limits,
            head_bytes(scope),
        )
        if refused is None and (
            headers.get("content-length", "0") != "0" or "transfer-encoding" in headers
        ):
            body = await read_body(receive, self.limits.max_body_bytes)
            if body is None:
                refused = Refusal(413, _too_large(self.limits), close=True)
            else:
                receive = _replay(body, receive)
        if refused is None:
            await self.app(scope, receive, send_with_headers)
            return
        response: Response
        if scope["path"].startswith("/api/"):
            response = JSONResponse({"error": refused.message}, status_code=refused.status)
        else:
            response = PlainTextResponse(refused.message + "\n", status_code=refused.status)
        if refused.close:
            response.headers["Connection"] = "close"
        await response(scope, receive, send_with_headers)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives `body` whole first, then what the client sends (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
