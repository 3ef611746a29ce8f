"""Bulk inserts: an import's rows through PostgreSQL's `COPY ... FROM STDIN`, elsewhere through
the prepared INSERT's executemany.

A plan yields a `BulkRows` step (an INSERT of whole rows, `Prepared.insert`, and its rows as
dicts); the drivers (`sync.execute`, `aio.execute`) run it. On a backend that copies
(`Backend.bulk_copy`), the rows are written to psycopg's `cursor.copy()` in text format, inside
the plan's transaction: a refused import rolls the copied rows back with the rest. The columns
copied are the INSERT's, as that database stores them (`tables.stored_on`), with the values the
column types' bind processors make in Python (`tables.SearchVector` folds its text).

A column whose type adds SQL around the bound value (`bind_expression`: the search vectors'
`to_tsvector`) cannot be copied as it is: that table's rows are copied into a temporary table
(no WAL, no index) with the bound values, then moved by one `INSERT ... SELECT` that applies the
expressions, in the rows' order (so a `serial` key is drawn in the order the rows came, as
by the INSERTs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, Column, Dialect, MetaData, Table, Text, bindparam, insert, select
from sqlalchemy.schema import CreateTable
from sqlalchemy.util import await_only

from memstore.store.prepared import Prepared, PreparedRows
from memstore.store.tables import TENANT_KEY, stored_on

__all__ = ["BulkRows", "copy_rows", "copy_rows_async"]


@dataclass(frozen=True, slots=True)
class BulkRows:
    """A step: insert `rows` (dicts, every column the INSERT names) with `insert`, a
    `Prepared.insert`; by COPY where the backend copies (`Backend.bulk_copy`)."""

    insert: Prepared
    rows: Sequence[Mapping[str, Any]]


_ORDER = "memstore_order"  # the staging table's column for the rows' order


@dataclass(frozen=True)
class _Copy:
    """How one table's rows are copied on one dialect."""

    keys: tuple[str, ...]  # the row keys copied, in the COPY's column order
    processors: tuple[tuple[int, Callable[[Any], Any]], ...]  # by position in `keys`
    copy_sql: str
    before: tuple[str, ...] = ()  # statements before the COPY (make the staging table)
    after: tuple[str, ...] = ()  # after it (move the staged rows, drop the table)

    def values(self, rows: Sequence[Mapping[str, Any]]) -> Any:
        """Each row's values in the COPY's order, processed (and numbered, when staged)."""
        keys, processors, staged = self.keys, self.processors, bool(self.before)
        for number, row in enumerate(rows):
            values = [row[key] for key in keys]
            for position, process in processors:
                values[position] = process(values[position])
            yield (number, *values) if staged else values


_copies: dict[tuple[int, str], _Copy] = {}


def _copy_of(prepared: Prepared, dialect: Dialect) -> _Copy:
    """The COPY of `prepared`'s rows on `dialect` (made once)."""
    key = (id(prepared), dialect.name)
    found = _copies.get(key)
    if found is None:
        found = _copies[key] = _make_copy(prepared, dialect)
    return found


def _row_key(column: str) -> str:
    """The key of a row's value for `column` (the tenant's is the scope's, `TENANT_KEY`)."""
    return TENANT_KEY if column == "tenant" else column


def _quoted(dialect: Dialect, name: str) -> str:
    return dialect.identifier_preparer.quote(name)


def _make_copy(prepared: Prepared, dialect: Dialect) -> _Copy:
    table, names = prepared.table, prepared.columns
    if table is None or names is None:
        raise TypeError(f"a bulk insert is a Prepared.insert of named columns, not {prepared}")
    columns = [table.c[name] for name in names if stored_on(table.c[name], dialect.name)]
    if "tenant" in table.c:  # bound by `tenancy.scoped`, under its own key in each row
        columns.insert(0, table.c.tenant)
    processors = []
    expressions = {}
    for position, column in enumerate(columns):
        process = column.type.dialect_impl(dialect).bind_processor(dialect)
        if process is not None:
            processors.append((position, process))
        expression = column.type.bind_expression(bindparam(column.name, type_=column.type))
        if expression is not None:
            expressions[column.name] = column.type
    keys = tuple(_row_key(column.name) for column in columns)
    if not expressions:
        listed = ", ".join(_quoted(dialect, column.name) for column in columns)
        target = _quoted(dialect, table.name)
        return _Copy(keys, tuple(processors), f"COPY {target} ({listed}) FROM STDIN")
    return _staged_copy(table, columns, expressions, tuple(processors), dialect)


