"""What differs between the backends: one `Backend` object per database, and nothing else.

The stores, the plans, the engines, migrations and the `sql` reader ask a `Backend` what to do
rather than comparing dialect names, so this module is the one home of what SQLite and
PostgreSQL do differently; adding a third backend means describing it here, as one more
`Backend`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, LargeBinary, Table, cast, func
from sqlalchemy.dialects import postgresql, sqlite

from memstore.errors import InvalidArgumentError

__all__ = ["BACKENDS", "POSTGRESQL", "SQLITE", "Backend", "backend_of"]


@dataclass(frozen=True, eq=False)
class Backend:
    """A database's policies and traits, as memstore sees them. There is one of each
    (`BACKENDS`), compared and hashed by identity: plans key their statements by it."""

    name: str
    """SQLAlchemy's dialect name (what a URL's scheme names)."""
    label: str
    """The database's name, as messages spell it."""
    driver_extra: str
    """The package extra that installs the drivers memstore needs beyond the standard library."""
    insert: Callable[[Table], Any]
    """The dialect's INSERT, which can be an upsert (`on_conflict_do_update`/`_nothing`)."""
    byte_length: Callable[[Any], ColumnElement[int]]
    """The SQL for a text's UTF-8 length in bytes."""
    json_string: Callable[[Any, str], tuple[ColumnElement[bool], ColumnElement[Any]]]
    """The SQL of whether a JSON text's top-level `key` holds a string, and of that value."""
    secure_delete: bool
    """Deleted content is overwritten as it is deleted (`PRAGMA secure_delete`), and `VACUUM`
    leaves none of it in the file (SQLite); PostgreSQL's deleted rows no SQL can read, and its
    own VACUUM reclaims their space."""
    one_file: bool
    """The database is a file memstore opens itself (SQLite): never in memory, a busy timeout,
    a read-only opener, the `sql` reader's own connection, files an import may leave."""
    text_holds_nul: bool
    """Text and JSON values may hold NUL characters (SQLite); PostgreSQL's text and jsonb
    cannot (a turn's JSON text escapes them, so only session fields are concerned)."""
    schemas: bool
    """The database has schemas: memstore may get one of its own (PostgreSQL). Without them
    (SQLite), memstore's tables share the file with any other."""
    search_backlog: bool
    """Writes of a few nodes leave their full-text indexing to a backlog, which a store that can
    write indexes before it searches (SQLite; PostgreSQL indexes each write)."""
    writes_text_index: bool
    """Appends write the full-text index's rows themselves (SQLite's FTS5 table), which search
    queries with FTS5's MATCH; PostgreSQL's index is over search vectors stored in the nodes
    (migration 0022), which search queries with tsquery."""
    imports_commit_as_they_go: bool
    """A new session's import commits in chunks, hidden until complete, so an import that died
    leaves rows that opening a store for writing cleans (SQLite)."""
    cost_based_planner: bool
    """The planner picks plans from statistics, which may be stale (PostgreSQL): reads that must
    use an index are written so it has no choice (a LATERAL lookup with LIMIT 1 per key, no
    ORDER BY: the rows are sorted in Python)."""
    import_batch_scale: int
    """An import reads, checks and inserts this many times `import_batch.BATCH_ROWS` records at
    a time (`import_batch.batch_rows`). PostgreSQL: 4, since each batch costs statements of
    its own (the id lookups, a staging table, the copies and their settings), a tenth of an
    import's CPU at 1 on both sides of the connection; SQLite: 1, its chunks bounding how long
    a new session's import holds the write lock."""
    import_setup: tuple[str, ...]
    """Statements an import's transaction starts with. PostgreSQL: custom plans, since plans
    cached while the tables were small (say, empty and never analyzed) would keep checking
    foreign keys by sequential scan as the import grows them."""
    search_setup: tuple[str, ...]
    """Statements a search's transaction starts with. PostgreSQL: no parallel workers, whose
    start costs more than a search that reads a few index pages: without statistics on the
    length of the search text, the planner expects a third of the turns longer than the index
    holds, and plans workers to read them (there are none, or nearly)."""
    statement_timeout: bool
    """A time limit is the server's `statement_timeout`; else a progress handler (SQLite)."""
    server_side_cursors: bool
    """A streamed read fetches through a named server-side cursor (PostgreSQL)."""
    advisory_locks: bool
    """Migrations take turns on an advisory lock; else on the write lock (SQLite's BEGIN
    IMMEDIATE) that every migration holds."""
    migrates_with_foreign_keys_off: bool
    """A migration runs with foreign keys off and checks them before it commits (SQLite: its
    batch migrations rebuild tables, and the cascade of the DROP would empty the children)."""
    async_in_thread: bool
    """The async store runs a whole transaction on the sync driver in a worker thread: through
    aiosqlite every statement was a round trip to its thread (SQLite)."""
    async_prepared_on_driver: bool
    """The async store hands prepared statements to the driver's own asyncio connection
    (psycopg on PostgreSQL)."""
    bulk_copy: bool
    """An import's rows go in by `COPY ... FROM STDIN` (`copying`: PostgreSQL); else by the
    prepared INSERT's executemany."""
    appends_in_one_call: bool
    """An append is one call of the server's function `memstore_append` (migration 0025), not a
    round trip per statement (PostgreSQL; SQLite's statements run in-process)."""

    def __repr__(self) -> str:
        return f"Backend({self.name!r})"


