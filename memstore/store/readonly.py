"""Running a user's SQL without letting it change anything (`memstore sql`).

SQLite: a separate connection opened read-only (`mode=ro`) with an authorizer that allows only
reading (no ATTACH, no writes, and of the PRAGMAs only those that describe the schema, such as
`table_info`); the driver refuses more than one statement.
PostgreSQL: a READ ONLY transaction that has already taken its snapshot (so it cannot be made
READ WRITE), the extended protocol (so only one statement), rows streamed up to the limit and
the rest cancelled, a check that the statement took no
transaction id (which every write takes), and a rollback whatever happens. A role switch made
inside SQL can be undone by the query itself (`set_config('role', ...)`), so the query runs over
a login that holds only the rights it needs: `read_url` (or `$MEMSTORE_READ_URL`) names one,
else the store's own login is used. Either is refused, before the query runs, if it is (or can
become) a superuser or holds rights a read-only transaction does not stop: server files
(`pg_read_server_files`, `pg_write_server_files`, `pg_execute_server_program`), reading or
writing everything (`pg_read_all_data`, `pg_write_all_data`), signalling backends
(`pg_signal_backend`), replication, CREATEROLE or BYPASSRLS.
The transaction names the store's tenant (`row_security`): the row-level security policies let
the query see that tenant's rows only.

No query runs for ever: each has a time limit (`timeout` seconds, default
DEFAULT_QUERY_SECONDS). SQLite: a progress handler stops the statement once the time is up, and
on Ctrl-C (it is where Python gets to see the signal). PostgreSQL: `statement_timeout` stops it
on the server, even if the client is killed; Ctrl-C cancels it on the server (psycopg sends the
cancel request).

No query fills the disk: on SQLite, temporary data (sorts, materialized subqueries, a recursive
query's queue) goes to temporary files (`temp_store = FILE`: in memory it could not be measured
per connection, and SQLite's heap limits are process-wide, which would bind the application
using the store too); the progress handler adds up the temporary files SQLite holds open in this
process (Linux: `/proc/self/fd`) every TEMP_CHECK_SECONDS and stops the statement once they
exceed `max_temp_mb` (default DEFAULT_TEMP_MB) beyond what was open when it started. Elsewhere
only the time limit bounds them. PostgreSQL bounds a query's temporary files itself, by the
reading login's `temp_file_limit` (which only a superuser sets: the docs' recipe does, docs/sql.md).

No SQLite query fills memory: no value it makes may be longer than `max_memory_mb` (SQLite's
per-connection length limit, so one `zeroblob` or `group_concat` cannot pass it), and the
progress handler stops the statement once the process's resident memory has grown by more than
`max_memory_mb` (default DEFAULT_MEMORY_MB) since it started (Linux: `/proc/self/statm`; the
heap limit pragmas would bind every connection of the process, the application's too).
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Engine

from memstore.errors import InvalidArgumentError, QueryError, TimeLimitError
from memstore.store.engine import sqlite_read_uri
from memstore.store.policy import backend_of
from memstore.store.row_security import SETTING, refuse_another_logins_tenant, setting_value
from memstore.store.rows import derived_text
from memstore.store.tables import DEFAULT_TENANT
from memstore.store.tenant_sql import TenantReading, confine_to_tenant
from memstore.store.time_limits import stopped_by_time_limit

__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_QUERY_SECONDS",
    "DEFAULT_TEMP_MB",
    "PRIVILEGED_ROLES",
    "READ_URL_VARIABLE",
    "QueryResult",
    "run_read_only",
]

READ_URL_VARIABLE = "MEMSTORE_READ_URL"
"""The environment variable naming the PostgreSQL login read-only queries run as."""

DEFAULT_QUERY_SECONDS = 5.0
"""How long a read-only query may run unless the caller says otherwise."""
_PROGRESS_STEPS = 1000  # SQLite VM steps between two looks at the clock (microseconds apart)
DEFAULT_TEMP_MB = 500
"""How much temporary disk space (MB) a read-only SQLite query may fill unless the caller says
otherwise."""
DEFAULT_MEMORY_MB = 500
"""How much memory (MB) a read-only SQLite query may take unless the caller says otherwise."""
TEMP_CHECK_SECONDS = 0.02
"""How often a SQLite query's temporary files and memory are measured (a look at each open
file, and at the process's resident size)."""
_FDS = Path("/proc/self/fd")
_STATM = Path("/proc/self/statm")
_TOO_BIG = "string or blob too big"  # SQLite's error past SQLITE_LIMIT_LENGTH
_SQLITE_TEMP_PREFIX = "etilqs_"  # SQLite's names for its temporary files (SQLITE_TEMP_FILE_PREFIX)

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, 33}  # RECURSIVE
SCHEMA_PRAGMAS = frozenset(
    {
        "foreign_key_list",
        "index_info",
        "index_list",
        "index_xinfo",
        "table_info",
        "table_list",
        "table_xinfo",
    }
)
"""PRAGMAs that only describe the schema, whatever their argument (a table or index name)."""


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows of a read-only query (at most `limit` rows; `truncated` if more)."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool


