"""One tenant's rows, and nothing else, to a user's SQL on SQLite (`memstore sql --tenant`).

SQLite has no row-level security, so a tenant's read-only connection is built so that its SQL
can name nothing but that tenant's rows:

- The connection's own database (`main`) is an empty one in memory. The memstore file is
  attached under a name made up anew for each query (`memstore_` and 32 random hex digits):
  a query can name an object there only by that name, which it cannot know when it is written
  (a statement's names are fixed before it runs, and one query is all a connection runs).
- For every table with a tenant column, a TEMP view of the same name gives the tenant's rows
  (`SELECT * FROM <attached>.nodes WHERE tenant = 'acme'`); memstore's views (`turns`,
  `blocks`, ...) are made again as TEMP views from their own SQL, whose table names then find
  those filtered views (TEMP is searched first).
- The authorizer lets a query read a table of the attached file only from inside the view of
  the same name (SQLite names the innermost view that reads, case aside), and nothing else
  there: an unqualified name that no view shadows (`nodes_fts`, `sqlite_stat1`,
  `nodes_fts_backlog`) reaches the file and is refused. It refuses the TEMP schema's own table
  (the views' SQL names the attached file), `PRAGMA table_list` (it lists the schemas) and,
  as for every `memstore sql`, anything but reading (ATTACH, writes, other PRAGMAs).

docs/tenants.md says what this promises and what it does not (the full-text index is not
there; row numbers count every tenant's rows; time and the file's size are shared).
"""

from __future__ import annotations

import re
import secrets
import sqlite3
from collections.abc import Callable

from memstore.errors import QueryError
from memstore.store.tables import metadata
from memstore.store.tenancy import valid_tenant

__all__ = ["TENANT_TABLES", "TenantReading", "confine_to_tenant"]

TENANT_TABLES = frozenset(table.name for table in metadata.sorted_tables if "tenant" in table.c)
"""The tables a tenant's query reads, each through a view of its rows."""

_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema", "sqlite_temp_master"})
_LISTS_SCHEMAS = frozenset({"table_list", "database_list"})
_TABLE_FUNCTIONS = frozenset({"json_each", "json_tree"})  # they read only their arguments
_CREATE_VIEW = re.compile(r"\s*CREATE\s+VIEW\s+(IF\s+NOT\s+EXISTS\s+)?", re.IGNORECASE)

Authorizer = Callable[[int, str | None, str | None, str | None, str | None], int]


def confine_to_tenant(
    connection: sqlite3.Connection, uri: str, tenant: str, only_reading: Authorizer
) -> TenantReading:
    """Give `connection` (on an empty database in memory) `tenant`'s rows of the database at
    `uri` through views named like its tables, and return the authorizer to set on it once it
    is ready: `only_reading` (what every read-only query may do), and within reading, only the
    views.

    Raises:
        InvalidArgumentError: `tenant` is not a tenant's name.
    """
    literal = "'" + valid_tenant(tenant).replace("'", "''") + "'"  # a name holds no quote
    hidden = f"memstore_{secrets.token_hex(16)}"
    connection.execute(f'ATTACH DATABASE ? AS "{hidden}"', (uri,))
    present = {
        name
        for (name,) in connection.execute(
            f'SELECT name FROM "{hidden}".sqlite_master WHERE type = ?', ("table",)
        )
    }
    for table in sorted(TENANT_TABLES & present):
        connection.execute(
            f'CREATE TEMP VIEW "{table}" AS SELECT * FROM "{hidden}"."{table}" '
            f"WHERE tenant = {literal}"
        )
    views = connection.execute(
        f'SELECT sql FROM "{hidden}".sqlite_master WHERE type = ? ORDER BY rowid', ("view",)
    ).fetchall()
    for (sql,) in views:  # in the order they were made: each after those it reads
        connection.execute(_CREATE_VIEW.sub("CREATE TEMP VIEW ", sql, count=1))
    return TenantReading(hidden, only_reading)


class TenantReading:
    """The authorizer of a tenant's query (see the module), and what its refusals mean."""

    def __init__(self, hidden: str, only_reading: Authorizer) -> None:
        self.hidden = hidden
        self.only_reading = only_reading

    def __call__(
        self,
        action: int,
        name: str | None,
        detail: str | None,
        schema: str | None,
        view: str | None,
    ) -> int:
        if action == sqlite3.SQLITE_READ:
            if schema is None and detail == "":
                # A subquery, or a view left unflattened (`usage`, a UNION ALL), of which no
                # column is read (`count(*)`): it has no schema, and its own reads are checked.
                return sqlite3.SQLITE_OK
            if schema == "temp":
                return sqlite3.SQLITE_DENY if name in _SCHEMA_TABLES else sqlite3.SQLITE_OK
            if schema == "main":  # empty: only its functions that are tables (json_each)
                return sqlite3.SQLITE_OK if name in _TABLE_FUNCTIONS else sqlite3.SQLITE_DENY
            through_its_view = (
                schema == self.hidden
                and name in TENANT_TABLES
                and view is not None
                and view.casefold() == name.casefold()
            )
            return sqlite3.SQLITE_OK if through_its_view else sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA and name in _LISTS_SCHEMAS:
            return sqlite3.SQLITE_DENY
        return self.only_reading(action, name, detail, schema, view)

    def explain(self, error: BaseException) -> BaseException:
        """`error` as the user should read it: without the attached file's made-up name, and
        saying what a tenant's query may read."""
        if not isinstance(error, QueryError) or "prohibited" not in str(error):
            return error
        message = str(error).replace(f"{self.hidden}.", "")
        return QueryError(
            f"{message} (a tenant's query reads its tables and memstore's views only, not "
            "the full-text index or SQLite's own tables: docs/tenants.md)"
        )
