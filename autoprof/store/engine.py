"""Open a store: engine per backend, schema version check, migrations, and error translation.

Every command opens the store through `open_store`, which connects once, and compares the
database's schema revision (Alembic, table ``autoprof_schema``) with the newest migration shipped
in this package. Commands that write (upload, a worker) initialise an empty database on the spot
(a first upload just works); read-only ones (`create=False`: runs list/show/export/delete, store
info) never create anything: a missing SQLite file or a database without autoprof's schema is
"no store at ...". A store at an older revision is left alone and the user is told to run
``autoprof store migrate``; a store newer than this autoprof is refused. Initialisation and
migration hold a lock (a PostgreSQL advisory lock, SQLite's write lock) so concurrent first
uploads do not race.

A PostgreSQL server that stops answering (frozen, swapped out, its host gone) ends an operation
after ANSWER_TIMEOUT_S without an answer (`AUTOPROF_STORE_TIMEOUT`): a frozen server's kernel
keeps acknowledging, so TCP keepalives never fire, and an upload mid-COPY waited forever.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from autoprof.errors import AutoprofError
from autoprof.store import url as store_url
from autoprof.util.urls import scrub

MIGRATIONS = Path(__file__).with_name("migrations")
VERSION_TABLE = "autoprof_schema"
# the newest migration's revision: a store at it is opened without importing Alembic, which
# costs every command a few tenths of a second (tests/test_store.py checks it is the head)
HEAD_REVISION = "0010"
# pg_advisory_xact_lock key held while the schema is checked, created or migrated
_MIGRATION_LOCK = 0x6175746F70726F66 & 0x7FFFFFFFFFFFFFFF  # "autoprof"
CONNECT_TIMEOUT_S = 10
# the longest wait for one answer of PostgreSQL (a statement, a chunk of a COPY taken); 0: none
ANSWER_TIMEOUT_S = 300.0
ANSWER_TIMEOUT_ENV = "AUTOPROF_STORE_TIMEOUT"
SQLITE_BUSY_TIMEOUT_S = 300
_CREATES = "`autoprof upload` or `autoprof store migrate` creates one"


@dataclass
class Store:
    """An open store: the engine, and the URL text needed to mask it in every message."""

    engine: Engine
    url: URL
    text: str  # what the user gave, kept only to scrub its password out of driver errors

    @property
    def shown(self) -> str:
        return store_url.display(self.url)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """Turn database errors into one masked line for the user."""
        from adbc_driver_manager import Error as AdbcError

        try:
            yield
        except (DBAPIError, psycopg.Error, sqlite3.Error, AdbcError) as err:
            # the bulk paths use the drivers (and ADBC's) directly: their errors arrive unwrapped
            orig = _no_answer(err) or (err.orig if isinstance(err, DBAPIError) else err)
            reason = str(orig or err).strip().splitlines()
            first = reason[0] if reason else type(err).__name__
            message = scrub(f"store {self.shown}: {first}", self.text)
            raise AutoprofError(message) from None
        except SQLAlchemyError as err:
            raise AutoprofError(scrub(f"store {self.shown}: {err}", self.text)) from None

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction; on SQLite it takes the write lock up front (BEGIN IMMEDIATE), so
        concurrent writers queue instead of failing on a lock upgrade."""
        engine = self.engine.execution_options(sqlite_begin="BEGIN IMMEDIATE")
        with self.errors():
            with engine.begin() as conn:
                yield conn
            if self.dialect == "sqlite":
                self.checkpoint()

    def checkpoint(self) -> None:
        """Move what SQLite's write-ahead log holds into the database file and empty the log
        (issue #38, point 8): once a write returns, store.db alone holds it, and a copy of that
        file is the whole store. Readers still reading old pages leave the rest for the next."""
        raw = self.engine.raw_connection()
        try:
            raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            raw.close()

    def backup(self, dest: Path) -> None:
        """A consistent copy of a SQLite store into the new file `dest` (SQLite's online
        backup: writers may go on meanwhile); AutoprofError for PostgreSQL or an existing
        `dest`."""
        if self.dialect != "sqlite":
            raise AutoprofError(f"store {self.shown}: back PostgreSQL up with pg_dump")
        if dest.exists():
            raise AutoprofError(f"{dest} exists: give a new file")
        source = Path(self.url.database or "").expanduser()
        partial = dest.with_name(dest.name + ".partial")
        try:
            with (
                contextlib.closing(sqlite3.connect(source)) as src,
                contextlib.closing(sqlite3.connect(partial)) as copy,
            ):
                src.backup(copy)
                copy.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
            partial.rename(dest)
        except (OSError, sqlite3.Error) as err:
            partial.unlink(missing_ok=True)
            raise AutoprofError(f"backing up to {dest}: {err}") from None

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        with self.errors(), self.engine.begin() as conn:
            yield conn