def _only_reading(action: int, name: object, *_: object) -> int:
    if action in _ALLOWED or (action == sqlite3.SQLITE_PRAGMA and name in SCHEMA_PRAGMAS):
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


_NO_ROWS = "memstore sql runs one query that returns rows (SELECT, WITH, VALUES)"


def _fetch(cursor: Any, limit: int) -> QueryResult:
    if cursor.description is None:
        raise QueryError(_NO_ROWS)
    columns = [str(description[0]) for description in cursor.description]
    rows = [tuple(row) for row in cursor.fetchmany(limit + 1)]
    return QueryResult(columns, rows[:limit], len(rows) > limit)


def _stream(cursor: Any, sql: str, limit: int) -> QueryResult:
    """The first `limit` rows of one statement (the extended protocol takes only one), read as
    the server sends them; past them, the statement is cancelled, so memory follows `limit`."""
    rows: list[tuple[Any, ...]] = []
    stream = cursor.stream(sql)
    try:
        for row in stream:
            rows.append(tuple(row))
            if len(rows) > limit:
                break
    finally:
        stream.close()  # psycopg cancels the statement on the server and drains what it sent
    if not rows:  # a stream names no columns without a row: ask the server to describe it
        return QueryResult(_described_columns(cursor.connection, sql), [], False)
    columns = [str(description[0]) for description in cursor.description]
    return QueryResult(columns, rows[:limit], len(rows) > limit)


def _described_columns(driver: Any, sql: str) -> list[str]:
    """The columns of `sql`, learnt by preparing and describing it, which does not run it again
    (a second run would double its time and its side effects)."""
    encoding = driver.info.encoding
    name = b"memstore_query_columns"
    _refuse_failed(driver.pgconn.prepare(name, sql.encode(encoding)))
    description = driver.pgconn.describe_prepared(name)
    _refuse_failed(description)
    if description.nfields == 0:
        raise QueryError(_NO_ROWS)
    columns = [description.fname(index).decode(encoding) for index in range(description.nfields)]
    driver.execute("DEALLOCATE memstore_query_columns")
    return columns


def _refuse_failed(result: Any) -> None:
    """Raise the server's error in a libpq result, as one line."""
    import psycopg

    if result.status == psycopg.pq.ExecStatus.FATAL_ERROR:
        raise QueryError(_explain(result.get_error_message().strip()))


def sqlite_temp_bytes() -> int | None:
    """The disk space of the temporary files SQLite holds open in this process (they are
    unlinked once created, so only their descriptors find them); None where that cannot be
    seen (no `/proc/self/fd`)."""
    try:
        descriptors = os.listdir(_FDS)
    except OSError:
        return None
    total = 0
    for descriptor in descriptors:
        try:
            if os.readlink(_FDS / descriptor).rpartition("/")[2].startswith(_SQLITE_TEMP_PREFIX):
                total += os.stat(_FDS / descriptor).st_blocks * 512
        except OSError:
            continue  # closed meanwhile (listdir's own descriptor, a file just closed)
    return total


