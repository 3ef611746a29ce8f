"""Statements of the hot paths (append, bulk import), compiled once and run on the driver's cursor.

A SQLAlchemy Core execution costs about 15-20 µs of Python on top of the database's own work,
several times what SQLite spends on a small insert. A `Prepared` statement is still built with
SQLAlchemy (the SQL is written once, for every dialect), but it is compiled once per dialect and
then executed directly: `run` on a DBAPI cursor, or through `exec_driver_sql` on an async
connection. It takes a dict of parameters (or a list of them, for executemany) and gives its rows
as the driver gives them (no result type conversion), in a `PreparedRows` that answers the calls
plans make on SQLAlchemy's results, each row named by its columns as Core's are (`row.id`,
`row[0]`); a driver's error is raised as SQLAlchemy raises it (`DBAPIError`), so the store
translates both kinds in one place (`store/errors.py`). A plan does not know which way its
statement ran. Only the drivers (`sync.execute`, `aio.execute`) run them.
"""

from __future__ import annotations

import copy
import functools
import itertools
import sqlite3
from collections import namedtuple
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias

from sqlalchemy import Dialect, Executable, Table
from sqlalchemy import insert as sa_insert
from sqlalchemy.exc import DBAPIError, MultipleResultsFound, NoResultFound

from memstore.store.policy import backend_of
from memstore.store.tables import TENANT, stored_on

__all__ = [
    "Compiled",
    "Params",
    "Prepared",
    "PreparedRows",
    "as_sqlalchemy_errors",
    "column_names",
    "named_rows",
    "stream_rows",
]

Params: TypeAlias = Mapping[str, Any] | Sequence[Mapping[str, Any]]
STREAM_ROWS = 1000


@functools.lru_cache(maxsize=256)
def _row_class(columns: tuple[str, ...]) -> type[tuple[Any, ...]]:
    """A tuple type whose fields are `columns` (a name that is not an identifier becomes
    `_N`), with `_mapping` as SQLAlchemy's rows have it."""
    base = namedtuple("PreparedRow", columns, rename=True)  # type: ignore[misc]
    mapping = property(lambda row: dict(zip(row._fields, row, strict=True)))
    return type("PreparedRow", (base,), {"__slots__": (), "_mapping": mapping})


def named_rows(columns: Sequence[str] | None, rows: Iterable[Any]) -> list[Any]:
    """A driver's `rows` as rows named by their `columns` (`column_names`)."""
    if columns is None:
        return []
    make = _row_class(tuple(columns))._make  # type: ignore[attr-defined]
    return [make(row) for row in rows]


def _rows_statuses() -> frozenset[int]:
    """psycopg's statuses of a result that gives rows (those its `description` describes)."""
    try:
        from psycopg.pq import ExecStatus
    except ImportError:  # pragma: no cover - the postgres extra is not installed
        return frozenset()
    names = ("TUPLES_OK", "SINGLE_TUPLE", "TUPLES_CHUNK")  # the last since psycopg 3.2
    return frozenset(int(getattr(ExecStatus, name)) for name in names if hasattr(ExecStatus, name))


_ROWS_STATUSES = _rows_statuses()
_ABSENT: Any = object()


def column_names(cursor: Any) -> tuple[str, ...] | None:
    """The names of the columns of the rows the cursor's statement gave; None for a statement
    that gives none. On psycopg they are read off the result: its `description` builds an
    object per column with its type's details, per statement (about 5% of a PostgreSQL
    append's CPU in Python), where a row needs only the names, which memstore writes in
    ASCII."""
    result = getattr(cursor, "pgresult", _ABSENT)
    if result is _ABSENT:  # sqlite3's (and aiosqlite's) cursor: a tuple per column already
        description = cursor.description
        return None if description is None else tuple(column[0] for column in description)
    if not result or not (result.nfields or result.status in _ROWS_STATUSES):
        return None
    return tuple(result.fname(index).decode() for index in range(result.nfields))


