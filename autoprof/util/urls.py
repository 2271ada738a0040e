"""Passwords out of URLs: every URL or driver message shown to the user goes through `mask`
(a URL) or `scrub` (free text that may quote one).

Both the results store (SQLAlchemy URLs) and the queue (Redis URLs) print URLs, so this lives
below both of them.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

HIDDEN = "***"
# user:PASSWORD@ in the authority part (greedy to the last @, as URL parsers do), and
# password=... in a query string (libpq accepts both)
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@?#]*:)(.*)(@)")
_QUERY_PASSWORD = re.compile(r"([?&]password=)([^&#]*)", re.IGNORECASE)


def mask(text: str) -> str:
    """`text` (a URL, possibly malformed) with any password replaced by ``***``."""
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{HIDDEN}{m.group(3)}", text)
    return _QUERY_PASSWORD.sub(lambda m: f"{m.group(1)}{HIDDEN}", text)


def _passwords(text: str) -> list[str]:
    found = [m.group(2) for m in (_USERINFO.match(text),) if m] + [
        m.group(2) for m in _QUERY_PASSWORD.finditer(text)
    ]
    secrets = {p for p in found if p} | {unquote(p) for p in found if p}
    return sorted(secrets, key=len, reverse=True)


def scrub(message: str, url: str) -> str:
    """`message` (e.g. a driver's error text) with every password of `url` replaced."""
    for secret in _passwords(url):
        message = message.replace(secret, HIDDEN)
    return mask(message)
