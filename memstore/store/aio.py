"""AsyncSessionStore: the same store and the same plans, on an asyncio engine.

Every operation is the plan `SessionStore` runs (see `plans`); only the driving is async.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Collection, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy.engine import URL, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from memstore.errors import InvalidArgumentError, MemstoreError, ReadOnlyStoreError
from memstore.graph import SessionGraph
from memstore.store import (
    compaction,
    exports,
    foreign,
    importing,
    plans,
    search,
    short_ids,
    sources,
    transfer,
)
from memstore.store.engine import (
    ASYNC_DRIVERS,
    BUSY_TIMEOUT_SECONDS,
    DEFAULT_URL,
    SCHEMA,
    WRITE,
    check_schema,
    configure_postgresql,
    configure_postgresql_lock_timeout,
    configure_sqlite,
    create_store_engine,
    driver_installed,
    parse_url,
    postgresql_connect_timeout,
    refuse_memory_sqlite,
    sqlite_read_uri,
)
from memstore.store.errors import translate_database_errors
from memstore.store.exports import ExportedFile, ExportFormat, ExportReport
from memstore.store.files import atomic_text_file
from memstore.store.handle import HandleBase
from memstore.store.migrate import check_ready, is_current, migrate_in, require_ready
from memstore.store.plans import (
    UNSET,
    Boundary,
    Plan,
    SessionInfo,
    Step,
    StoreStats,
    Unset,
    as_call,
)
from memstore.store.prepared import Prepared, PreparedRows
from memstore.store.readonly import (
    DEFAULT_MEMORY_MB,
    DEFAULT_QUERY_SECONDS,
    DEFAULT_TEMP_MB,
    QueryResult,
    run_read_only,
)
from memstore.store.search import SearchHit
from memstore.store.sync import drive as sync_drive
from memstore.store.sync import run as sync_run
from memstore.store.time_limits import DEFAULT_SEARCH_SECONDS, PROGRESS_STEPS, SqliteTimeLimit
from memstore.store.transfer import FileProgress, ImportReport, Progress
from memstore.types import (
    Clock,
    CompactionPolicy,
    Migrator,
    ModelCard,
    ModelInvoker,
    SessionNode,
    Turn,
    TurnLike,
)

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
    and `read_only` as for `create_store_engine`."""
    parsed = parse_url(url, ASYNC_DRIVERS)
    check_schema(parsed, schema)
    sqlite = parsed.get_backend_name() == "sqlite"
    if sqlite:
        refuse_memory_sqlite(parsed)
        kwargs.setdefault("connect_args", {}).setdefault("timeout", BUSY_TIMEOUT_SECONDS)
        if read_only:
            kwargs.setdefault("async_creator", _aiosqlite_reader(parsed))
    postgresql_connect_timeout(parsed, kwargs)
    with driver_installed(parsed):
        engine = create_async_engine(parsed, **kwargs)
    if sqlite:
        configure_sqlite(engine.sync_engine, read_only=read_only)
    else:
        configure_postgresql(engine.sync_engine, schema=schema, read_only=read_only)
        configure_postgresql_lock_timeout(engine.sync_engine)
        engine.sync_engine.update_execution_options(**{SCHEMA: schema})
    return engine


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
    asyncio connection under `connection`, if known), else through Core."""
    if isinstance(step, Boundary):  # only SQLite's imports, which run on the sync store's driver
        raise TypeError("a transaction boundary runs on a sync connection (use run_sync)")
    if isinstance(step, SqliteTimeLimit):  # aiosqlite's connection, under SQLAlchemy's
        aiosqlite: Any = (await connection.get_raw_connection()).driver_connection
        return await aiosqlite.set_progress_handler(step.handler, PROGRESS_STEPS)
    if isinstance(step, tuple) and isinstance(step[0], Prepared):
        if step[0].streamed:  # export and import plans run on the sync connection (run_sync)
            raise TypeError("a streamed statement runs on a sync connection (use run_sync)")
        if driver is not None:
            return await step[0].run_async(driver, connection.dialect, step[1])
        compiled = step[0].compiled(connection.dialect)
        result = await connection.exec_driver_sql(compiled.sql, compiled.driver_params(step[1]))
        rows = (tuple(row) for row in result) if result.returns_rows else ()
        return PreparedRows(rows, result.rowcount)
    return await connection.execute(*as_call(step))


async def drive(plan: Plan[T], connection: AsyncConnection) -> T:
    """Run a plan's statements on `connection`, feeding each result back to the plan."""
    driver = None
    if connection.dialect.name == "postgresql":  # psycopg: prepared statements skip SQLAlchemy
        driver = (await connection.get_raw_connection()).driver_connection
    try:
        step = next(plan)
        while True:
            try:
                result = await execute(connection, step, driver)
            except BaseException as error:  # as the sync store's `drive`
                step = plan.throw(error)
            else:
                step = plan.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