class PreparedRows(list[tuple[Any, ...]]):
    """A prepared statement's rows, with the calls plans make on a SQLAlchemy result."""

    def __init__(self, rows: Iterable[tuple[Any, ...]] = (), rowcount: int = -1) -> None:
        super().__init__(rows)
        self.rowcount = rowcount  # rows changed, as the driver counts them

    def all(self) -> list[tuple[Any, ...]]:
        """Every row."""
        return list(self)

    def first(self) -> tuple[Any, ...] | None:
        """The first row, or None."""
        return self[0] if self else None

    def one(self) -> tuple[Any, ...]:
        """The only row; SQLAlchemy's errors when there is none or more than one."""
        if len(self) != 1:
            raise NoResultFound("no row") if not self else MultipleResultsFound("several rows")
        return self[0]

    def scalar_one_or_none(self) -> Any:
        """The first column of the only row, or None without rows."""
        return self.one()[0] if self else None

    def scalars(self) -> list[Any]:
        """The first column of every row."""
        return [row[0] for row in self]


@dataclass(frozen=True)
class Compiled:
    """A statement's SQL for one dialect, with named parameters, and what fills them in."""

    sql: str
    defaults: Mapping[str, Any]  # values bound in the statement itself
    processors: Mapping[str, Callable[[Any], Any]]  # the column types' bind conversions

    def parameters(self, given: Mapping[str, Any]) -> Mapping[str, Any]:
        """The driver's parameters for one execution (usually `given` itself)."""
        if not self.defaults and not self.processors:
            return given
        values = {**self.defaults, **given}
        for name, process in self.processors.items():
            values[name] = process(values[name])
        return values

    def driver_params(self, params: Params) -> Any:
        """Parameters for one execution, or a list of them for executemany."""
        if isinstance(params, Mapping):
            return self.parameters(params)
        if not self.defaults and not self.processors:
            return params
        return [self.parameters(row) for row in params]


def _named(dialect: Dialect) -> Dialect:
    """`dialect`, or a copy of it that writes named parameters (`:name`) instead of positional
    ones, so that rows go to the driver as the dicts they are, without reordering."""
    if not dialect.positional:
        return dialect
    named = copy.copy(dialect)
    named.paramstyle = "named"
    named.positional = False
    return named


