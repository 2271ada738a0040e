"""Open a store: engine per backend, schema version check, migrations, and error translation.

Every command opens the store through `open_store` (an upload only when the store is not at
this autoprof's revision: `upload` reads it with the driver), which connects once, and compares the
database's schema revision (Alembic, table ``autoprof_schema``) with the newest migration shipped
in this package. Commands that write (upload, a worker) initialise an empty database on the spot
(a first upload just works); read-only ones (`create=False`: runs list/show/export/delete, store
info) never create anything: a missing SQLite file or a database without autoprof's schema is
"no store at ...". A store at an older revision is left alone and the user is told to run
``autoprof store migrate``; a store newer than this autoprof is refused. Initialisation and
migration hold a lock (a PostgreSQL advisory lock, SQLite's write lock) so concurrent first
uploads do not race. The connections are made by `driver`'s rules (its answer timeout, its
SQLite settings), the same as an upload's own.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from autoprof.errors import AutoprofError
from autoprof.store import driver
from autoprof.store.driver import HEAD_REVISION, VERSION_TABLE
from autoprof.util.urls import scrub

MIGRATIONS = Path(__file__).with_name("migrations")
# pg_advisory_xact_lock key held while the schema is checked, created or migrated
_MIGRATION_LOCK = 0x6175746F70726F66 & 0x7FFFFFFFFFFFFFFF  # "autoprof"
_CREATES = "`autoprof upload` or `autoprof store migrate` creates one"


@dataclass
class Store:
    """An open store: the engine, and where it is (`driver.Database`: its URL, and the text
    needed to mask it in every message)."""

    engine: Engine
    database: driver.Database

    @property
    def shown(self) -> str:
        return self.database.shown

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """Turn database errors into one masked line for the user: SQLAlchemy's, and the
        drivers' own (the bulk paths use them, and ADBC, directly)."""
        from adbc_driver_manager import Error as AdbcError

        with self.database.errors():
            try:
                yield
            except (SQLAlchemyError, AdbcError) as err:
                whole = isinstance(err, SQLAlchemyError) and not isinstance(err, DBAPIError)
                said = str(err) if whole else driver.first_line(err)
                message = scrub(f"store {self.shown}: {said}", self.database.text)
                raise AutoprofError(message) from None

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
            sqlite = raw.driver_connection
            assert isinstance(sqlite, sqlite3.Connection)  # a SQLite engine's
            driver.checkpoint(sqlite)
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
        source = driver.sqlite_path(self.database.url)
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
    engine = create_engine(url, connect_args={"timeout": driver.SQLITE_BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        driver.sqlite_setup(dbapi_conn)

    # pysqlite's own transaction handling is off (`driver.sqlite_setup`): BEGIN emitted here
    @event.listens_for(engine, "begin")
    def _begin(conn):
        conn.exec_driver_sql(conn.get_execution_options().get("sqlite_begin", "BEGIN"))

    return engine


def _engine(database: driver.Database) -> Engine:
    parts = database.url
    url = URL.create(
        parts.drivername, parts.username, parts.password, parts.host, parts.port,
        parts.database, parts.query,
    )  # fmt: skip
    if not database.postgresql:
        return _sqlite_engine(url)
    engine = create_engine(url, connect_args={"connect_timeout": driver.CONNECT_TIMEOUT_S})
    timeout = driver.answer_timeout()

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect, _record, cargs, cparams):
        return driver.postgresql_connect(timeout, *cargs, **cparams)

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
    database = driver.Database.of(text)
    if not create and not database.postgresql:
        path = driver.sqlite_path(database.url)
        if not path.is_file():
            raise AutoprofError(f"no store at {path} ({_CREATES})")
    return Store(engine=_engine(database), database=database)


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
