"""The store's databases through their own drivers (psycopg, sqlite3), without SQLAlchemy.

An upload talks to the database here alone: SQLAlchemy's import and its statement compiling
were a third of a million-row upload's CPU beside a busy PostgreSQL server (issue #40). `engine`
opens the same connections for SQLAlchemy (the readers, the migrations): one set of rules for
both. A connection's statements are written once for both backends, with ``%s`` placeholders
(``?`` on SQLite); what they store is what SQLAlchemy's types store (`Connection.time`, JSON
as ``json.dumps`` text), so the readers read either alike.

A PostgreSQL server that stops answering (frozen, swapped out, its host gone) ends an operation
after ANSWER_TIMEOUT_S without an answer (`AUTOPROF_STORE_TIMEOUT`): a frozen server's kernel
keeps acknowledging, so TCP keepalives never fire, and an upload mid-COPY waited forever.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from autoprof.errors import AutoprofError
from autoprof.store import url as store_url
from autoprof.util.urls import scrub

VERSION_TABLE = "autoprof_schema"
# the newest migration's revision: a store at it is opened without importing Alembic (or, for
# an upload, SQLAlchemy): tests/test_store.py checks it is the head
HEAD_REVISION = "0010"
CONNECT_TIMEOUT_S = 10
# the longest wait for one answer of PostgreSQL (a statement, a chunk of a COPY taken); 0: none
ANSWER_TIMEOUT_S = 300.0
ANSWER_TIMEOUT_ENV = "AUTOPROF_STORE_TIMEOUT"
SQLITE_BUSY_TIMEOUT_S = 300


class NoAnswer(psycopg.OperationalError):
    """The server gave no answer in time: the connection was closed. The rollback that
    follows fails on it too ("the connection is closed"): this is the error to report."""


def no_answer(err: BaseException | None) -> NoAnswer | None:
    """The NoAnswer that `err` (a driver's, SQLAlchemy's, or one met while handling it) came
    of, if any."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, NoAnswer):
            return err
        orig = getattr(err, "orig", None)
        err = orig if isinstance(orig, BaseException) else (err.__cause__ or err.__context__)
    return None