class Prepared:
    """A statement compiled once per dialect, to run without SQLAlchemy's per-call work."""

    def __init__(
        self,
        statement: Executable,
        columns: Sequence[str] | None = None,
        *,
        streamed: bool = False,
        alone: bool = False,
    ) -> None:
        """`columns`: for an INSERT without values, the columns every row gives. `streamed`: a
        query whose rows come as an iterator, a batch at a time (on sync connections only).
        `alone`: a statement that is all or nothing by itself, which the plan needs no
        transaction around: run outside one when none is open (see `standalone`)."""
        self.statement = statement
        self.columns = list(columns) if columns is not None else None
        self.streamed = streamed
        self.alone = alone
        self.table: Table | None = None  # an INSERT's table: its columns are per dialect
        self._compiled: dict[tuple[str, str], Compiled] = {}

    @classmethod
    def insert(cls, table: Table, columns: Sequence[str]) -> Prepared:
        """An INSERT of `columns` into `table` (no RETURNING), one row per parameter dict, of the
        store's tenant (`tables.TENANT`: `columns` may name `tenant`, which is left out). On
        each database it names the columns that database stores (`tables.stored_on`): a row
        may carry keys for the others, which are left out."""
        statement = sa_insert(table).inline()
        if "tenant" in table.c:  # the store's, bound by `tenancy.scoped`: no row names it
            statement = statement.values(tenant=TENANT)
        prepared = cls(statement, [name for name in columns if name != "tenant"])
        prepared.table = table
        return prepared

    def __repr__(self) -> str:
        if self.table is not None:  # compiled without its columns, an INSERT would warn
            return f"Prepared(INSERT INTO {self.table.name} ({', '.join(self.columns or ())}))"
        return f"Prepared({self.statement})"

    def compiled(self, dialect: Dialect) -> Compiled:
        """The statement compiled for `dialect` (once)."""
        key = (dialect.name, dialect.driver)
        found = self._compiled.get(key)
        if found is None:
            found = self._compiled[key] = self._compile(dialect)
        return found

    def _compile(self, dialect: Dialect) -> Compiled:
        named = _named(dialect)
        columns = self.columns
        if columns is not None and self.table is not None:
            table = self.table
            columns = [name for name in columns if stored_on(table.c[name], dialect.name)]
        compiled = self.statement.compile(  # type: ignore[attr-defined]
            dialect=named, column_keys=columns
        )
        if "POSTCOMPILE" in compiled.string:
            raise ValueError(f"an IN list of varying length cannot be prepared: {self.statement}")
        defaults: dict[str, Any] = {}
        processors: dict[str, Callable[[Any], Any]] = {}
        for bind, name in compiled.bind_names.items():  # each parameter, by its name in the SQL
            if not bind.required:
                defaults[name] = bind.effective_value
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if process is not None:
                processors[name] = process
        return Compiled(sql=compiled.string, defaults=defaults, processors=processors)

    def run(self, cursor: Any, dialect: Dialect, params: Params) -> PreparedRows:
        """Execute on a DBAPI cursor inside the caller's transaction; the rows it returns."""
        compiled = self.compiled(dialect)
        with as_sqlalchemy_errors(compiled.sql):
            if isinstance(params, Mapping):
                cursor.execute(compiled.sql, compiled.parameters(params))
            else:
                cursor.executemany(compiled.sql, compiled.driver_params(params))
            columns = column_names(cursor)
            rows = named_rows(columns, cursor.fetchall() if columns is not None else ())
            return PreparedRows(rows, cursor.rowcount)

    async def run_async(self, connection: Any, dialect: Dialect, params: Params) -> PreparedRows:
        """Execute on a driver's asyncio connection (psycopg's) inside the caller's
        transaction; the rows it returns."""
        compiled = self.compiled(dialect)
        with as_sqlalchemy_errors(compiled.sql):
            async with connection.cursor() as cursor:
                if isinstance(params, Mapping):
                    await cursor.execute(compiled.sql, compiled.parameters(params))
                else:
                    await cursor.executemany(compiled.sql, compiled.driver_params(params))
                columns = column_names(cursor)
                fetched = await cursor.fetchall() if columns is not None else ()
                return PreparedRows(named_rows(columns, fetched), cursor.rowcount)


_cursor_names = itertools.count()


def stream_rows(
    prepared: Prepared, connection: Any, dialect: Dialect, params: Params
) -> Iterator[tuple[Any, ...]]:
    """Run a streamed query on a DBAPI connection and yield its rows, fetched a batch at a
    time (PostgreSQL: through a server-side cursor), so memory holds a batch, not the result.
    The query runs when iteration starts; the cursor closes when it ends or is closed."""
    if not isinstance(params, Mapping):
        raise TypeError("a streamed query takes one set of parameters")
    compiled = prepared.compiled(dialect)
    if backend_of(dialect.name).server_side_cursors:
        cursor = connection.cursor(f"memstore_stream_{next(_cursor_names)}")  # server-side
    else:
        cursor = connection.cursor()
    try:
        with as_sqlalchemy_errors(compiled.sql):
            cursor.execute(compiled.sql, compiled.parameters(params))
            while rows := cursor.fetchmany(STREAM_ROWS):
                yield from named_rows(column_names(cursor), rows)
    finally:
        cursor.close()


def _driver_errors() -> tuple[type[Exception], ...]:
    errors: list[type[Exception]] = [sqlite3.Error]
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the postgres extra is not installed
        pass
    else:
        errors.append(psycopg.Error)
    return tuple(errors)


_DRIVER_ERRORS = _driver_errors()


@contextmanager
def as_sqlalchemy_errors(sql: str) -> Iterator[None]:
    """Raise a driver's error from running `sql` as SQLAlchemy's `DBAPIError` subclass for it
    (`IntegrityError`, `OperationalError`, ...), as Core does, the driver's error its `orig`."""
    try:
        yield
    except _DRIVER_ERRORS as error:
        base = next(kind for kind in _DRIVER_ERRORS if isinstance(error, kind))
        raise DBAPIError.instance(sql, None, error, base, hide_parameters=True) from error