def resident_bytes() -> int | None:
    """This process's resident memory; None where that cannot be seen (no `/proc/self/statm`)."""
    try:
        return int(_STATM.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class _Deadline:
    """SQLite's progress handler: stops the statement once `seconds` have passed, once its
    temporary files exceed `max_temp_mb`, once the process has grown by `max_memory_mb`, or on
    Ctrl-C."""

    def __init__(self, seconds: float, max_temp_mb: float, max_memory_mb: float) -> None:
        self.seconds = seconds
        self.ends = time.monotonic() + seconds
        self.expired = False
        self.max_temp_mb = max_temp_mb
        self.temp_before = sqlite_temp_bytes()  # other connections' files are not the query's
        self.max_memory_mb = max_memory_mb
        self.memory_before = resident_bytes()
        self.next_look = 0.0
        self.over_temp = False
        self.over_memory = False

    def __call__(self) -> int:
        now = time.monotonic()
        self.expired = now > self.ends
        if now >= self.next_look:
            self.next_look = now + TEMP_CHECK_SECONDS
            self.over_temp = _grown_past(self.temp_before, sqlite_temp_bytes(), self.max_temp_mb)
            grown = _grown_past(self.memory_before, resident_bytes(), self.max_memory_mb)
            self.over_memory = grown
        return int(self.expired or self.over_temp or self.over_memory)

    def error(self, exc: sqlite3.Error | sqlite3.Warning) -> BaseException:
        """What an error raised while this deadline watched means to the caller."""
        if self.over_temp:
            return QueryError(
                f"the query needed more than {self.max_temp_mb:g} MB of temporary space and was "
                f"stopped ({_allows_more('--max-temp-mb MB', 'max_temp_mb=MB')})"
            )
        if self.over_memory or str(exc) == _TOO_BIG:
            return QueryError(
                f"the query needed more than {self.max_memory_mb:g} MB of memory and was "
                f"stopped ({_allows_more('--max-memory-mb MB', 'max_memory_mb=MB')})"
            )
        if self.expired:
            return TimeLimitError(_too_long(self.seconds))
        if str(exc) == "interrupted":
            # Only the handler stops a statement, and it did not: Ctrl-C's KeyboardInterrupt
            # was raised inside it (where Python runs during the statement), which stops it too.
            return KeyboardInterrupt()
        return QueryError(_explain(str(exc)))


def _grown_past(before: int | None, now: int | None, megabytes: float) -> bool:
    """Whether a measure (bytes) has grown by more than `megabytes` (False if unseen)."""
    return before is not None and (now or 0) - before > megabytes * 1_000_000


def _too_long(seconds: float) -> str:
    return (
        f"the query ran longer than {seconds:g} s and was stopped "
        f"({_allows_more('--timeout SECONDS', 'timeout=SECONDS')})"
    )


def _allows_more(option: str, keyword: str) -> str:
    """How to raise a limit, for either caller: the command line's option, the library's
    keyword (the message reaches both)."""
    return f"a larger limit allows more: memstore sql {option}, or read_only_query(..., {keyword})"


def _sqlite(
    url: URL,
    sql: str,
    limit: int,
    timeout: float,
    limits_mb: tuple[float, float],
    tenant: str | None,
) -> QueryResult:
    max_temp_mb, max_memory_mb = limits_mb
    uri = sqlite_read_uri(url, strict=True)  # in a read-only directory too
    connection = sqlite3.connect(uri if tenant is None else "file::memory:", uri=True)
    # The views derive text from turns' JSON (migration 0016), where a lone surrogate may be
    # escaped: SQLite gives it as bytes that are not UTF-8, read as U+FFFD.
    connection.text_factory = derived_text
    deadline = _Deadline(timeout, max_temp_mb, max_memory_mb)
    scope: TenantReading | None = None
    try:
        # Where the deadline can measure it; first, as setting it drops every TEMP view.
        connection.execute("PRAGMA temp_store = FILE")
        if tenant is not None:
            scope = confine_to_tenant(connection, uri, tenant, _only_reading)
        longest = min(int(max_memory_mb * 1_000_000), 2**31 - 1)  # one value, at most
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(longest, 1))
        connection.set_authorizer(scope or _only_reading)
        connection.set_progress_handler(deadline, _PROGRESS_STEPS)
        return _fetch(connection.execute(sql), limit)
    except (sqlite3.Error, sqlite3.Warning) as exc:
        error = deadline.error(exc)
        raise (scope.explain(error) if scope else error) from exc
    finally:
        connection.close()