class _QuietAfterNoAnswer(logging.Filter):
    """psycopg logs (to standard error, through logging's last resort) the failure to end a
    COPY on a connection NoAnswer closed; the user gets the one line of NoAnswer instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().endswith("the connection is closed")


logging.getLogger("psycopg").addFilter(_QuietAfterNoAnswer())


class Answering(psycopg.Connection):
    """A psycopg connection that waits `answer_timeout` seconds at most for each step of an
    operation (a statement's answer, room in the socket for the next chunk of a COPY); then it
    closes the connection (what the server got is rolled back) and says so in one line."""

    answer_timeout: float | None = None

    def wait(self, gen, interval=psycopg.connection._WAIT_INTERVAL, timeout=None):
        try:
            return super().wait(gen, interval, timeout or self.answer_timeout)
        except psycopg.errors._WaitTimeout:
            self.pgconn.finish()  # mid-operation: nothing more can go over this connection
            raise NoAnswer(
                f"no answer from the server in {self.answer_timeout:g} s: is it stopped or "
                f"overloaded? ({ANSWER_TIMEOUT_ENV}=SECONDS waits longer)"
            ) from None


def answer_timeout() -> float | None:
    """$AUTOPROF_STORE_TIMEOUT (seconds, 0: wait forever) or ANSWER_TIMEOUT_S."""
    text = os.environ.get(ANSWER_TIMEOUT_ENV, "").strip()
    try:
        seconds = float(text) if text else ANSWER_TIMEOUT_S
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise AutoprofError(f"{ANSWER_TIMEOUT_ENV}={text!r} is not a number of seconds (0: none)")
    return seconds or None


def postgresql_connect(timeout: float | None, *args: Any, **kwargs: Any) -> Answering:
    """A psycopg connection that waits `timeout` seconds at most for an answer."""
    conn = Answering.connect(*args, **kwargs)
    conn.answer_timeout = timeout
    return conn


def postgresql_arguments(url: store_url.StoreURL) -> dict[str, Any]:
    """psycopg's connection arguments for `url`, as SQLAlchemy's psycopg dialect makes them
    (its query's own arguments included), and the connect timeout."""
    named: dict[str, Any] = {"user": url.username, "password": url.password, "host": url.host}
    named |= {"port": url.port, "dbname": url.database}
    found = {k: v for k, v in named.items() if v is not None}
    found |= {k: v if isinstance(v, str) else ",".join(v) for k, v in url.query.items()}
    return {"connect_timeout": CONNECT_TIMEOUT_S, **found}


def sqlite_path(url: store_url.StoreURL) -> Path:
    return Path(url.database or "").expanduser()


def sqlite_setup(conn: sqlite3.Connection) -> None:
    """What every connection to a SQLite store sets: transactions begun by autoprof (pysqlite's
    own handling defers BEGIN and cannot take the write lock early), foreign keys enforced
    (their ON DELETE CASCADE), the write-ahead log (readers go on beside a writer)."""
    conn.isolation_level = None
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA journal_mode = WAL")


def checkpoint(conn: sqlite3.Connection) -> None:
    """Move what SQLite's write-ahead log holds into the database file and empty the log
    (issue #38, point 8): once a write returns, store.db alone holds it, and a copy of that
    file is the whole store. Readers still reading old pages leave the rest for the next."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def first_line(err: BaseException) -> str:
    """The first line a database error says (its driver's, under SQLAlchemy's wrapper)."""
    orig = no_answer(err) or getattr(err, "orig", None) or err
    reason = str(orig).strip().splitlines()
    return reason[0] if reason else type(err).__name__


@contextlib.contextmanager
def errors(shown: str, text: str) -> Iterator[None]:
    """Turn the drivers' errors into one line for the user, on the store `shown`, every
    password of the URL `text` the user gave masked."""
    try:
        yield
    except (psycopg.Error, sqlite3.Error) as err:
        raise AutoprofError(scrub(f"store {shown}: {first_line(err)}", text)) from None


class Connection:
    """A driver's connection with the statements autoprof writes for both backends; outside
    `transaction` each statement commits on its own."""

    def __init__(self, driver: Any, postgresql: bool) -> None:
        self.driver = driver
        self.postgresql = postgresql
        self._statements: dict[str, str] = {}

    def _sql(self, statement: str) -> str:
        if self.postgresql:
            return statement
        found = self._statements.get(statement)
        if found is None:
            found = self._statements[statement] = statement.replace("%s", "?")
        return found

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        """The driver's cursor, `statement` (``%s`` placeholders) run with `params`."""
        return self.driver.execute(self._sql(statement), params)

    def executemany(self, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        if self.postgresql:
            with self.driver.cursor() as cursor:
                cursor.executemany(statement, rows)
        else:
            self.driver.executemany(self._sql(statement), rows)

    def scalar(self, statement: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row (None: no row)."""
        found = self.execute(statement, params).fetchone()
        return None if found is None else found[0]

    def revision(self) -> str | None:
        """The store's schema revision; None where it has none (an empty database)."""
        try:
            return self.scalar(f"SELECT version_num FROM {VERSION_TABLE}")
        except (psycopg.Error, sqlite3.Error):
            return None

    def read_json(self, value: Any) -> Any:
        """A JSON column's value (psycopg parses it; SQLite gives back its text)."""
        return json.loads(value) if isinstance(value, str) and not self.postgresql else value

    def time(self, stamp: dt.datetime | None) -> Any:
        """A naive UTC time as a DateTime column takes it: SQLite stores SQLAlchemy's text,
        always with microseconds (its readers parse that, and order by it)."""
        if stamp is None or self.postgresql:
            return stamp
        return stamp.strftime("%Y-%m-%d %H:%M:%S.%f")

    def read_time(self, value: Any) -> dt.datetime | None:
        """A DateTime column's value as a datetime (SQLite gives back its text)."""
        return dt.datetime.fromisoformat(value) if isinstance(value, str) else value

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A write transaction, committed at the end, rolled back on an error; on SQLite it
        takes the write lock up front (BEGIN IMMEDIATE), so that concurrent writers queue
        instead of failing on a lock upgrade, and checkpoints the log once committed."""
        self.driver.execute("BEGIN" if self.postgresql else "BEGIN IMMEDIATE")
        try:
            yield self
        except BaseException:
            with contextlib.suppress(psycopg.Error, sqlite3.Error):
                self.driver.execute("ROLLBACK")
            raise
        self.driver.execute("COMMIT")
        if not self.postgresql:
            checkpoint(self.driver)

    def close(self) -> None:
        self.driver.close()


@dataclass(frozen=True)
class Database:
    """A store as its driver reaches it: the parsed URL, and the user's text (kept only to
    scrub its password out of driver errors)."""

    url: store_url.StoreURL
    text: str

    @classmethod
    def of(cls, text: str | None) -> Database:
        """The store `text` names (or $AUTOPROF_STORE, or the default), not connected."""
        resolved = store_url.resolve(text)
        return cls(store_url.parse(resolved), resolved)

    @property
    def shown(self) -> str:
        return store_url.display(self.url)

    @property
    def postgresql(self) -> bool:
        return self.url.backend == store_url.POSTGRESQL

    def errors(self) -> contextlib.AbstractContextManager[None]:
        return errors(self.shown, self.text)

    @contextlib.contextmanager
    def connect(self) -> Iterator[Connection]:
        """A connection of the driver's own (errors: one masked line), closed after."""
        with self.errors():
            if self.postgresql:
                # autocommit: a transaction is `Connection.transaction`'s BEGIN to its COMMIT
                arguments = postgresql_arguments(self.url)
                driver: Any = postgresql_connect(answer_timeout(), autocommit=True, **arguments)
            else:
                driver = sqlite3.connect(sqlite_path(self.url), timeout=SQLITE_BUSY_TIMEOUT_S)
                sqlite_setup(driver)
            conn = Connection(driver, self.postgresql)
            try:
                yield conn
            finally:
                conn.close()
