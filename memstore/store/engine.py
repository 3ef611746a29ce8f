"""Engines for the store: URL defaults, drivers, and SQLite configured for safe concurrency.

SQLite gets WAL (readers never block the writer), a busy timeout (writers wait instead of
failing), foreign keys, `synchronous=NORMAL` (in WAL mode a committed transaction survives a
crash of the process; a power loss may lose the last few), checkpoints every 8,000 WAL pages
instead of 1,000 (`WAL_CHECKPOINT_PAGES`), and `BEGIN IMMEDIATE` for writing transactions so that
two writers never deadlock on a lock upgrade.

PostgreSQL connections plan every statement for the parameters and table sizes of the moment
(`plan_cache_mode = force_custom_plan`): a generic plan cached while the tables were small, by the
driver's prepared statements or by the foreign key checks, would keep scanning as they grow. With
a `schema`, every connection's `search_path` is that schema alone, so that every memstore object
(its version table included) is made and found there.

A read-only engine never creates the SQLite file and cannot write: SQLite connections are opened
`mode=rw` with `query_only` where the file and its directory are writable (so SQLite still tidies
its `-wal`/`-shm` files away on close), `mode=ro` elsewhere (`immutable` when a WAL database's
`-shm` file is absent and cannot be created, as in a read-only directory); PostgreSQL connections
default to read-only transactions.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, event
from sqlalchemy import create_engine as sa_create_engine
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError

from memstore._package import install_hint
from memstore.errors import InvalidArgumentError, StoreError, StoreNotReadyError
from memstore.store import DEFAULT_URL, writer_turns
from memstore.store.policy import Backend, backend_of

__all__ = [
    "DEFAULT_URL",
    "SCHEMA",
    "WRITE",
    "check_schema",
    "configure_postgresql",
    "configure_sqlite",
    "configure_store_engine",
    "create_store_engine",
    "dispose",
    "driver_installed",
    "parse_url",
    "shown_url",
    "sqlite_read_uri",
    "store_engine",
    "store_url",
    "upgrade_command",
]

BUSY_TIMEOUT_SECONDS = 60.0
WAL_CHECKPOINT_PAGES = 8000
"""Pages of WAL (32 MB) after which a commit copies them into the database (SQLite: 1,000).
An append writes about 20 pages; at SQLite's default one append in 50 paid for a checkpoint,
which made the slowest 2% of appends ten times the typical one. At 8,000 it is one in 400, and a
page written by many appends between two checkpoints is copied once. The WAL file is removed
when the last connection closes."""
LOCK_GAP_SECONDS = 0.11
"""How long a writer that commits part-way (a chunked import) leaves SQLite's write lock free
before it takes it again: longer than the 100 ms between a waiting writer's retries (SQLite's
busy handler), so that each one waiting gets its turn, rather than one in a few commits."""
CONNECT_TIMEOUT_SECONDS = 10
"""How long connecting to PostgreSQL may take (a server that does not answer) unless the URL
says otherwise (`?connect_timeout=N`)."""
LOCK_TIMEOUT_SECONDS = 60.0
"""How long a PostgreSQL statement waits for a lock (behind a long query, say) before failing,
as SQLite's writers wait BUSY_TIMEOUT_SECONDS. Migrations wait as long as they need."""
WRITE = "memstore_write"
"""Execution option that makes a SQLite transaction take the write lock when it begins."""
SCHEMA = "memstore_schema"
"""Engine execution option naming the PostgreSQL schema memstore lives in (absent: the
connection's current schema). Migrations read it from the connection they are given."""

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


def shown_url(url: URL) -> str:
    """A URL as a user gave it: memstore's driver name left out, the password hidden."""
    return url.set(drivername=url.get_backend_name()).render_as_string(hide_password=True)


def upgrade_command(url: URL, schema: str | None = None) -> str:
    """The command that creates or upgrades memstore's schema in this database, to quote."""
    words = ["memstore", "--db", shown_url(url)]
    if schema is not None:
        words += ["--schema", schema]
    return f"`{shlex.join([*words, 'db', 'upgrade'])}`"


def url_backend(url: URL) -> Backend:
    """The backend a (parsed) URL names."""
    return backend_of(url.get_backend_name())


