"""SessionStore: the store's operations (`StoreBase`) carried out on a synchronous engine.

Also the plan driver (`drive`, `run`) that the async store uses for SQLite in a worker thread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL
from sqlalchemy.pool import PoolProxiedConnection

from memstore.store import writer_turns
from memstore.store.base import StoreBase
from memstore.store.copying import BulkRows, copy_rows
from memstore.store.engine import LOCK_GAP_SECONDS, WRITE, dispose, store_engine
from memstore.store.errors import translate_database_errors
from memstore.store.handle import HandleBase
from memstore.store.migrate import check_ready, upgrade
from memstore.store.opening import Opening
from memstore.store.operation import Await, Program, Request, Run, Synchronous
from memstore.store.plans import COMMIT, Boundary, Plan, Step, as_call
from memstore.store.policy import backend_of
from memstore.store.prepared import Params, Prepared, as_sqlalchemy_errors, stream_rows
from memstore.store.row_security import TENANT, copy_allowed
from memstore.store.standalone import is_alone, run_alone
from memstore.store.tenancy import scoped
from memstore.store.time_limits import PROGRESS_STEPS, SqliteTimeLimit

__all__ = ["SessionHandle", "SessionStore"]

T = TypeVar("T")


def execute(connection: Connection, step: Step) -> Any:
    """One step of a plan: a prepared statement on the driver's cursor, an import's rows by
    COPY (PostgreSQL), SQLite's progress handler for a time limit, else through Core."""
    if isinstance(step, SqliteTimeLimit):
        driver: Any = connection.connection.driver_connection  # sqlite3.Connection
        return driver.set_progress_handler(step.handler, PROGRESS_STEPS)
    if isinstance(step, BulkRows):
        if backend_of(connection.dialect.name).bulk_copy and copy_allowed(connection):
            driver = connection.connection.driver_connection  # psycopg's (maybe asyncio)
            with as_sqlalchemy_errors(f"COPY {step.insert}"):
                return copy_rows(driver, connection.dialect, step)
        return step.insert.run(_cursor(connection), connection.dialect, step.rows)
    if isinstance(step, tuple) and isinstance(step[0], Prepared):
        if step[0].streamed:
            return stream_rows(step[0], connection.connection, connection.dialect, step[1])
        return step[0].run(_cursor(connection), connection.dialect, step[1])
    return connection.execute(*as_call(step))


_CURSOR = "memstore_cursor"


def _cursor(connection: Connection | PoolProxiedConnection) -> Any:
    """The driver connection's cursor for prepared statements, made once per connection (a
    prepared step reads its rows before the next step runs)."""
    pooled = connection.connection if isinstance(connection, Connection) else connection
    info = pooled.info  # kept with the driver connection, across checkouts
    cursor = info.get(_CURSOR)
    if cursor is None:
        cursor = info[_CURSOR] = pooled.cursor()
    return cursor


def drive(
    plan: Plan[T],
    connection: Connection,
    options: Mapping[str, Any] | None = None,
    step: Step | None = None,
) -> T:
    """Run a plan's statements on `connection`, feeding each result back to the plan (or the
    error it raised: the plan may clean up, then re-raise). A transaction begins before the
    first statement that needs one (one already open is joined; a statement `alone` with none
    open runs outside one: `standalone`), the connection given `options` (its execution
    options, which only a transaction reads) first: an append alone is spared setting them.
    After a `Boundary` step the next transaction begins LOCK_GAP_SECONDS later at the
    earliest: SQLite's other writers, which retry every 100 ms while they wait, take the write
    lock in between. `step`: the plan's first, taken from it already."""
    released: float | None = None  # when a boundary ended the last transaction
    result: Any
    try:
        step = next(plan) if step is None else step
        while True:
            try:
                if isinstance(step, Boundary):
                    (connection.commit if step is COMMIT else connection.rollback)()
                    writer_turns.release(connection.connection.info)  # others' turn
                    released, result = time.monotonic(), None
                elif connection.in_transaction():
                    result = execute(connection, step)
                elif is_alone(step):
                    result = run_alone(connection, connection.dialect, _cursor(connection), *step)
                else:
                    if released is not None:
                        time.sleep(max(0.0, released + LOCK_GAP_SECONDS - time.monotonic()))
                        released = None
                    if options is not None:
                        connection.execution_options(**options)
                        options = None
                    connection.begin()
                    result = execute(connection, step)
            except BaseException as error:  # Ctrl-C too: the plan's cleanup runs
                step = plan.throw(error)
            else:
                step = plan.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _options(write: bool, tenant: str | None) -> dict[str, Any]:
    """The execution options of a store's connection: whether it writes (SQLite's write lock),
    and whose rows PostgreSQL lets its transactions see (`row_security`)."""
    options: dict[str, Any] = {TENANT: tenant}
    if write:
        options[WRITE] = True
    return options


@contextmanager
def transaction(engine: Engine, *, write: bool, tenant: str | None = None) -> Iterator[Connection]:
    """A connection inside one transaction, which sees `tenant`'s rows on PostgreSQL; writing
    ones take SQLite's write lock at once."""
    with engine.connect() as connection:
        connection.execution_options(**_options(write, tenant))
        with connection.begin():
            yield connection


