"""Running a user's SQL without letting it change anything (`memstore sql`).

SQLite: a separate connection opened read-only (`mode=ro`) with an authorizer that allows only
reading (no ATTACH, no writes, and of the PRAGMAs only those that describe the schema, such as
`table_info`); the driver refuses more than one statement.
PostgreSQL: a READ ONLY transaction that has already taken its snapshot (so it cannot be made
READ WRITE), a prepared statement (so only one statement), a check that the statement took no
transaction id (which every write takes), and a rollback whatever happens. A
superuser's query runs as the predefined role `pg_read_all_data`: a read-only transaction still
lets a superuser write files on the server (`COPY ... TO '/path'`, `lo_export`).
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Engine

from memstore.errors import QueryError
from memstore.store.engine import sqlite_read_uri
from memstore.store.rows import derived_text

__all__ = ["QueryResult", "run_read_only"]

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


def _fetch(cursor: Any, limit: int) -> QueryResult:
    if cursor.description is None:
        raise QueryError("memstore sql runs one query that returns rows (SELECT, WITH, VALUES)")
    columns = [str(description[0]) for description in cursor.description]
    rows = [tuple(row) for row in cursor.fetchmany(limit + 1)]
    return QueryResult(columns, rows[:limit], len(rows) > limit)


def _sqlite(url: URL, sql: str, limit: int) -> QueryResult:
    uri = sqlite_read_uri(url, strict=True)  # in a read-only directory too
    connection = sqlite3.connect(uri, uri=True)
    # The views derive text from turns' JSON (migration 0016), where a lone surrogate may be
    # escaped: SQLite gives it as bytes that are not UTF-8, read as U+FFFD.
    connection.text_factory = derived_text
    try:
        connection.set_authorizer(_only_reading)
        return _fetch(connection.execute(sql), limit)
    except (sqlite3.Error, sqlite3.Warning) as exc:
        raise QueryError(_explain(str(exc))) from exc
    finally:
        connection.close()


def _postgres(engine: Engine, sql: str, limit: int) -> QueryResult:
    import psycopg

    with engine.connect() as connection:
        driver: Any = connection.connection.driver_connection
        try:
            with driver.cursor() as cursor:
                cursor.execute("SET TRANSACTION READ ONLY")
                # This first query takes the snapshot: READ WRITE is refused from now on.
                cursor.execute(_SUPERUSER_CHECK)
                superuser, reader_role = cursor.fetchone()
                if superuser:
                    if not reader_role:
                        raise QueryError(_NO_READER_ROLE)
                    cursor.execute("SET LOCAL ROLE pg_read_all_data")
                cursor.execute(sql, prepare=True)  # a prepared statement holds one statement
                result = _fetch(cursor, limit)
                # Any write takes a transaction id; PostgreSQL lets some through a READ ONLY
                # transaction (EXPLAIN ANALYZE CREATE TABLE ... AS). The rollback undoes them.
                cursor.execute("SELECT txid_current_if_assigned() IS NOT NULL")
                if cursor.fetchone()[0]:
                    raise QueryError(_WROTE)
                return result
        except psycopg.Error as exc:
            raise QueryError(_explain(str(exc).strip())) from exc
        finally:
            with contextlib.suppress(psycopg.Error):  # e.g. a COPY left the connection mid-copy
                driver.rollback()
            connection.invalidate()  # never hand this connection back to the pool


_SUPERUSER_CHECK = """
    SELECT current_setting('is_superuser') = 'on',
           EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pg_read_all_data')
"""
_WROTE = (
    "the statement wrote to the database (undone: memstore sql only reads, it cannot change the "
    "database)"
)
_NO_READER_ROLE = (
    "memstore sql does not run queries as a PostgreSQL superuser on a server without the "
    "pg_read_all_data role (PostgreSQL 14 and later have it): connect as an ordinary role"
)


def _explain(message: str) -> str:
    if "not authorized" in message or "read-only" in message:
        return f"{message} (memstore sql only reads; it cannot change the database)"
    return message


def run_read_only(engine: Engine, sql: str, *, limit: int = 1000) -> QueryResult:
    """Run one statement that only reads; anything else is refused with QueryError."""
    if not sql.isascii() and _LONE_SURROGATE.search(sql):
        raise QueryError("the statement holds a lone surrogate, which no database can take")
    if engine.dialect.name == "postgresql":
        return _postgres(engine, sql, limit)
    database = engine.url.database
    if not database or not Path(database).exists():
        raise QueryError(f"no SQLite database at {database!r}")
    return _sqlite(engine.url, sql, limit)
