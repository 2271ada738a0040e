"""Store URLs: where the default store lives, how a user's URL is parsed, and how it is masked.

Passwords never leave this module in clear: every URL or error text shown to the user goes
through `mask` (for a URL) or `scrub` (for free text that may quote one).

The CLI's --store option reads `ENV_VAR` and `default_path` at import, so SQLAlchemy is imported
only by the functions that build URLs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from autoprof.errors import AutoprofError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

ENV_VAR = "AUTOPROF_STORE"
HIDDEN = "***"
_FORMS = "postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME, sqlite:///PATH or a file path"
_SCHEMES = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
    "sqlite": "sqlite",
}
# user:PASSWORD@ in the authority part (greedy to the last @, as URL parsers do), and
# password=... in a query string (libpq accepts both)
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@?#]*:)(.*)(@)")
_QUERY_PASSWORD = re.compile(r"([?&]password=)([^&#]*)", re.IGNORECASE)


def default_path() -> Path:
    """`$XDG_DATA_HOME/autoprof/results.db` (XDG default `~/.local/share`)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "autoprof" / "results.db"


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


def resolve(option: str | None) -> str:
    """The store the user means: `--store`, else $AUTOPROF_STORE, else the default SQLite file."""
    text = option or os.environ.get(ENV_VAR) or ""
    return text if text.strip() else f"sqlite:///{default_path()}"


def parse(text: str) -> URL:
    """A SQLAlchemy URL for `text`; a plain path means a SQLite file. Raises AutoprofError."""
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.exc import ArgumentError

    text = text.strip()
    if "://" not in text:
        return URL.create("sqlite", database=str(Path(text).expanduser()))
    try:
        url = make_url(text)
    except (ArgumentError, ValueError, TypeError) as err:
        raise AutoprofError(f"malformed store URL {mask(text)}: expected {_FORMS}") from err
    driver = _SCHEMES.get(url.drivername)
    if driver is None:
        raise AutoprofError(
            f"unsupported store URL scheme {url.drivername!r} in {mask(text)}: expected {_FORMS}"
        )
    url = url.set(drivername=driver)
    if driver == "sqlite":
        if not url.database or url.database == ":memory:":
            raise AutoprofError(f"store URL {mask(text)} names no database file")
    elif not url.database:
        raise AutoprofError(f"store URL {mask(text)} names no database (…/DBNAME)")
    return url


def display(url: URL) -> str:
    """The URL as it may be printed: password hidden, driver suffix dropped."""
    shown = url.set(drivername=url.get_backend_name())
    return mask(shown.render_as_string(hide_password=True))