def run(engine: Engine, plan: Plan[T], *, write: bool, action: str, tenant: str | None = None) -> T:
    """Run a plan in a transaction (or several, or none for a statement alone: see `drive`)
    that sees `tenant`'s rows on PostgreSQL, with database errors translated (naming `action`);
    what is left uncommitted when it fails is rolled back."""
    with translate_database_errors(action):
        try:
            step = next(plan)
            while is_alone(step):
                step = _alone_on_pool(engine, plan, step)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        with engine.connect() as connection:
            result = drive(plan, connection, _options(write, tenant), step)
            connection.commit()
            writer_turns.release(connection.connection.info)  # not after the pool's checkin
            return result


def _alone_on_pool(engine: Engine, plan: Plan[T], step: tuple[Prepared, Params]) -> Step:
    """Run a plan's statement `alone` (`standalone`: PostgreSQL's append) on a connection the
    pool lends, without a Connection around it (which would cost an append alone a tenth of
    its CPU in Python, for nothing: no transaction, no options); the plan's next step."""
    pooled = engine.raw_connection()
    try:
        result = run_alone(pooled, engine.dialect, _cursor(pooled), *step)
    except BaseException as error:  # as `drive`: the plan may clean up, then re-raise
        pooled.close()
        return plan.throw(error)
    pooled.close()
    return plan.send(result)


class SessionStore(Opening[Engine], StoreBase, Synchronous):
    """Branchable session DAGs in a SQL database (SQLite by default, or PostgreSQL).

    One store may be shared by every thread of a process: each call is its own transaction on a
    connection of the engine's pool. Open it in each process (after a fork, not before). Its
    operations are `StoreBase`'s and its options `Opening`'s; `AsyncSessionStore` has the
    same, awaited.

    Args:
        url (str | URL | Engine): a database URL (`sqlite:///path.db`, `postgresql://host/db`)
            or an Engine.
        migrators: applied, in order, to every record imported from JSONL files.
        auto_migrate: bring the schema up to date when the store opens (a read-only store
            checks that it is instead); False does neither.
        read_only: open for reading only: never create the database or migrate it, and refuse
            writes (ReadOnlyStoreError). Opening raises StoreNotReadyError, saying what to run,
            for a missing SQLite file, a database without memstore's tables or at an older
            revision. A SQLite file is read wherever it can be read (a read-only directory too).
        schema: PostgreSQL only: the schema every memstore object lives in, its version table
            included (made on first upgrade). Default: the connection's current schema
            (usually `public`). SQLite has no schemas: giving one is an InvalidArgumentError.
        redact: run on every turn before it is hashed and stored (appends, keyed appends,
            imports, compaction's summaries; see `memstore.redact`), e.g.
            `memstore.redact.secrets()`; None (the default) stores turns as given.
        tenant: whose sessions the store reads and writes (see docs/tenants.md): every
            operation sees only this tenant's rows, and two tenants may hold sessions of the
            same id and the same turns. Default: the default tenant (''), which a database
            migrated from before tenants holds everything in. Up to 64 letters, digits and
            `_ - . : @`, starting with a letter or digit (InvalidArgumentError otherwise).

    Raises:
        StoreNotReadyError: read-only, and the database is not at this memstore's revision.
        DatabaseTooNewError: a newer memstore migrated the database (read-only or not).
        MigrationError: the schema could not be brought up to date, e.g. because another's
            tables have memstore's names.
    """

    def _store_engine(
        self, url: str | URL | Engine, *, schema: str | None, read_only: bool
    ) -> Engine:
        return store_engine(url, schema=schema, read_only=read_only)

    def _opening(self, *, auto_migrate: bool) -> None:
        """Migrate, or when read-only check, the schema (see `auto_migrate`)."""
        if auto_migrate:
            with translate_database_errors("opening the store"):
                if self.read_only:
                    check_ready(self.engine)
                else:
                    upgrade(self.engine, only_if_needed=True)
            self._complete(self._cleaning_on_open())

    def _abandon(self) -> None:
        self.close()

    def close(self) -> None:
        """Release the engine's connections."""
        dispose(self.engine)

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[Connection]:
        """A connection inside one transaction; writing ones take SQLite's write lock at once."""
        if write:
            self._writable("a writing transaction")
        with transaction(self.engine, write=write, tenant=self.tenant) as connection:
            yield connection

    def _perform(self, request: Request) -> Any:
        """Carry out one request of an operation's program (see `operation`)."""
        if isinstance(request, Run):
            plan = scoped(request.plan, self.tenant)
            return run(
                self.engine, plan, write=request.write, action=request.action, tenant=self.tenant
            )
        if isinstance(request, Await):
            return asyncio.run(request.coroutine)
        with translate_database_errors(request.action):
            return request.call(self.engine)

    def session(self, session_id: str) -> SessionHandle:
        """A light handle on one session: it reads the head (one query), not the graph."""
        return SessionHandle(self, session_id, self.head(session_id))


class SessionHandle(HandleBase, Synchronous):
    """One session, through a SessionStore (see HandleBase)."""

    store: SessionStore

    def __init__(self, store: SessionStore, session_id: str, head: str | None) -> None:
        super().__init__(store, session_id, head)

    def _complete(self, program: Program[T]) -> T:
        return self.store._complete(program)