def _blob_length(text: Any) -> ColumnElement[int]:
    return func.length(cast(text, LargeBinary))


def _octet_length(text: Any) -> ColumnElement[int]:
    return func.octet_length(text)


def _sqlite_json_string(document: Any, key: str) -> tuple[ColumnElement[bool], ColumnElement[Any]]:
    path = f'$."{key}"'
    return func.json_type(document, path) == "text", func.json_extract(document, path)


def _postgres_json_string(
    document: Any, key: str
) -> tuple[ColumnElement[bool], ColumnElement[Any]]:
    value = cast(document, postgresql.JSON)[
        key
    ]  # json, not jsonb: a turn may escape NUL (jsonb refuses it)
    return func.json_typeof(value) == "string", value.astext


SQLITE = Backend(
    name="sqlite",
    label="SQLite",
    text_holds_nul=True,
    driver_extra="async",
    insert=sqlite.insert,
    byte_length=_blob_length,
    json_string=_sqlite_json_string,
    secure_delete=True,
    one_file=True,
    schemas=False,
    search_backlog=True,
    writes_text_index=True,
    imports_commit_as_they_go=True,
    cost_based_planner=False,
    import_batch_scale=1,
    import_setup=(),
    search_setup=(),
    statement_timeout=False,
    server_side_cursors=False,
    advisory_locks=False,
    migrates_with_foreign_keys_off=True,
    async_in_thread=True,
    async_prepared_on_driver=False,
    bulk_copy=False,
    appends_in_one_call=False,
)
POSTGRESQL = Backend(
    name="postgresql",
    label="PostgreSQL",
    text_holds_nul=False,
    driver_extra="postgres",
    insert=postgresql.insert,
    byte_length=_octet_length,
    json_string=_postgres_json_string,
    secure_delete=False,
    one_file=False,
    schemas=True,
    search_backlog=False,
    writes_text_index=False,
    imports_commit_as_they_go=False,
    cost_based_planner=True,
    import_batch_scale=4,
    import_setup=("SET LOCAL plan_cache_mode = force_custom_plan",),
    search_setup=("SET LOCAL max_parallel_workers_per_gather = 0",),
    statement_timeout=True,
    server_side_cursors=True,
    advisory_locks=True,
    migrates_with_foreign_keys_off=False,
    async_in_thread=False,
    async_prepared_on_driver=True,
    bulk_copy=True,
    appends_in_one_call=True,
)
BACKENDS = (SQLITE, POSTGRESQL)
"""Every backend memstore runs on."""
_BY_NAME = {backend.name: backend for backend in BACKENDS}


def backend_of(dialect: str) -> Backend:
    """The backend of a SQLAlchemy dialect name; any other is an InvalidArgumentError."""
    try:
        return _BY_NAME[dialect]
    except KeyError:
        raise InvalidArgumentError(
            f"memstore runs on SQLite or PostgreSQL, not {dialect!r}: give a sqlite:// or "
            "postgresql:// URL"
        ) from None