def _staged_copy(
    table: Table,
    columns: Sequence[Column[Any]],
    expressions: Mapping[str, Any],
    processors: tuple[tuple[int, Callable[[Any], Any]], ...],
    dialect: Dialect,
) -> _Copy:
    """A copy through a temporary table of the bound values (`expressions`: the columns whose
    type wraps them in SQL, staged as text)."""
    stage = Table(
        f"memstore_copy_{table.name}",
        MetaData(),
        Column(_ORDER, BigInteger),
        *(Column(c.name, Text if c.name in expressions else c.type) for c in columns),
        prefixes=["TEMPORARY"],
        postgresql_on_commit="DROP",
    )
    made = str(CreateTable(stage).compile(dialect=dialect)).strip()
    picked = [
        expressions[c.name].bind_expression(stage.c[c.name])
        if c.name in expressions
        else stage.c[c.name]
        for c in columns
    ]
    keys = [c.name for c in columns]
    moved = insert(table).from_select(keys, select(*picked).order_by(stage.c[_ORDER]))
    moved_sql = str(moved.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
    listed = ", ".join(_quoted(dialect, name) for name in [_ORDER, *keys])
    staged = _quoted(dialect, stage.name)
    return _Copy(
        tuple(_row_key(name) for name in keys),
        processors,
        f"COPY {staged} ({listed}) FROM STDIN",
        before=(made,),
        after=(moved_sql, f"DROP TABLE {staged}"),
    )


# While rows are copied, the foreign key checks (one per row copied) keep generic plans rather
# than being planned afresh for each row, which took about a third of an import's time; with
# sequential scans off, as in `memstore_append` (migration 0025), any generic plan made then
# looks the referenced row up by index, whatever the table's size when it was made (outside
# these statements plans stay custom: `engine.configure_postgresql`). JIT is off with them: the
# cost sequential scans are given when off would make PostgreSQL compile the move's
# `INSERT ... SELECT` (about a second per statement).
_KEYED_PLANS = (
    "SELECT current_setting('plan_cache_mode'), current_setting('enable_seqscan'),"
    " current_setting('jit'), set_config('plan_cache_mode', 'auto', true),"
    " set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)"
)
_RESTORE = (
    "SELECT set_config('plan_cache_mode', %s, true), set_config('enable_seqscan', %s, true),"
    " set_config('jit', %s, true)"
)


def copy_rows(driver: Any, dialect: Dialect, step: BulkRows) -> PreparedRows:
    """Copy `step`'s rows on a psycopg connection (or, from a sync connection over an asyncio
    one, as `run_sync` gives it, its asyncio connection), inside its transaction."""
    if _is_async(driver):
        return await_only(copy_rows_async(driver, dialect, step))
    copy = _copy_of(step.insert, dialect)
    with driver.cursor() as cursor:
        settings = cursor.execute(_KEYED_PLANS).fetchone()[:3]
        for sql in copy.before:
            cursor.execute(sql)
        with cursor.copy(copy.copy_sql) as writer:
            for values in copy.values(step.rows):
                writer.write_row(values)
        for sql in copy.after:
            cursor.execute(sql)
        cursor.execute(_RESTORE, settings)
    return PreparedRows((), len(step.rows))


async def copy_rows_async(driver: Any, dialect: Dialect, step: BulkRows) -> PreparedRows:
    """`copy_rows` on psycopg's asyncio connection."""
    copy = _copy_of(step.insert, dialect)
    async with driver.cursor() as cursor:
        settings = (await (await cursor.execute(_KEYED_PLANS)).fetchone())[:3]
        for sql in copy.before:
            await cursor.execute(sql)
        async with cursor.copy(copy.copy_sql) as writer:
            for values in copy.values(step.rows):
                await writer.write_row(values)
        for sql in copy.after:
            await cursor.execute(sql)
        await cursor.execute(_RESTORE, settings)
    return PreparedRows((), len(step.rows))


def _is_async(driver: Any) -> bool:
    import psycopg

    return isinstance(driver, psycopg.AsyncConnection)