class AsyncSessionStore:
    """The async twin of SessionStore: the same methods and options, awaited. Call
    `await store.open()` (or use `async with`) before the first operation when `auto_migrate`
    is on: it migrates, or with `read_only=True` checks, the schema.

    One store may be shared by every task of its event loop (not by several loops or threads).
    """

    def __init__(
        self,
        url: str | URL | AsyncEngine = DEFAULT_URL,
        *,
        migrators: Sequence[Migrator] = (),
        auto_migrate: bool = True,
        read_only: bool = False,
        schema: str | None = None,
    ) -> None:
        self.engine = _async_store_engine(url, schema, read_only)
        self.schema: str | None = self.engine.sync_engine.get_execution_options().get(SCHEMA)
        self.read_only = read_only
        self.migrators = tuple(migrators)
        self.dialect = self.engine.dialect.name
        self._auto_migrate = auto_migrate
        self._opened = False
        self._sync_engine: Engine | None = None

    async def open(self) -> AsyncSessionStore:
        """Bring the schema up to date, or check it is when read-only (once; later calls return
        at once)."""
        if self._auto_migrate and not self._opened:
            try:
                with translate_database_errors("opening the store"):
                    if self.read_only:
                        await self._check_ready()
                    else:
                        await self._upgrade_if_needed()
                self._opened = True
                if not self.read_only and self.dialect == "sqlite":
                    with importing.reported_if_not_cleaned():
                        await self.clean_abandoned_imports()
            except BaseException:
                await self.close()  # no connection left open behind a store that never opened
                raise
        self._opened = True
        return self

    async def clean_abandoned_imports(self, *, force: Collection[str] = ()) -> list[str]:
        """See `SessionStore.clean_abandoned_imports`."""
        plan = importing.abandoned_imports(self.dialect, force)
        found = await self._run(plan, write=False, action="looking for abandoned imports")
        if not found:
            return []
        cleaning = importing.clean_abandoned(self.dialect, found)
        return await self._run(cleaning, write=True, action=importing.deleting(found))

    async def _check_ready(self) -> None:
        """See `SessionStore`'s read_only: SQLite's check runs on its own driver, in a thread."""
        if self.dialect == "sqlite":
            await asyncio.to_thread(check_ready, self._sync())
            return
        async with self.engine.connect() as connection:
            await connection.run_sync(require_ready)

    def _writable(self, action: str) -> None:
        """Refuse a write through a store opened for reading only."""
        if self.read_only:
            raise ReadOnlyStoreError(
                f"{action}: this store was opened read-only (read_only=True); open it without "
                "read_only to write"
            )

    async def _upgrade_if_needed(self) -> None:
        async with self.engine.connect() as connection:
            if await connection.run_sync(is_current):
                return
        async with self.engine.connect() as connection:
            await connection.execution_options(**{WRITE: True})
            async with connection.begin():
                await connection.run_sync(migrate_in)

    async def close(self) -> None:
        """Release the engine's connections."""
        await self.engine.dispose()
        if self._sync_engine is not None:
            self._sync_engine.dispose()

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
        if not self._opened:
            await self.open()
        async with self.engine.connect() as connection:
            if write:
                await connection.execution_options(**{WRITE: True})
            async with connection.begin():
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
        return self._sync_engine

    async def _run(self, plan: Plan[T], *, write: bool, action: str) -> T:
        if self.dialect == "sqlite":
            return await self._in_thread(plan, write=write, action=action)
        with translate_database_errors(action):
            async with self.transaction(write=write) as connection:
                return await drive(plan, connection)

    async def _in_thread(self, plan: Plan[T], *, write: bool, action: str) -> T:
        """Run a plan on SQLite's own driver, the whole transaction in a worker thread: through
        aiosqlite every statement was a round trip to its thread, and an append took 10x the
        sync store's time. The event loop waits on one thread hop per operation instead."""
        if write:
            self._writable(action)
        if not self._opened:
            await self.open()
        return await asyncio.to_thread(sync_run, self._sync(), plan, write=write, action=action)

    async def append_node(
        self, session_id: str, node: SessionNode, *, expected_head: str | Unset | None = UNSET
    ) -> None:
        """See `SessionStore.append_node`."""
        plan = plans.append_node(self.dialect, session_id, node, expected_head)
        await self._run(plan, write=True, action=f"appending to session {session_id!r}")

    async def append(
        self,
        session_id: str,
        turn: TurnLike,
        *,
        expected_head: str | Unset | None = UNSET,
        created_at: int | None = None,
        parent: str | Unset = UNSET,
    ) -> SessionNode:
        """See `SessionStore.append`."""
        (node,) = await self.append_many(
            session_id, [turn], expected_head=expected_head, created_at=created_at, parent=parent
        )
        return node

    async def append_many(
        self,
        session_id: str,
        turns: Iterable[TurnLike],
        *,
        expected_head: str | Unset | None = UNSET,
        created_at: int | None = None,
        parent: str | Unset = UNSET,
    ) -> list[SessionNode]:
        """See `SessionStore.append_many`."""
        plan = plans.append_turns(
            self.dialect, session_id, turns, expected_head, created_at, parent
        )
        return await self._run(plan, write=True, action=f"appending to session {session_id!r}")

    async def load_session(self, session_id: str) -> SessionGraph:
        """See `SessionStore.load_session`."""
        plan = plans.load_session(session_id)
        return await self._run(plan, write=False, action="loading a session")

    async def list_sessions(self) -> list[str]:
        """See `SessionStore.list_sessions`."""
        return await self._run(plans.list_session_ids(), write=False, action="listing sessions")

    async def load_path(
        self, session_id: str, leaf: str | None = None, *, last: int | None = None
    ) -> list[Turn]:
        """See `SessionStore.load_path`."""
        plan = plans.load_path(self.dialect, session_id, leaf, last)
        return await self._run(plan, write=False, action="loading a path")

    async def load_path_nodes(
        self, session_id: str, leaf: str | None = None, *, last: int | None = None
    ) -> list[SessionNode]:
        """See `SessionStore.load_path_nodes`."""
        plan = plans.load_path_nodes(self.dialect, session_id, leaf, last)
        return await self._run(plan, write=False, action="loading a path")

    async def head(self, session_id: str) -> str | None:
        """See `SessionStore.head`."""
        return await self._run(plans.head(session_id), write=False, action="reading a head")

    async def resolve_node_id(self, session_id: str, node_id: str) -> str:
        """See `SessionStore.resolve_node_id`."""
        plan = plans.resolve_node_id(session_id, node_id)
        return await self._run(plan, write=False, action="looking up a node id")

    async def short_node_ids(self, session_id: str, node_ids: Iterable[str]) -> dict[str, str]:
        """See `SessionStore.short_node_ids`."""
        plan = short_ids.short_node_ids(session_id, node_ids)
        return await self._run(plan, write=False, action="shortening node ids")

    async def sessions(
        self,
        *,
        tag: str | None = None,
        title_contains: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int | None = None,
    ) -> list[SessionInfo]:
        """See `SessionStore.sessions`."""
        plan = plans.list_sessions(
            tag=tag, title_contains=title_contains, metadata=metadata, limit=limit
        )
        return await self._run(plan, write=False, action="listing sessions")

    async def session_info(self, session_id: str) -> SessionInfo:
        """See `SessionStore.session_info`."""
        plan = plans.session_info(session_id)
        return await self._run(plan, write=False, action="reading a session")

    async def update_session(
        self,
        session_id: str,
        *,
        title: str | Unset | None = UNSET,
        tags: Sequence[str] | Unset = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> None:
        """See `SessionStore.update_session`."""
        plan = plans.update_session(
            self.dialect, session_id, title=title, tags=tags, metadata=metadata
        )
        await self._run(plan, write=True, action=f"updating session {session_id!r}")

    async def delete_session(self, session_id: str) -> bool:
        """See `SessionStore.delete_session`."""
        plan = plans.delete_session(session_id)
        return await self._run(plan, write=True, action=f"deleting session {session_id!r}")

    async def fork_session(self, source_id: str, leaf: str | None, new_id: str) -> str | None:
        """See `SessionStore.fork_session`."""
        plan = plans.fork_session(self.dialect, source_id, leaf, new_id)
        return await self._run(plan, write=True, action=f"forking session {source_id!r}")

    async def compact_session(
        self,
        session_id: str,
        model_card: ModelCard,
        invoker: ModelInvoker,
        policy: CompactionPolicy | None = None,
        *,
        clock: Clock | None = None,
    ) -> compaction.CompactionResult:
        """See `SessionStore.compact_session`."""
        read = compaction.read_head_path(self.dialect, session_id)
        head, path = await self._run(read, write=False, action=f"reading session {session_id!r}")
        draft = await compaction.draft_branch(
            session_id, head, path, model_card, invoker, policy, clock
        )
        if draft.nodes:
            branch = compaction.append_branch(self.dialect, session_id, draft.nodes, head)
            await self._run(branch, write=True, action=f"compacting session {session_id!r}")
        return draft.result

    async def _run_blocking(self, plan: Plan[T], *, write: bool, action: str) -> T:
        """Drive a plan that does file I/O as it goes (import, export) on the sync side of the
        connection, in SQLAlchemy's worker greenlet: the same plan the sync store runs."""
        if self.dialect == "sqlite":
            return await self._in_thread(plan, write=write, action=action)
        with translate_database_errors(action):
            async with self.transaction(write=write) as connection:
                return await connection.run_sync(lambda sync: sync_drive(plan, sync))

    async def import_jsonl(
        self,
        path: str | os.PathLike[str],
        *,
        session_id: str | None = None,
        verify: bool = True,
        keep_mismatched: bool = False,
        progress: Progress | None = None,
    ) -> ImportReport:
        """See `SessionStore.import_jsonl`."""
        report = ImportReport()
        plans_ = transfer.import_plans(
            self.dialect,
            Path(path),
            session_id,
            migrators=self.migrators,
            verify=verify,
            keep_mismatched=keep_mismatched,
            progress=progress,
        )
        for file, plan in plans_:
            report.files.append(
                await self._run_blocking(plan, write=True, action=f"importing {file}")
            )
        return report

    async def import_files(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        source: str = "auto",
        session_id: str | None = None,
        verify: bool = True,
        keep_mismatched: bool = False,
        file_progress: FileProgress | None = None,
    ) -> ImportReport:
        """See `SessionStore.import_files`."""
        report = ImportReport()
        for file, plan in sources.import_plans(
            self.dialect,
            paths,
            source=source,
            session_id=session_id,
            migrators=self.migrators,
            verify=verify,
            keep_mismatched=keep_mismatched,
            file_progress=file_progress,
        ):
            try:
                done = await self._run_blocking(plan, write=True, action=f"importing {file}")
            except MemstoreError as exc:
                report.failures.append(exc)
            else:
                report.files.append(done)
        return report

    async def import_file(
        self,
        path: str | os.PathLike[str],
        *,
        source: str = "jsonl",
        session_id: str | None = None,
        verify: bool = True,
        keep_mismatched: bool = False,
        progress: Progress | None = None,
    ) -> ImportReport:
        """See `SessionStore.import_file`."""
        if source == "jsonl":
            return await self.import_jsonl(
                path,
                session_id=session_id,
                verify=verify,
                keep_mismatched=keep_mismatched,
                progress=progress,
            )
        return await self.import_foreign(path, agent=source, progress=progress)

    async def import_pi(
        self, path: str | os.PathLike[str], *, progress: Progress | None = None
    ) -> ImportReport:
        """See `SessionStore.import_pi`."""
        return await self.import_foreign(path, agent="pi", progress=progress)

    async def import_claude_code(
        self, path: str | os.PathLike[str], *, progress: Progress | None = None
    ) -> ImportReport:
        """See `SessionStore.import_claude_code`."""
        return await self.import_foreign(path, agent="claude-code", progress=progress)

    async def import_foreign(
        self,
        path: str | os.PathLike[str],
        *,
        agent: str = "auto",
        progress: Progress | None = None,
    ) -> ImportReport:
        """See `SessionStore.import_foreign`."""
        report = ImportReport()
        for file, plan in foreign.foreign_import_plans(
            self.dialect, Path(path), agent, progress=progress
        ):
            report.files.append(
                await self._run_blocking(plan, write=True, action=f"importing {file}")
            )
        return report

    async def export_jsonl(self, session_id: str, path: str | os.PathLike[str]) -> int:
        """See `SessionStore.export_jsonl`."""
        with atomic_text_file(Path(path)) as out:
            plan = transfer.export_session(session_id, out)
            action = f"exporting session {session_id!r}"
            return await self._run_blocking(plan, write=False, action=action)

    async def export_session(
        self,
        session_id: str,
        path: str | os.PathLike[str],
        *,
        format: ExportFormat | str | None = None,
        agent: str | None = None,
    ) -> ExportedFile:
        """See `SessionStore.export_session`."""
        target = Path(path)
        form = ExportFormat.of(format, target)
        exports.check_agent(agent, form)
        plan = exports.export_plan(session_id, target, form, agent=agent)
        action = f"exporting session {session_id!r}"
        return await self._run_blocking(plan, write=False, action=action)

    async def export_sessions(
        self,
        directory: str | os.PathLike[str] = ".",
        *,
        format: ExportFormat | str = ExportFormat.JSONL,
        agent: str | None = None,
    ) -> ExportReport:
        """See `SessionStore.export_sessions`."""
        program = exports.export_program(Path(directory), ExportFormat.of(format), agent)
        try:
            call = next(program)
            while True:
                try:
                    result = await self._run_blocking(call.plan, write=False, action=call.action)
                except MemstoreError as exc:
                    call = program.throw(exc)
                else:
                    call = program.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def stats(self, *, top: int = 10) -> StoreStats:
        """See `SessionStore.stats`."""
        return await self._run(plans.store_stats(top), write=False, action="reading statistics")

    async def index_search_backlog(self) -> int:
        """See `SessionStore.index_search_backlog`."""
        self._writable("indexing the full-text backlog")
        if self.dialect != "sqlite":
            return 0
        return await self._run(plans.index_backlog(), write=True, action="indexing for search")

    async def _index_search_backlog_if_any(self) -> None:
        """Before a search, a store that can write indexes the backlog: every turn it finds is
        then ranked by the index (a read-only store matches the backlog in memory)."""
        if (
            self.dialect == "sqlite"
            and not self.read_only
            and await self._run(plans.backlog_waiting(), write=False, action="searching")
        ):
            await self.index_search_backlog()

    async def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        limit: int = 20,
        timeout: float | None = DEFAULT_SEARCH_SECONDS,
    ) -> list[SearchHit]:
        """See `SessionStore.search`."""
        await self._index_search_backlog_if_any()
        plan = search.search(
            self.dialect, query, session_id=session_id, limit=limit, timeout=timeout
        )
        return await self._run(plan, write=False, action="searching")

    async def read_only_query(
        self,
        sql: str,
        *,
        limit: int = 1000,
        timeout: float = DEFAULT_QUERY_SECONDS,
        read_url: str | None = None,
        max_temp_mb: float = DEFAULT_TEMP_MB,
        max_memory_mb: float = DEFAULT_MEMORY_MB,
    ) -> QueryResult:
        """See `SessionStore.read_only_query`."""
        # The read-only machinery speaks the sync drivers' APIs: run it on a sync engine of
        # the same database, in a worker thread.
        engine = self._sync()
        with translate_database_errors("running a query"):
            return await asyncio.to_thread(
                run_read_only,
                engine,
                sql,
                limit=limit,
                timeout=timeout,
                read_url=read_url,
                max_temp_mb=max_temp_mb,
                max_memory_mb=max_memory_mb,
            )

    async def session(self, session_id: str) -> AsyncSessionHandle:
        """See `SessionStore.session`."""
        return AsyncSessionHandle(self, session_id, await self.head(session_id))