def _sqlite_engine(url: URL) -> Engine:
    Path(url.database or "").expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

    # pysqlite's own transaction handling defers BEGIN and cannot take the write lock early;
    # the SQLAlchemy recipe: disable it and emit BEGIN ourselves.
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None
        dbapi_conn.execute("PRAGMA foreign_keys = ON")
        dbapi_conn.execute("PRAGMA journal_mode = WAL")

    @event.listens_for(engine, "begin")
    def _begin(conn):
        conn.exec_driver_sql(conn.get_execution_options().get("sqlite_begin", "BEGIN"))

    return engine


class NoAnswer(psycopg.OperationalError):
    """The server gave no answer in time: the connection was closed. The rollback that
    follows fails on it too ("the connection is closed"): this is the error to report."""


def _no_answer(err: BaseException | None) -> NoAnswer | None:
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


class _Answering(psycopg.Connection):
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


def _engine(url: URL) -> Engine:
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    engine = create_engine(url, connect_args={"connect_timeout": CONNECT_TIMEOUT_S})
    timeout = answer_timeout()

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect, _record, cargs, cparams):
        conn = _Answering.connect(*cargs, **cparams)
        conn.answer_timeout = timeout
        return conn

    return engine


def alembic_config(conn: Connection):
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    return config


def head_revision() -> str:
    return HEAD_REVISION


def current_revision(conn: Connection) -> str | None:
    """The store's schema revision (Alembic's version table, read in SQL), None if it has none."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


def _upgrade(conn: Connection) -> None:
    from alembic import command

    command.upgrade(alembic_config(conn), "head")


def _lock(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")


def _is_known(revision: str) -> bool:
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    try:
        return ScriptDirectory(str(MIGRATIONS)).get_revision(revision) is not None
    except CommandError:
        return False


def check_schema(store: Store, conn: Connection, create: bool = True) -> None:
    """Create the schema in an empty database (when `create`); refuse one at another revision,
    saying why."""
    _lock(conn)
    current, head = current_revision(conn), head_revision()
    if current == head:
        return
    if current is None:
        if "run" in inspect(conn).get_table_names():
            raise AutoprofError(
                f"store {store.shown} has a 'run' table but no autoprof schema version: "
                "it is not an autoprof store (or predates versioning); use another database"
            )
        if not create:
            raise AutoprofError(f"no store at {store.shown}: the database is empty ({_CREATES})")
        _upgrade(conn)
        return
    if _is_known(current):
        raise AutoprofError(
            f"store {store.shown} has schema {current}, older than this autoprof's {head}: "
            "back it up, then run `autoprof store migrate` with the same --store"
        )
    raise AutoprofError(
        f"store {store.shown} has schema {current}, newer than this autoprof knows "
        f"(up to {head}): upgrade autoprof to use this store"
    )


def connect(text: str | None, create: bool = True) -> Store:
    """A `Store` for `text` (or $AUTOPROF_STORE, or the default), connected, schema not checked.
    Without `create`, a SQLite file that does not exist is refused before anything is made."""
    resolved = store_url.resolve(text)
    parsed = store_url.parse(resolved)
    if not create and parsed.get_backend_name() == "sqlite":
        path = Path(parsed.database or "").expanduser()
        if not path.is_file():
            raise AutoprofError(f"no store at {path} ({_CREATES})")
    return Store(engine=_engine(parsed), url=parsed, text=resolved)


def open_store(text: str | None, create: bool = True) -> Store:
    """Connect and check the schema; every error is one masked line. With `create` (commands
    that store results) a missing or empty store is initialised; without it (read-only
    commands) it is refused, and nothing is written."""
    store = connect(text, create)
    with store.write() if create else store.read() as conn:
        check_schema(store, conn, create)
    return store


def migrate(text: str | None) -> tuple[str | None, str]:
    """Upgrade the store's schema to this autoprof's head; returns (from, to) revisions."""
    store = connect(text)
    head = head_revision()
    with store.write() as conn:
        _lock(conn)
        current = current_revision(conn)
        if current is not None and not _is_known(current):
            raise AutoprofError(
                f"store {store.shown} has schema {current}, newer than this autoprof knows "
                f"(up to {head}): upgrade autoprof instead"
            )
        if current != head:
            _upgrade(conn)
    return current, head
