"""Store URLs: where the default store lives, how a user's URL is parsed, and how it is masked.

Passwords never leave in clear: every URL or error text shown to the user goes through
`autoprof.util.urls.mask` (for a URL) or `scrub` (for free text that may quote one).

The CLI's --store option reads `ENV_VAR` and `default_path` at import, so SQLAlchemy is imported
only by the functions that build URLs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from autoprof.errors import AutoprofError
from autoprof.util import xdg
from autoprof.util.urls import mask

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

ENV_VAR = "AUTOPROF_STORE"
_FORMS = "postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME, sqlite:///PATH or a file path"
_SCHEMES = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
    "sqlite": "sqlite",
}


def default_path() -> Path:
    """`$XDG_DATA_HOME/autoprof/results.db` (XDG default `~/.local/share`)."""
    return xdg.data_dir() / "results.db"


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