class AsyncSessionHandle(HandleBase):
    """One session, through an AsyncSessionStore (see HandleBase)."""

    def __init__(self, store: AsyncSessionStore, session_id: str, head: str | None) -> None:
        super().__init__(session_id, head)
        self.store = store

    async def append(
        self, turn: TurnLike, *, expected_head: str | Unset | None = UNSET
    ) -> SessionNode:
        """See `SessionHandle.append`."""
        (node,) = await self.append_many([turn], expected_head=expected_head)
        return node

    async def append_many(
        self, turns: Iterable[TurnLike], *, expected_head: str | Unset | None = UNSET
    ) -> list[SessionNode]:
        """See `SessionHandle.append_many`."""
        nodes = await self.store.append_many(
            self.session_id, turns, expected_head=expected_head, parent=self._fork_parent()
        )
        return self._moved_to(nodes)

    async def refresh(self) -> str | None:
        """See `SessionHandle.refresh`."""
        return self._seen(await self.store.head(self.session_id))

    async def path(self, *, last: int | None = None) -> list[Turn]:
        """See `SessionHandle.path`."""
        if self.head is None:
            return []
        return await self.store.load_path(self.session_id, self.head, last=last)

    async def load_graph(self) -> SessionGraph:
        """See `SessionHandle.load_graph`."""
        return await self.store.load_session(self.session_id)
