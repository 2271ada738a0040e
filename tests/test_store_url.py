"""Store URLs: default location, parsing, and password masking (pure functions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoprof.errors import AutoprofError
from autoprof.store import url
from autoprof.util import urls, xdg


@pytest.mark.parametrize(
    "text, shown",
    [
        ("postgresql://bob:pw@db.lab:5432/prof", "postgresql://bob:***@db.lab:5432/prof"),
        ("postgresql://bob:p@ss:w/rd@db/prof", "postgresql://bob:***@db/prof"),  # unencoded @
        ("postgresql://bob:p%40ss@db/prof", "postgresql://bob:***@db/prof"),
        ("postgresql://db/prof?user=bob&password=pw", "postgresql://db/prof?user=bob&password=***"),
        ("postgresql://bob@db/prof", "postgresql://bob@db/prof"),
        ("sqlite:////home/bob/results.db", "sqlite:////home/bob/results.db"),
        ("postgresql://bob:pw@db:port/prof", "postgresql://bob:***@db:port/prof"),  # malformed
    ],
)
def test_mask_hides_every_password(text, shown):
    assert urls.mask(text) == shown


def test_scrub_removes_the_password_from_driver_text():
    message = 'password authentication failed for user "bob" (password p@ss/w)'
    scrubbed = urls.scrub(message, "postgresql://bob:p%40ss%2Fw@db/prof")
    assert "p@ss/w" not in scrubbed and "***" in scrubbed


def test_display_hides_the_password_and_driver():
    parsed = url.parse("postgres://bob:pw@db/prof")
    assert parsed.drivername == "postgresql+psycopg"
    assert parsed.password == "pw"
    assert url.display(parsed) == "postgresql://bob:***@db/prof"


def test_a_plain_path_is_a_sqlite_file(tmp_path):
    parsed = url.parse(str(tmp_path / "r.db"))
    assert parsed.backend == "sqlite" and parsed.database == str(tmp_path / "r.db")


def test_resolve_prefers_option_then_environment_then_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv(url.ENV_VAR, raising=False)
    assert url.resolve(None) == f"sqlite:///{tmp_path}/autoprof/results.db"
    monkeypatch.setenv(url.ENV_VAR, "postgresql://db/team")
    assert url.resolve(None) == "postgresql://db/team"
    assert url.resolve("mine.db") == "mine.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert url.default_path() == Path.home() / ".local/share/autoprof/results.db"


@pytest.mark.parametrize("value", ["", "relative/dir"])
def test_an_empty_or_relative_xdg_variable_counts_as_unset(monkeypatch, value):
    """The XDG spec: such a value is invalid and must be ignored."""
    monkeypatch.setenv("XDG_CACHE_HOME", value)
    monkeypatch.setenv("XDG_DATA_HOME", value)
    assert xdg.cache_dir() == Path.home() / ".cache" / "autoprof"
    assert xdg.data_dir() == Path.home() / ".local" / "share" / "autoprof"


@pytest.mark.parametrize(
    "text",
    ["postgresql://bob:pw@db:port/prof", "redis://db/0", "sqlite://", "postgresql://bob:pw@db"],
)
def test_unusable_urls_are_refused_masked(text):
    with pytest.raises(AutoprofError) as err:
        url.parse(text)
    assert ":pw@" not in str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        "postgresql://bob:pw@db.lab:5432/prof",
        "postgres://bob:p%40ss@db/prof?sslmode=require&application_name=a+b",
        "postgresql+psycopg://bob@[::1]:5433/prof",
        "postgresql:///prof?host=/var/run/postgresql&host=/tmp",
        "postgresql://b%2Fob:p%3Aw@db/my%20db",
        "sqlite:////home/bob/results%20x.db",
        "sqlite:///relative/r.db",
    ],
)
def test_urls_are_parsed_as_sqlalchemy_parses_them(text):
    """`url.parse` reads a URL without SQLAlchemy (an upload never imports it), by its rules:
    the same parts as `make_url`, shown alike."""
    from sqlalchemy.engine import make_url

    ours, theirs = url.parse(text), make_url(text)
    theirs = theirs.set(drivername=url._SCHEMES[theirs.drivername])
    parts = ("drivername", "username", "password", "host", "port", "database")
    assert [getattr(ours, p) for p in parts] == [getattr(theirs, p) for p in parts]
    assert ours.query == dict(theirs.query)
    shown = theirs.set(drivername=theirs.get_backend_name()).render_as_string(hide_password=True)
    assert url.display(ours) == urls.mask(shown)
