"""Engines for the store: URL defaults, drivers, and SQLite configured for safe concurrency.

SQLite gets WAL (readers never block the writer), a busy timeout (writers wait instead of
failing), foreign keys, `synchronous=NORMAL` (in WAL mode a committed transaction survives a
crash of the process; a power loss may lose the last few), checkpoints every 8,000 WAL pages
instead of 1,000 (`WAL_CHECKPOINT_PAGES`), and `BEGIN IMMEDIATE` for writing transactions so that
two writers never deadlock on a lock upgrade.

PostgreSQL connections plan every statement for the parameters and table sizes of the moment
(`plan_cache_mode = force_custom_plan`): a generic plan cached while the tables were small, by the
driver's prepared statements or by the foreign key checks, would keep scanning as they grow.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy import create_engine as sa_create_engine
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError

from memstore._package import install_hint
from memstore.errors import StoreError
from memstore.store import DEFAULT_URL

__all__ = [
    "DEFAULT_URL",
    "WRITE",
    "configure_postgresql",
    "configure_sqlite",
    "create_store_engine",
    "driver_installed",
    "parse_url",
]

BUSY_TIMEOUT_SECONDS = 60.0
WAL_CHECKPOINT_PAGES = 8000
"""Pages of WAL (32 MB) after which a commit copies them into the database (SQLite: 1,000).
An append writes about 20 pages; at SQLite's default one append in 50 paid for a checkpoint,
which made the slowest 2% of appends ten times the typical one. At 8,000 it is one in 400, and a
page written by many appends between two checkpoints is copied once. The WAL file is removed
when the last connection closes."""
WRITE = "memstore_write"
"""Execution option that makes a SQLite transaction take the write lock when it begins."""

SYNC_DRIVERS = {"sqlite": "sqlite+pysqlite", "postgresql": "postgresql+psycopg"}
ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+psycopg"}


def parse_url(url: str | URL, drivers: dict[str, str]) -> URL:
    """Parse a database URL, refusing unsupported backends and filling in memstore's driver."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"not a database URL: {str(url)!r} ({exc})") from exc
    if parsed.get_backend_name() not in drivers:
        raise StoreError(
            f"unsupported database {parsed.get_backend_name()!r} in {parsed.render_as_string()!r}: "
            "memstore supports sqlite:/// and postgresql:// URLs"
        )
    if "+" not in parsed.drivername:
        parsed = parsed.set(drivername=drivers[parsed.drivername])
    return parsed


def configure_sqlite(engine: Engine) -> None:
    """Set every new connection's pragmas and make writing transactions BEGIN IMMEDIATE."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves, below
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        begin = "BEGIN IMMEDIATE" if connection.get_execution_options().get(WRITE) else "BEGIN"
        if connection.dialect.is_async:  # aiosqlite's connection is awaited, through SQLAlchemy
            connection.exec_driver_sql(begin)
            return
        # On the driver's connection: SQLAlchemy's statement path (events, logging, a result
        # object) cost more than SQLite's BEGIN itself, once per transaction.
        driver: Any = connection.connection.driver_connection
        driver.execute(begin)


def configure_postgresql(engine: Engine) -> None:
    """Make every new connection plan each statement afresh (see the module docstring)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("SET plan_cache_mode = force_custom_plan")
        cursor.close()
        dbapi_connection.commit()  # a rollback would undo the SET


def refuse_memory_sqlite(url: URL) -> None:
    """Each connection to `sqlite://` would see its own empty database: refuse it."""
    if url.database in (None, "", ":memory:"):
        raise StoreError("an in-memory SQLite database cannot be shared; use a file path")


@contextmanager
def driver_installed(url: URL) -> Iterator[None]:
    """Turn a missing database driver into a StoreError that says which packages to install."""
    try:
        yield
    except ImportError as exc:
        extra = "postgres" if url.get_backend_name() == "postgresql" else "async"
        raise StoreError(
            f"{url.drivername} needs the {extra!r} extra: {install_hint(extra)} ({exc})"
        ) from exc


def create_store_engine(url: str | URL = DEFAULT_URL, **kwargs: Any) -> Engine:
    """A sync engine for the store; `sqlite://` and `postgresql://` pick memstore's drivers."""
    parsed = parse_url(url, SYNC_DRIVERS)
    if parsed.get_backend_name() == "sqlite":
        kwargs.setdefault("connect_args", {}).setdefault("timeout", BUSY_TIMEOUT_SECONDS)
        refuse_memory_sqlite(parsed)
    with driver_installed(parsed):
        engine = sa_create_engine(parsed, **kwargs)
    if parsed.get_backend_name() == "sqlite":
        configure_sqlite(engine)
    else:
        configure_postgresql(engine)
    return engine
