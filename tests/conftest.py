"""Shared test helpers: the Intel perfmon data autoprof ships, PostgreSQL databases made per test,
and skips (saying why) when either is absent.

Redis tests (`redis_url`) claim an empty database index of their own per module (atomically,
`autoprof.testing.workers.claim`) and flush it afterwards; they skip when no server answers at
$AUTOPROF_TEST_REDIS (default redis://127.0.0.1:6379).

PostgreSQL tests create a randomly named database through the `postgres` maintenance database
and drop it afterwards; they skip when no server answers at $AUTOPROF_TEST_PG
(default postgresql://postgres@127.0.0.1:5432/postgres).

`cli_run` runs a command in this process (as asv's tests do): most commands end in
milliseconds, while a fresh interpreter costs a second of imports. A test whose point is a real
process (profile, signals, workers, pipes) starts one itself. Tests that use the `writes`
fixture profile for real, so they are marked slow here (`make test-fast` leaves them out).
"""

from __future__ import annotations

import os
import shutil
import signal
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import redis
from psycopg import sql

from autoprof.catalog import embedded
from autoprof.examples import build_hotspots, build_writes
from autoprof.perf.selfcheck import breakpoint_miscount
from autoprof.testing.cli import CliResult, invoke
from autoprof.testing.workers import claim
from tests.helpers import CHROMIUM, FLAGS

REPO = Path(__file__).resolve().parents[1]
_SHIPPED = embedded.directory("intel")
assert _SHIPPED is not None, "autoprof/events/intel/perfmon.tar.xz is missing"
INTEL_DIR: Path = _SHIPPED
SAMPLES = Path(__file__).parent / "data" / "samples"  # real output (README.md there)


@pytest.fixture
def intel_dir() -> Path:
    """The Intel perfmon data autoprof ships (autoprof/events/intel, extracted once into the
    user's cache): the tests stand on the repository alone, not on ../shared."""
    return INTEL_DIR


@pytest.fixture
def samples_dir() -> Path:
    """Samples of real perf and autoperf output kept with the tests (tests/data/samples)."""
    return SAMPLES


ADMIN = os.environ.get("AUTOPROF_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
SECRET = "s3cret-Pw"  # the server trusts loopback, so any password is accepted (and must hide)


def admin_connection():
    return psycopg.connect(ADMIN, autocommit=True, connect_timeout=3)


@pytest.fixture(scope="session")
def pg_server() -> str:
    try:
        with admin_connection():
            pass
    except psycopg.OperationalError as err:
        pytest.skip(f"PostgreSQL not reachable at {ADMIN}: {str(err).splitlines()[0]}")
    return ADMIN


@pytest.fixture(scope="session")
def pg_database(pg_server):
    """A database of this test process's own (an xdist worker's), dropped at its end; `pg_url`
    empties it for each test: CREATE and DROP DATABASE take a checkpoint each, 0.5-2 s a test
    here, and the store's tests were a quarter of `make test-fast`."""
    name = f"autoprof_test_{uuid.uuid4().hex[:12]}"
    with admin_connection() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    with psycopg.connect(_pg_url(name), autocommit=True, connect_timeout=3) as conn:
        row = conn.execute(_PUBLIC_SCHEMA).fetchone()
    assert row is not None
    owner, grants = row
    yield _PgDatabase(name, owner, grants)
    with admin_connection() as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def pg_url(pg_database):
    """A fresh, empty PostgreSQL database (URL with a password): this process's database, the
    connections an earlier test left ended and its schema made anew."""
    with admin_connection() as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (pg_database.name,),
        )
    url = _pg_url(pg_database.name)
    with psycopg.connect(url, autocommit=True, connect_timeout=3) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        owner = sql.Identifier(pg_database.owner)
        conn.execute(sql.SQL("CREATE SCHEMA public AUTHORIZATION {}").format(owner))
        for grant in pg_database.grants:  # as the new database had them
            conn.execute(f"GRANT {grant}")
    return url


def _pg_url(name: str) -> str:
    return f"postgresql://postgres:{SECRET}@127.0.0.1:5432/{name}"


@dataclass(frozen=True)
class _PgDatabase:
    name: str
    owner: str  # of its public schema, and the schema's grants, as CREATE DATABASE made them
    grants: list[str]


