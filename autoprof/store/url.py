"""Store URLs: where the default store lives, how a user's URL is parsed, and how it is masked.

Passwords never leave in clear: every URL or error text shown to the user goes through
`autoprof.util.urls.mask` (for a URL) or `scrub` (for free text that may quote one).

Parsed here, without SQLAlchemy (an upload never imports it), by SQLAlchemy's own rules
(`sqlalchemy.engine.make_url`: the same parts, the same refusals, the same rendering), so that
`engine` makes SQLAlchemy's URL of the same parts and both show a store alike.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import parse_qsl, quote, quote_plus, unquote

from autoprof.errors import AutoprofError
from autoprof.util import xdg
from autoprof.util.urls import HIDDEN, mask

ENV_VAR = "AUTOPROF_STORE"
SQLITE, POSTGRESQL = "sqlite", "postgresql"
_FORMS = "postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME, sqlite:///PATH or a file path"
_SCHEMES = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
    "sqlite": "sqlite",
}
# sqlalchemy.engine.url._parse_url's pattern
_PATTERN = re.compile(
    r"""
        (?P<name>[\w\+]+)://
        (?:
            (?P<username>[^:/]*)
            (?::(?P<password>[^@]*))?
        @)?
        (?:
            (?:
                \[(?P<ipv6host>[^/\?]+)\] |
                (?P<ipv4host>[^/:\?]+)
            )?
            (?::(?P<port>[^/\?]*))?
        )?
        (?:/(?P<database>[^\?]*))?
        (?:\?(?P<query>.*))?
    """,
    re.X,
)


@dataclass(frozen=True)
class StoreURL:
    """A store's URL in parts, as SQLAlchemy's `URL` holds them (`drivername` with its driver:
    ``postgresql+psycopg`` or ``sqlite``)."""

    drivername: str
    username: str | None = None
    password: str | None = None
    host: str | None = None
    port: int | None = None
    database: str | None = None
    query: dict[str, str | tuple[str, ...]] = field(default_factory=dict)

    @property
    def backend(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.drivername.split("+", 1)[0]

    def render(self) -> str:
        """The URL as text, its password hidden (SQLAlchemy's `render_as_string`)."""
        text = self.drivername + "://"
        if self.username is not None:
            text += quote(self.username, safe=" +")
            if self.password is not None:
                text += ":" + HIDDEN
            text += "@"
        if self.host is not None:
            text += f"[{self.host}]" if ":" in self.host else self.host
        if self.port is not None:
            text += f":{self.port}"
        if self.database is not None:
            text += "/" + quote(self.database, safe=" +/")
        if self.query:
            text += "?" + "&".join(
                f"{quote_plus(k)}={quote_plus(v)}"
                for k in sorted(self.query)
                for v in _values(self.query[k])
            )
        return text


def _values(value: str | tuple[str, ...]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else value


def default_path() -> Path:
    """`$XDG_DATA_HOME/autoprof/results.db` (XDG default `~/.local/share`)."""
    return xdg.data_dir() / "results.db"


def resolve(option: str | None) -> str:
    """The store the user means: `--store`, else $AUTOPROF_STORE, else the default SQLite file."""
    text = option or os.environ.get(ENV_VAR) or ""
    return text if text.strip() else f"sqlite:///{default_path()}"


def _split(text: str) -> StoreURL:
    """`text`'s parts (SQLAlchemy's `make_url`); ValueError when it is no URL."""
    found = _PATTERN.match(text)
    if found is None:
        raise ValueError(text)
    parts = found.groupdict()
    query: dict[str, str | tuple[str, ...]] = {}
    for key, value in parse_qsl(parts["query"] or ""):
        query[key] = (*_values(query[key]), value) if key in query else value
    username, password, database = (
        unquote(parts[k]) if parts[k] is not None else None
        for k in ("username", "password", "database")
    )
    return StoreURL(
        parts["name"],
        username,
        password,
        parts["ipv4host"] or parts["ipv6host"],
        int(parts["port"]) if parts["port"] else None,
        database,
        query,
    )


def parse(text: str) -> StoreURL:
    """The URL `text` means; a plain path means a SQLite file. Raises AutoprofError."""
    text = text.strip()
    if "://" not in text:
        return StoreURL(_SCHEMES[SQLITE], database=str(Path(text).expanduser()))
    try:
        url = _split(text)
    except ValueError:
        raise AutoprofError(f"malformed store URL {mask(text)}: expected {_FORMS}") from None
    driver = _SCHEMES.get(url.drivername)
    if driver is None:
        raise AutoprofError(
            f"unsupported store URL scheme {url.drivername!r} in {mask(text)}: expected {_FORMS}"
        )
    url = replace(url, drivername=driver)
    if driver == SQLITE:
        if not url.database or url.database == ":memory:":
            raise AutoprofError(f"store URL {mask(text)} names no database file")
    elif not url.database:
        raise AutoprofError(f"store URL {mask(text)} names no database (…/DBNAME)")
    return url


def display(url: StoreURL) -> str:
    """The URL as it may be printed: password hidden, driver suffix dropped."""
    return mask(replace(url, drivername=url.backend).render())
