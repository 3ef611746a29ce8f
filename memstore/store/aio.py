"""AsyncSessionStore: the store's operations (`StoreBase`) carried out on an asyncio engine.

Every operation is the one `SessionStore` has, with its signature and docstring, awaited; only
how a request is carried out differs (see `AsyncSessionStore._perform`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from sqlalchemy.engine import URL, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.util import greenlet_spawn

from memstore.errors import EventLoopError, InvalidArgumentError
from memstore.store.base import StoreBase
from memstore.store.copying import BulkRows, copy_rows_async
from memstore.store.engine import (
    ASYNC_DRIVERS,
    BUSY_TIMEOUT_SECONDS,
    DEFAULT_URL,
    SCHEMA,
    WRITE,
    configure_store_engine,
    create_store_engine,
    dispose,
    driver_installed,
    sqlite_read_uri,
    store_url,
)
from memstore.store.errors import translate_database_errors
from memstore.store.handle import HandleBase
from memstore.store.handoff import LoopConnection
from memstore.store.migrate import check_ready, is_current, migrate_in, require_ready, upgrade
from memstore.store.opening import Opening
from memstore.store.operation import Asynchronous, Await, Program, Request, Run
from memstore.store.plans import Boundary, Plan, Step, as_call
from memstore.store.policy import backend_of
from memstore.store.prepared import Prepared, PreparedRows, as_sqlalchemy_errors
from memstore.store.row_security import TENANT, copy_allowed, tenant_of_connections
from memstore.store.standalone import is_alone, run_alone_async
from memstore.store.sync import run as sync_run
from memstore.store.tenancy import scoped
from memstore.store.time_limits import PROGRESS_STEPS, SqliteTimeLimit

__all__ = ["AsyncSessionHandle", "AsyncSessionStore", "create_async_store_engine"]

T = TypeVar("T")


def _aiosqlite_reader(parsed: URL) -> Any:
    """An `async_creator` that opens the file for reading only (see `sqlite_read_uri`)."""
    uri = sqlite_read_uri(parsed)

    async def connect() -> Any:
        import aiosqlite

        return await aiosqlite.connect(
            uri, uri=True, timeout=BUSY_TIMEOUT_SECONDS, check_same_thread=False
        )

    return connect


def create_async_store_engine(
    url: str | URL = DEFAULT_URL,
    *,
    schema: str | None = None,
    read_only: bool = False,
    **kwargs: Any,
) -> AsyncEngine:
    """An async engine for the store (aiosqlite for SQLite, psycopg 3 for PostgreSQL); `schema`
    and `read_only` as for `create_store_engine`. PostgreSQL's connections read what has arrived
    without a turn of the event loop (`ready_reads`), unless `connect_args` names its own
    `async_creator_fn`."""
    reader = ("async_creator", _aiosqlite_reader)
    parsed = store_url(url, ASYNC_DRIVERS, schema, read_only, kwargs, reader)
    with driver_installed(parsed):
        if not backend_of(parsed.get_backend_name()).async_in_thread:
            _reading_what_arrived(kwargs)
        engine = create_async_engine(parsed, **kwargs)
    configure_store_engine(engine.sync_engine, schema=schema, read_only=read_only)
    return engine


def _reading_what_arrived(kwargs: dict[str, Any]) -> None:
    """Connect to PostgreSQL with `ReadyReadsConnection`: a read whose bytes have arrived costs
    no turn of the event loop (see `ready_reads`), unless the caller connects its own way."""
    from memstore.store.ready_reads import ReadyReadsConnection

    kwargs.setdefault("connect_args", {}).setdefault(
        "async_creator_fn", ReadyReadsConnection.connect
    )


def _async_store_engine(
    url: str | URL | AsyncEngine, schema: str | None, read_only: bool
) -> AsyncEngine:
    """The engine an AsyncSessionStore runs on (see `engine.store_engine`)."""
    if not isinstance(url, AsyncEngine):
        return create_async_store_engine(url, schema=schema, read_only=read_only)
    if schema is not None and schema != url.sync_engine.get_execution_options().get(SCHEMA):
        raise InvalidArgumentError(
            f"the engine given was not made for schema {schema!r}: make it with "
            "create_async_store_engine(url, schema=...) and leave schema out here"
        )
    return url


async def execute(connection: AsyncConnection, step: Step, driver: Any = None) -> Any:
    """One step of a plan: a prepared statement straight to the driver (`driver`: psycopg's
    asyncio connection under `connection`, if known), an import's rows by COPY there, else
    through Core."""
    if isinstance(step, Boundary):  # only SQLite's imports, which run on the sync store's driver
        raise TypeError("a transaction boundary runs on a sync connection (use run_sync)")
    if isinstance(step, SqliteTimeLimit):  # aiosqlite's connection, under SQLAlchemy's
        aiosqlite: Any = (await connection.get_raw_connection()).driver_connection
        return await aiosqlite.set_progress_handler(step.handler, PROGRESS_STEPS)
    if isinstance(step, BulkRows):
        copying = driver is not None and backend_of(connection.dialect.name).bulk_copy
        if copying and await connection.run_sync(copy_allowed):
            with as_sqlalchemy_errors(f"COPY {step.insert}"):
                return await copy_rows_async(driver, connection.dialect, step)
        step = (step.insert, step.rows)
    if isinstance(step, tuple) and isinstance(step[0], Prepared):
        if step[0].streamed:  # export and import plans run on the sync connection (run_sync)
            raise TypeError("a streamed statement runs on a sync connection (use run_sync)")
        if driver is not None:
            return await step[0].run_async(driver, connection.dialect, step[1])
        compiled = step[0].compiled(connection.dialect)
        result = await connection.exec_driver_sql(compiled.sql, compiled.driver_params(step[1]))
        return PreparedRows(result if result.returns_rows else (), result.rowcount)
    return await connection.execute(*as_call(step))


async def drive(plan: Plan[T], connection: AsyncConnection) -> T:
    """Run a plan's statements on `connection`, feeding each result back to the plan; a
    transaction begins before the first statement that needs one (as the sync store's `drive`:
    one open is joined, a statement `alone` with none open runs outside one)."""
    driver = None
    if backend_of(connection.dialect.name).async_prepared_on_driver:  # skip SQLAlchemy
        driver = (await connection.get_raw_connection()).driver_connection
    try:
        step = next(plan)
        while True:
            try:
                if connection.in_transaction():
                    result = await execute(connection, step, driver)
                elif driver is not None and is_alone(step):
                    result = await run_alone_async(connection, driver, *step)
                else:
                    await connection.begin()
                    result = await execute(connection, step, driver)
            except BaseException as error:  # as the sync store's `drive`
                step = plan.throw(error)
            else:
                step = plan.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


class AsyncSessionStore(Opening[AsyncEngine], StoreBase, Asynchronous):
    """The async twin of SessionStore: the same operations (`StoreBase`'s) and options
    (`Opening`'s), awaited. Call `await store.open()` (or use `async with`) before the first
    operation when `auto_migrate` is on: it migrates, or with `read_only=True` checks, the
    schema.

    One store may be shared by every task of its event loop, not by several loops or threads: a
    call from another loop while its loop is open raises `EventLoopError` (its connections
    belong to that loop; once the loop is closed, or after `close()`, another may take it).
    """

    def _store_engine(
        self, url: str | URL | AsyncEngine, *, schema: str | None, read_only: bool
    ) -> AsyncEngine:
        return _async_store_engine(url, schema, read_only)

    def _opening(self, *, auto_migrate: bool) -> None:
        """Nothing yet: a constructor cannot await the migration, `open` does it."""
        self._auto_migrate = auto_migrate
        self._opened = False
        self._sync_engine: Engine | None = None
        self._on_loop: LoopConnection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_lock = threading.Lock()

    def _abandon(self) -> None:
        """Nothing to release: the engine connects on first use."""

    def _on_its_loop(self) -> None:
        """Bind the store to the running loop on first use; refuse any other loop while that
        one is open (its connections and locks would hang or fail there)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and running is self._loop:
            return
        with self._loop_lock:
            if running is not None and (self._loop is None or self._loop.is_closed()):
                self._loop = running
                return
        raise EventLoopError(
            "an AsyncSessionStore serves the tasks of one asyncio event loop, and this call "
            + (
                "comes from another loop (another thread's?) while the store's loop is open: "
                "make one store per loop (or thread), or close() the store before another loop "
                "takes it"
                if running is not None
                else "runs outside any asyncio loop (under trio?): call it from asyncio, or use "
                "a SessionStore (sync), which any thread or loop may share"
            )
        )

    async def open(self) -> AsyncSessionStore:
        """Bring the schema up to date, or check it is when read-only (once; later calls return
        at once)."""
        self._on_its_loop()
        if self._auto_migrate and not self._opened:
            try:
                with translate_database_errors("opening the store"):
                    if self.read_only:
                        await self._check_ready()
                    else:
                        await self._upgrade_if_needed()
                self._opened = True
                await self._complete(self._cleaning_on_open())
            except BaseException:
                await self.close()  # no connection left open behind a store that never opened
                raise
        self._opened = True
        return self

    async def _check_ready(self) -> None:
        """See `SessionStore`'s read_only: SQLite's check runs on its own driver, in a thread."""
        if self.backend.async_in_thread:
            await asyncio.to_thread(check_ready, self._sync())
            return
        async with self.engine.connect() as connection:
            await connection.run_sync(require_ready)

    async def _upgrade_if_needed(self) -> None:
        if self.backend.async_in_thread:  # SQLite: with foreign keys off, on its own driver
            await asyncio.to_thread(upgrade, self._sync(), only_if_needed=True)
            return
        async with self.engine.connect() as connection:
            if await connection.run_sync(is_current):
                return
        async with self.engine.connect() as connection:
            await connection.execution_options(**{WRITE: True})
            async with connection.begin():
                await connection.run_sync(migrate_in)

    async def close(self) -> None:
        """Release the engine's connections."""
        if self._on_loop is not None:
            await self._on_loop.close()
        await self.engine.dispose()
        if self._sync_engine is not None:
            dispose(self._sync_engine)
        self._loop = None  # another event loop may use the store now

    async def aclose(self) -> None:
        """Release the engine's connections (`close`, under the name asyncio code expects)."""
        await self.close()

    async def __aenter__(self) -> AsyncSessionStore:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @asynccontextmanager
    async def transaction(self, *, write: bool) -> AsyncIterator[AsyncConnection]:
        """A connection inside one transaction; writing ones take SQLite's write lock at once."""
        if write:
            self._writable("a writing transaction")
        async with self._connection(write=write) as connection, connection.begin():
            yield connection

    @asynccontextmanager
    async def _connection(self, *, write: bool) -> AsyncIterator[AsyncConnection]:
        """A connection of the store's, with its options (tenant, writing), no transaction
        begun; what is left uncommitted when it closes is rolled back."""
        if not self._opened:
            await self.open()
        async with self.engine.connect() as connection:
            options: dict[str, Any] = {TENANT: self.tenant}
            if write:
                options[WRITE] = True
            await connection.execution_options(**options)
            yield connection

    def _sync(self) -> Engine:
        """A sync engine on the same database (made once)."""
        if self._sync_engine is None:
            url = self.engine.url
            self._sync_engine = create_store_engine(
                url.set(drivername=url.get_backend_name()),
                schema=self.schema,
                read_only=self.read_only,
            )
            tenant_of_connections(self._sync_engine, self.tenant)
        return self._sync_engine

    async def _perform(self, request: Request) -> Any:
        """Carry out one request of an operation's program (see `operation`)."""
        self._on_its_loop()
        if isinstance(request, Run):
            return await self._run(request)
        if isinstance(request, Await):
            return await request.coroutine
        # Alembic and the read-only machinery speak the sync drivers' APIs: a sync engine of the
        # same database, in a worker thread.
        engine = self._sync()
        with translate_database_errors(request.action):
            return await asyncio.to_thread(request.call, engine)

    async def _run(self, request: Run[T]) -> T:
        """Run a plan: on SQLite, on its own driver (through aiosqlite every statement was a
        round trip to its thread, and an append took 10x the sync store's time), on the loop
        until it would wait or run long, then in a worker thread (see `handoff`); a plan that
        does file I/O as it goes, in a worker thread from the start. On PostgreSQL, the sync
        store's `run` in one of SQLAlchemy's greenlets over the asyncio connection: each of the
        driver's waits is awaited on the loop, and a call costs one greenlet, where the
        `AsyncConnection` API took one per step (connect, options, driver, close: an append
        cost 1.7x the sync store's CPU time, 1.3x so)."""
        plan, write, action = scoped(request.plan, self.tenant), request.write, request.action
        if not self._opened:
            await self.open()
        if self.backend.async_in_thread:
            if request.files:
                engine = self._sync()
                return await asyncio.to_thread(
                    sync_run, engine, plan, write=write, action=action, tenant=self.tenant
                )
            if self._on_loop is None:
                self._on_loop = LoopConnection(self._sync())
            return await self._on_loop.run(plan, write=write, action=action)
        try:
            return await greenlet_spawn(
                sync_run,
                self.engine.sync_engine,
                plan,
                write=write,
                action=action,
                tenant=self.tenant,
            )
        finally:  # a task waiting for a connection takes the one given back, in its turn
            await asyncio.sleep(0)  # (else a task calling in a loop took it again at once)

    async def session(self, session_id: str) -> AsyncSessionHandle:
        """A light handle on one session: it reads the head (one query), not the graph."""
        return AsyncSessionHandle(self, session_id, await self.head(session_id))


class AsyncSessionHandle(HandleBase, Asynchronous):
    """One session, through an AsyncSessionStore (see HandleBase)."""

    store: AsyncSessionStore

    def __init__(self, store: AsyncSessionStore, session_id: str, head: str | None) -> None:
        super().__init__(store, session_id, head)

    async def _complete(self, program: Program[T]) -> T:
        return await self.store._complete(program)
