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


def refusal(
    method: str, path: str, scheme: str, headers: Mapping[str, str], hosts: frozenset[str]
) -> Refusal | None:
    """Why this request is refused before routing, or None when it may go on."""
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


class Guard:
    """ASGI middleware: `refusal` before the app, HEADERS on every answer (a route's own, as
    the flame graph's, win)."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str]):
        self.app = app
        self.hosts = hosts

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

        refused = refusal(
            scope["method"], scope["path"], scope["scheme"], Headers(scope=scope), self.hosts
        )
        if refused is None:
            await self.app(scope, receive, send_with_headers)
            return
        response: Response
        if scope["path"].startswith("/api/"):
            response = JSONResponse({"error": refused.message}, status_code=refused.status)
        else:
            response = PlainTextResponse(refused.message + "\n", status_code=refused.status)
        await response(scope, receive, send_with_headers)