def _postgres(engine: Engine, sql: str, limit: int, timeout: float, tenant: str) -> QueryResult:
    import psycopg

    with engine.connect() as connection:
        driver: Any = connection.connection.driver_connection
        started = time.monotonic()
        try:
            with driver.cursor() as cursor:
                cursor.execute("SET TRANSACTION READ ONLY")
                milliseconds = max(1, round(timeout * 1000))
                cursor.execute(f"SET LOCAL statement_timeout = {milliseconds}")
                cursor.execute(_SET_TENANT, (setting_value(tenant),))  # the policies' (0031)
                # This first query takes the snapshot: READ WRITE is refused from now on.
                cursor.execute(_ROLES_OF_THE_LOGIN)
                _refuse_privileged(cursor.fetchall())
                cursor.execute("SAVEPOINT memstore_query")
                result = _stream(cursor, sql, limit)
                if result.truncated:  # the rest was cancelled, which may have failed the statement
                    cursor.execute("ROLLBACK TO SAVEPOINT memstore_query")
                # Any write takes a transaction id; PostgreSQL lets some through a READ ONLY
                # transaction (EXPLAIN ANALYZE CREATE TABLE ... AS). The rollback undoes them.
                cursor.execute("SELECT txid_current_if_assigned() IS NOT NULL")
                if cursor.fetchone()[0]:
                    raise QueryError(_WROTE)
                return result
        except psycopg.errors.QueryCanceled as exc:
            if stopped_by_time_limit(exc, time.monotonic() - started, timeout):
                raise TimeLimitError(_too_long(timeout)) from exc
            raise QueryError(_explain(str(exc).strip())) from exc
        except psycopg.errors.ConfigurationLimitExceeded as exc:
            if "temp_file_limit" not in str(exc):
                raise QueryError(_explain(str(exc).strip())) from exc
            raise QueryError(_too_much_temp_space_on_the_server(driver)) from exc
        except psycopg.Error as exc:
            raise QueryError(_explain(str(exc).strip())) from exc
        finally:
            with contextlib.suppress(psycopg.Error):  # e.g. a COPY left the connection mid-copy
                driver.rollback()
            connection.invalidate()  # never hand this connection back to the pool


_SET_TENANT = f"SELECT set_config('{SETTING}', %s, true)"
_ROLES_OF_THE_LOGIN = """
    SELECT session_user, rolname, rolsuper, rolreplication, rolcreaterole, rolbypassrls
    FROM pg_roles WHERE pg_has_role(session_user, oid, 'MEMBER')
    ORDER BY rolname = session_user DESC, rolname
"""
PRIVILEGED_ROLES = frozenset(
    {
        "pg_execute_server_program",
        "pg_read_all_data",
        "pg_read_server_files",
        "pg_signal_backend",
        "pg_write_all_data",
        "pg_write_server_files",
    }
)
"""Predefined PostgreSQL roles whose rights a read-only transaction does not stop."""
_ATTRIBUTES = ("superuser", "replication", "createrole", "bypassrls")