def check_schema(url: URL, schema: str | None) -> None:
    """Refuse a schema SQLite cannot have, or a name PostgreSQL cannot take."""
    if schema is None:
        return
    if not url_backend(url).schemas:
        raise InvalidArgumentError(
            f"SQLite has no schemas, but schema {schema!r} was given for {shown_url(url)}: a "
            "schema (--schema, MEMSTORE_SCHEMA) is for PostgreSQL; leave it out for SQLite"
        )
    if not schema or "\x00" in schema or len(schema.encode()) > 63:
        raise InvalidArgumentError(
            f"{schema!r} is not a PostgreSQL schema name (1 to 63 bytes, no NUL)"
        )


def _in_wal_mode(path: Path) -> bool:
    """Whether a SQLite file's header says WAL (its read and write versions are 2)."""
    with path.open("rb") as file:
        header = file.read(20)
    return len(header) == 20 and header[18] == 2 and header[19] == 2


def sqlite_read_uri(url: URL, *, strict: bool = False) -> str:
    """The URI that opens a SQLite file for reading without creating it (see the module
    docstring; `strict`: `mode=ro` even where the file could be written); a missing file is a
    StoreNotReadyError saying how to create it."""
    path = Path(url.database or "").resolve()
    if not path.is_file():
        raise StoreNotReadyError(
            f"there is no memstore database at {path}: create it with {upgrade_command(url)} "
            "(or by importing sessions into it)"
        )
    uri = f"file:{quote(str(path))}"
    if not strict and os.access(path, os.W_OK) and os.access(path.parent, os.W_OK):
        return f"{uri}?mode=rw"
    journal = [Path(f"{path}-shm"), Path(f"{path}-wal")]
    shm_impossible = not any(file.exists() for file in journal) and not os.access(
        path.parent, os.W_OK
    )
    if shm_impossible and _in_wal_mode(path):
        return f"{uri}?mode=ro&immutable=1"  # no writer is there: it could not make them either
    return f"{uri}?mode=ro"


WAL_RETRY_SECONDS = 0.01


def _switch_to_wal(cursor: Any) -> None:
    """Put the database in WAL mode (it stays so), waiting for the lock that takes as any
    statement waits: SQLite does not call its busy handler for it, so connections racing to
    open a fresh file got "database is locked" at once (7 of 480 in a test of 8 processes)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
            time.sleep(WAL_RETRY_SECONDS)


def configure_sqlite(engine: Engine, *, read_only: bool = False) -> None:
    """Set every new connection's pragmas and make writing transactions BEGIN IMMEDIATE."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves, below
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        if read_only:
            cursor.execute("PRAGMA query_only = ON")
        else:
            _switch_to_wal(cursor)
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
        cursor.close()

    writers = None if read_only else writer_turns.lock_path(engine.url.database)

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        write = connection.get_execution_options().get(WRITE)
        begin = "BEGIN IMMEDIATE" if write else "BEGIN"
        if connection.dialect.is_async:  # aiosqlite's connection is awaited, through SQLAlchemy
            connection.exec_driver_sql(begin)
            return
        if write:  # writers take turns (see writer_turns)
            writer_turns.take(connection.connection.info, writers, BUSY_TIMEOUT_SECONDS)
        # On the driver's connection: SQLAlchemy's statement path (events, logging, a result
        # object) cost more than SQLite's BEGIN itself, once per transaction.
        driver: Any = connection.connection.driver_connection
        driver.execute(begin)

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        writer_turns.release(record.info)

    @event.listens_for(engine, "close")
    def _on_close(_dbapi_connection: Any, record: Any) -> None:
        writer_turns.forget(record.info)


def configure_postgresql(
    engine: Engine, *, schema: str | None = None, read_only: bool = False
) -> None:
    """Make every new connection plan each statement afresh, look in memstore's schema only
    (given one) and, read-only, refuse writes (see the module docstring)."""
    settings = ["SET plan_cache_mode = force_custom_plan"]
    if schema is not None:
        quoted = engine.dialect.identifier_preparer.quote_identifier(schema)
        settings.append(f"SET search_path TO {quoted}")
    if read_only:
        settings.append("SET default_transaction_read_only = on")

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        for setting in settings:
            cursor.execute(setting)
        cursor.close()
        dbapi_connection.commit()  # a rollback would undo the SETs


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
    if not url_backend(url).one_file and "connect_timeout" not in url.query:
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
        extra = url_backend(url).driver_extra
        raise StoreError(
            f"{url.drivername} needs the {extra!r} extra: {install_hint(extra)} ({exc})"
        ) from exc