# "USAGE ON SCHEMA public TO PUBLIC" and the like, from the schema's access list
_PUBLIC_SCHEMA = """
SELECT pg_get_userbyid(nspowner), array(
    SELECT a.privilege_type || ' ON SCHEMA public TO '
        || CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END
    FROM aclexplode(nspacl) AS a)
FROM pg_namespace WHERE nspname = 'public'
"""


@pytest.fixture(scope="session")
def writes(tmp_path_factory) -> Path:
    """The example workload, built; skips when perf ALONE does not count it right here (no
    hardware breakpoints, or a VM that loses their hits): an exact-count test of autoprof
    cannot hold where perf itself is wrong, and is never loosened instead."""
    if shutil.which("perf") is None or shutil.which("cc") is None:
        pytest.skip("needs perf and cc")
    binary = build_writes(tmp_path_factory.mktemp("bin"))
    why = breakpoint_miscount(binary)
    if why:
        pytest.skip(why)
    return binary


NO_PERF = pytest.mark.skip(reason="needs perf (make test-deps installs it)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses `writes` profiles it with perf: slow, whatever file it is in. A test
    marked `needs_perf` skips where perf is not installed."""
    perf = shutil.which("perf") is not None
    for item in items:
        if "writes" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
        if not perf and item.get_closest_marker("needs_perf"):
            item.add_marker(NO_PERF)


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    """A SQLite store in a folder of its own (made: a --store in a missing folder is refused)."""
    (tmp_path / "store").mkdir(exist_ok=True)
    return f"sqlite:///{tmp_path / 'store' / 'results.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request) -> str:
    """Each test of a store runs on SQLite and on PostgreSQL (skipped without a server)."""
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


def count(url: str, table: str) -> int:
    """The rows of `table` in the store at `url`."""
    from autoprof.store import engine

    store = engine.connect(url)
    with store.read() as conn:
        value = conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one()
    store.engine.dispose()
    return value


@pytest.fixture
def cli_run() -> Callable[..., CliResult]:
    """`cli_run("schedule", "--cpu", "SKX")` -> CliResult (returncode, stdout, stderr)."""
    return invoke


def still_running(pid: int) -> bool:
    """The process runs on and nothing has told it to stop: it is no zombie and no SIGKILL,
    SIGTERM, SIGINT or SIGHUP waits for it. What a test checks at once after a kill that
    must not reach this process, where a fixed sleep would only hope the kill had shown."""
    try:
        status = dict(
            line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
    except (OSError, ValueError):
        return False
    fatal = sum(
        1 << (s - 1) for s in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    )
    pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
    return status["State"][0] not in "ZX" and not pending & fatal


REDIS = os.environ.get("AUTOPROF_TEST_REDIS", "redis://127.0.0.1:6379")


@pytest.fixture(scope="module")
def redis_url():
    """An empty Redis database index of our own, flushed afterwards; a skip without Redis."""
    try:
        claimed = claim(REDIS)
    except (redis.RedisError, ValueError) as err:
        pytest.skip(f"Redis not reachable at {REDIS}: {err}")
    if claimed is None:
        pytest.skip(f"no empty Redis database index at {REDIS}")
    url, client = claimed
    yield url
    client.flushdb()


@pytest.fixture(scope="session")
def hotspots_recording(tmp_path_factory) -> Path:
    """A live `autoprof record -F 999 -e cpu-clock -e page-faults` of hotspots (heavy 3 :
    medium 2 : touch 1, and touch maps fresh pages), shared by the report, callgraph and store
    tests."""
    for tool in ("perf", "cc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found")
    tmp = tmp_path_factory.mktemp("hotspots")
    binary = build_hotspots(tmp)
    out = tmp / "rec"
    events = ["-e", "cpu-clock", "-e", "page-faults"]
    result = invoke("record", "-F", "999", *events, "-o", out, "--", binary, "30")
    if result.returncode != 0:
        pytest.skip(f"perf record failed here: {result.output.strip()[-300:]}")
    return out


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """A page of Debian's Chromium (Playwright; never a downloaded browser), 1020 pixels wide:
    a 1000-pixel flame graph and its margins. Skips without Playwright or Chromium."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not Path(CHROMIUM).is_file():
        pytest.skip("Debian's chromium is not installed (make system-deps installs it)")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            args=FLAGS,
            headless=True,
            viewport={"width": 1020, "height": 700},
        )
        try:
            yield context.new_page()
        finally:
            context.close()
