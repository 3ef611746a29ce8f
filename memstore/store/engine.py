"""Engines for the store: URL defaults, drivers, and SQLite configured for safe concurrency.

SQLite gets WAL (readers never block the writer), a busy timeout (writers wait instead of
failing), foreign keys, `synchronous=NORMAL` (in WAL mode a committed transaction survives a
crash of the process; a power loss may lose the last few), and `BEGIN IMMEDIATE` for writing
transactions so that two writers never deadlock on a lock upgrade.

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
CONNECT_TIMEOUT_SECONDS = 10
LOCK_TIMEOUT_SECONDS = 60.0
"""How long a PostgreSQL statement waits for a lock (behind a long query, say) before failing,
as SQLite's writers wait BUSY_TIMEOUT_SECONDS. Migrations wait as long as they need."""
"""How long connecting to PostgreSQL may take (a server that does not answer) unless the URL
says otherwise (`?connect_timeout=N`)."""
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
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        writing = connection.get_execution_options().get(WRITE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writing else "BEGIN")


def configure_postgresql(engine: Engine) -> None:
    """Make every new connection plan each statement afresh (see the module docstring)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("SET plan_cache_mode = force_custom_plan")
        cursor.close()
        dbapi_connection.commit()  # a rollback would undo the SET


def configure_postgresql_lock_timeout(engine: Engine) -> None:
    """Make a statement that waits LOCK_TIMEOUT_SECONDS for a lock fail instead of hanging."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f"SET lock_timeout = {max(1, round(LOCK_TIMEOUT_SECONDS * 1000))}")
        cursor.close()
        dbapi_connection.commit()  # a rollback would undo the SET


def postgresql_connect_timeout(url: URL, kwargs: dict[str, Any]) -> None:
    """Give PostgreSQL connections a connect timeout, so an unanswering server is an error."""
    if url.get_backend_name() == "postgresql" and "connect_timeout" not in url.query:
        connect_args = kwargs.setdefault("connect_args", {})
        connect_args.setdefault("connect_timeout", CONNECT_TIMEOUT_SECONDS)


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
    postgresql_connect_timeout(parsed, kwargs)
    with driver_installed(parsed):
        engine = sa_create_engine(parsed, **kwargs)
    if parsed.get_backend_name() == "sqlite":
        configure_sqlite(engine)
    else:
        configure_postgresql(engine)
        configure_postgresql_lock_timeout(engine)
    return engine
