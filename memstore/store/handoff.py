"""SQLite's transactions for the async store: on the event loop, handed to a thread when they
would wait or run long.

A worker-thread hop per operation (`asyncio.to_thread`) cost about 140 µs, most of an append's
time: the two thread wake-ups, which a busy machine makes longer still. But most of the store's
transactions are short (an append, a head, a small session) and, on SQLite in WAL mode, never
wait for one another's readers. So a transaction starts on the loop itself, on a connection kept
for it (`LoopConnection`), which does not wait: its busy timeout is 0. The rest of the plan, on
that connection and in that transaction, moves to a worker thread (with the usual busy timeout)
as soon as it

- would wait: a statement finds the database locked (another writer holds the write lock);
- has run for `LOOP_BUDGET_SECONDS` on the loop (a large load, a compaction): checked between
  statements, so one statement's time is the most the loop waits;
- commits part-way, reads or writes files, or runs under a time limit (imports, exports,
  searches): these start in the thread.

A plan on the loop runs with no `await` in it, so a task's cancellation lands before it or after
its commit, never half-way; a plan in the thread ends in its commit or its rollback there, even
when the task awaiting it is cancelled. The loop's connection never checkpoints the WAL itself
(a checkpoint writes and syncs megabytes): every `CHECKPOINT_EVERY` commits on the loop, a
passive checkpoint runs in a thread instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Generator
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine

from memstore.store import writer_turns
from memstore.store.engine import BUSY_TIMEOUT_SECONDS, WAL_CHECKPOINT_PAGES, WRITE
from memstore.store.errors import translate_database_errors
from memstore.store.plans import Boundary, Plan, Step
from memstore.store.prepared import Prepared
from memstore.store.sync import drive, execute, run
from memstore.store.time_limits import SqliteTimeLimit

__all__ = ["LOOP_BUDGET_SECONDS", "LoopConnection"]

T = TypeVar("T")

LOOP_BUDGET_SECONDS = 0.002
"""How long a transaction runs on the event loop before the rest of it moves to a thread."""
CHECKPOINT_EVERY = WAL_CHECKPOINT_PAGES // 40
"""Commits on the loop between two passive checkpoints in a thread (an append writes about 20
pages: about as often as another connection's automatic checkpoint would run)."""
_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _would_wait(error: BaseException) -> bool:
    """SQLite answered "database is locked" (busy timeout 0): the statement did nothing."""
    cause = getattr(error, "orig", error)
    if isinstance(cause, BlockingIOError):  # another writer's turn (see writer_turns)
        return True
    code = getattr(cause, "sqlite_errorcode", None)
    return isinstance(cause, sqlite3.OperationalError) and code is not None and code & 0xFF in _BUSY


def _threaded(step: Step) -> bool:
    """A step that does not run on the loop: a commit part-way (an import's chunks, with their
    pauses), a time limit (a search that may run seconds), a streamed statement (files)."""
    if isinstance(step, Boundary | SqliteTimeLimit):
        return True
    return isinstance(step, tuple) and isinstance(step[0], Prepared) and step[0].streamed


def _resumed(plan: Plan[T], step: Step) -> Generator[Step, Any, T]:
    """The rest of `plan`, which has yielded `step` and waits for its result."""
    try:
        while True:
            try:
                result = yield step
            except BaseException as error:
                step = plan.throw(error)
            else:
                step = plan.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _in_a_thread(call: Callable[[], T]) -> asyncio.Future[T]:
    """`call()` in a new thread, not the loop's executor: a transaction moved there holds the
    write lock, so it must not queue behind the executor's threads that wait for that lock."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.cancelled():  # the task was cancelled: the transaction ended all the same
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def target() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = call()
        except BaseException as raised:  # handed to the awaiting task
            error = raised
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody awaits the result
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=target, name="memstore-sqlite-handoff").start()
    return future


class LoopConnection:
    """The connection an async store's SQLite transactions start on, on the event loop."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._connection: Connection | None = None
        self._in_thread = False
        """The connection is in a thread, finishing a transaction moved there."""
        self._commits = 0
        self._checkpoint: asyncio.Task[None] | None = None

    def _driver(self) -> Any:
        assert self._connection is not None
        return self._connection.connection.driver_connection

    def _open(self) -> Connection:
        if self._connection is None:
            self._connection = self.engine.connect()
            self._connection.connection.info[writer_turns.NO_WAIT] = True
            self._driver().execute("PRAGMA wal_autocheckpoint = 0")
            self._driver().execute("PRAGMA busy_timeout = 0")
        return self._connection

    async def run(self, plan: Plan[T], *, write: bool, action: str) -> T:
        """Run `plan` in a transaction: on the loop as far as it can go, then in a thread."""
        if self._in_thread:  # another task's transaction holds it: a pooled one, in a thread
            return await asyncio.to_thread(self._run_pooled, plan, write, action)
        with translate_database_errors(action):
            connection = self._open()
            connection.execution_options(**{WRITE: write})
            started = time.perf_counter()
            try:
                connection.begin()
            except BaseException as error:
                self._end(connection.rollback)
                if not _would_wait(error):
                    raise
                return await asyncio.to_thread(self._run_pooled, plan, write, action)
            try:
                step = next(plan)
                while not _threaded(step):
                    try:
                        result = execute(connection, step)
                    except BaseException as error:
                        if _would_wait(error):
                            break  # the same step, in the thread
                        step = plan.throw(error)
                    else:
                        step = plan.send(result)
                    if time.perf_counter() - started > LOOP_BUDGET_SECONDS:
                        break
            except StopIteration as done:
                self._end(connection.commit)
                if write:
                    self._committed()
                return done.value  # type: ignore[no-any-return]
            except BaseException:
                self._end(connection.rollback)
                raise
        self._in_thread = True
        return await _in_a_thread(lambda: self._finish(_resumed(plan, step), action))

    def _finish(self, plan: Plan[T], action: str) -> T:
        """In a thread: the rest of a transaction begun on the loop, waiting as a writer does."""
        connection = self._connection
        assert connection is not None
        driver = self._driver()
        info = connection.connection.info
        try:
            with translate_database_errors(action):
                driver.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
                info[writer_turns.NO_WAIT] = False  # an import's next chunk waits its turn
                try:
                    result = drive(plan, connection)
                    self._end(connection.commit)
                    return result
                except BaseException:
                    self._end(connection.rollback)
                    raise
        finally:
            info[writer_turns.NO_WAIT] = True
            driver.execute("PRAGMA busy_timeout = 0")
            self._in_thread = False

    def _end(self, end: Callable[[], None]) -> None:
        """Commit or roll back, then let the next writer in (see `writer_turns`)."""
        assert self._connection is not None
        try:
            end()
        finally:
            writer_turns.release(self._connection.connection.info)

    def _run_pooled(self, plan: Plan[T], write: bool, action: str) -> T:
        """In a thread, a transaction on a connection of the engine's pool (as `SessionStore`)."""
        return run(self.engine, plan, write=write, action=action)

    def _committed(self) -> None:
        """Count a commit on the loop; every CHECKPOINT_EVERY, a passive checkpoint in a thread."""
        self._commits += 1
        loop = asyncio.get_running_loop()
        if self._checkpoint is not None and self._checkpoint.get_loop() is not loop:
            self._checkpoint = None  # an earlier loop's, closed before it ran (see EventLoopError)
        if self._commits % CHECKPOINT_EVERY or self._checkpoint is not None:
            return
        self._checkpoint = loop.create_task(asyncio.to_thread(self._checkpoint_wal))
        self._checkpoint.add_done_callback(self._checkpointed)

    def _checkpoint_wal(self) -> None:
        with self.engine.connect() as connection:
            driver: Any = connection.connection.driver_connection
            driver.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _checkpointed(self, task: asyncio.Task[None]) -> None:
        self._checkpoint = None
        if not task.cancelled():
            task.exception()  # a checkpoint that failed is retried CHECKPOINT_EVERY commits on

    async def close(self) -> None:
        """Wait for a checkpoint under way; close the connection (once no thread holds it)."""
        checkpoint, self._checkpoint = self._checkpoint, None
        if checkpoint is not None and checkpoint.get_loop() is asyncio.get_running_loop():
            await asyncio.wait([checkpoint])
        while self._in_thread:
            await asyncio.sleep(0.001)
        if self._connection is not None:
            self._connection.close()
            self._connection = None