def _refuse_privileged(rows: list[tuple[Any, ...]]) -> None:
    """Refuse a login that is, or is a member of, a role with more rights than reading needs."""
    reasons: list[str] = []
    for _, role, *attributes in rows:
        reasons += [
            f"{role} has {name}" for name, on in zip(_ATTRIBUTES, attributes, strict=True) if on
        ]
        if role in PRIVILEGED_ROLES:
            reasons.append(f"member of {role}")
    if reasons:
        login = rows[0][0]
        shown = ", ".join(reasons[:3]) + (", ..." if len(reasons) > 3 else "")
        raise QueryError(
            f"memstore sql does not run as PostgreSQL login {login!r} ({shown}): pass "
            "--read-url (or set MEMSTORE_READ_URL) naming a login that can only read memstore's "
            "tables (docs/sql.md: 'A login for memstore sql')"
        )


_WROTE = (
    "the statement wrote to the database (undone: memstore sql only reads, it cannot change the "
    "database)"
)


def _too_much_temp_space_on_the_server(driver: Any) -> str:
    """The one line for a query the server stopped at the login's `temp_file_limit`."""
    driver.rollback()
    limit = driver.execute("SHOW temp_file_limit").fetchone()[0]
    return (
        f"the query needed more than {limit} of temporary space, the most this login may write "
        "(its temp_file_limit), and was stopped"
    )


def _explain(message: str) -> str:
    if "not authorized" in message or "read-only" in message:
        return f"{message} (memstore sql only reads; it cannot change the database)"
    return message


def run_read_only(
    engine: Engine,
    sql: str,
    *,
    limit: int = 1000,
    timeout: float = DEFAULT_QUERY_SECONDS,
    read_url: str | None = None,
    max_temp_mb: float = DEFAULT_TEMP_MB,
    max_memory_mb: float = DEFAULT_MEMORY_MB,
    tenant: str = DEFAULT_TENANT,
) -> QueryResult:
    """Run one statement that only reads, for at most `timeout` seconds and (SQLite) at most
    `max_temp_mb` MB of temporary files and `max_memory_mb` MB of memory; anything else is
    refused with QueryError (Ctrl-C stops it and raises KeyboardInterrupt). On PostgreSQL it
    runs over `read_url` (default `$MEMSTORE_READ_URL`, else `engine`'s own login), where the
    row-level security policies let it see `tenant`'s rows only; on SQLite a named tenant's
    statement sees its rows only (`memstore.store.tenant_sql`), the default tenant's every row."""
    _require_positive(timeout, "a query time limit is seconds > 0")
    _require_positive(max_temp_mb, "a temporary space limit is MB > 0")
    _require_positive(max_memory_mb, "a memory limit is MB > 0")
    if not sql.isascii() and _LONE_SURROGATE.search(sql):
        raise QueryError("the statement holds a lone surrogate, which no database can take")
    if not backend_of(engine.dialect.name).one_file:
        read_url = read_url or os.environ.get(READ_URL_VARIABLE) or None
        if read_url is None:
            return _postgres(engine, sql, limit, timeout, tenant)
        from sqlalchemy.pool import NullPool

        from memstore.store.engine import SCHEMA, create_store_engine

        schema = engine.get_execution_options().get(SCHEMA)  # the reader sees memstore's schema
        reader = create_store_engine(read_url, schema=schema, poolclass=NullPool)
        try:  # a reading login bound to another tenant would show its rows as `tenant`'s
            refuse_another_logins_tenant(reader, tenant, "read over a login of its own")
            return _postgres(reader, sql, limit, timeout, tenant)
        finally:
            reader.dispose()
    database = engine.url.database
    if not database or not Path(database).exists():
        raise QueryError(f"no SQLite database at {database!r}")
    return _sqlite(engine.url, sql, limit, timeout, (max_temp_mb, max_memory_mb), tenant or None)


def _require_positive(value: object, what: str) -> None:
    """Refuse a limit that is not a number greater than 0 (`what` names it and its unit)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidArgumentError(f"{what}, not {value!r}")