def _sqlite_reader(parsed: URL) -> Any:
    """A `creator` that opens the file for reading only (see `sqlite_read_uri`)."""
    uri = sqlite_read_uri(parsed)

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_SECONDS, check_same_thread=False)

    return connect


def create_store_engine(
    url: str | URL = DEFAULT_URL,
    *,
    schema: str | None = None,
    read_only: bool = False,
    **kwargs: Any,
) -> Engine:
    """A sync engine for the store; `sqlite://` and `postgresql://` pick memstore's drivers.

    Args:
        url: the database.
        schema: PostgreSQL only: the schema memstore's objects live in (default: the
            connection's current schema, usually `public`).
        read_only: never create the SQLite file, and refuse writes on every connection.
        kwargs: passed on to SQLAlchemy's `create_engine`.
    """
    parsed = store_url(url, SYNC_DRIVERS, schema, read_only, kwargs, ("creator", _sqlite_reader))
    with driver_installed(parsed):
        engine = sa_create_engine(parsed, **kwargs)
    configure_store_engine(engine, schema=schema, read_only=read_only)
    return engine


def store_url(
    url: str | URL,
    drivers: dict[str, str],
    schema: str | None,
    read_only: bool,
    kwargs: dict[str, Any],
    reader: tuple[str, Callable[[URL], Any]],
) -> URL:
    """The URL a store's engine (sync or async: `drivers`) is made for, checked, with the
    engine's `kwargs` given memstore's connect options; a read-only SQLite engine connects
    through `reader` (its keyword, and a function of the URL that makes it)."""
    parsed = parse_url(url, drivers)
    check_schema(parsed, schema)
    if url_backend(parsed).one_file:
        refuse_memory_sqlite(parsed)
        kwargs.setdefault("connect_args", {}).setdefault("timeout", BUSY_TIMEOUT_SECONDS)
        if read_only:
            kwargs.setdefault(reader[0], reader[1](parsed))
    postgresql_connect_timeout(parsed, kwargs)
    return parsed


def configure_store_engine(engine: Engine, *, schema: str | None, read_only: bool) -> None:
    """Configure a store's (sync) engine for its backend (see the module docstring)."""
    if backend_of(engine.dialect.name).one_file:
        configure_sqlite(engine, read_only=read_only)
    else:
        configure_postgresql(engine, schema=schema, read_only=read_only)
        configure_postgresql_lock_timeout(engine)
        engine.update_execution_options(**{SCHEMA: schema})


def store_engine(
    url: str | URL | Engine, *, schema: str | None = None, read_only: bool = False
) -> Engine:
    """The engine a SessionStore runs on: made for `url`, or the one given, which must have
    been made for the same schema (`create_store_engine(url, schema=...)`)."""
    if not isinstance(url, Engine):
        return create_store_engine(url, schema=schema, read_only=read_only)
    given = url.get_execution_options().get(SCHEMA)
    if schema is not None and schema != given:
        raise InvalidArgumentError(
            f"the engine given was not made for schema {schema!r}: make it with "
            "create_store_engine(url, schema=...) and leave schema out here"
        )
    return url


def dispose(engine: Engine) -> None:
    """Close `engine`'s idle connections and start it a new pool, and close each connection
    still in use (a call finishing in another thread) when it comes back: SQLAlchemy would put
    it back into the discarded pool, and the driver would find it open when it is collected."""
    discarded = engine.pool
    engine.dispose()  # the new pool copies the old one's listeners: listen to the old one after
    event.listen(discarded, "checkin", _close_returned)
    discarded.dispose()  # one that came back meanwhile


def _close_returned(dbapi_connection: Any, _record: Any) -> None:
    if dbapi_connection is not None:
        dbapi_connection.close()
