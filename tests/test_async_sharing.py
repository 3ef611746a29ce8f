"""The async store shared as the sync one is (threads, tasks, processes), on SQLite and
PostgreSQL; cancelled tasks; and SQLite's transactions that start on the event loop and move to a
thread when they would wait or run long (`memstore.store.handoff`)."""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from memstore import AsyncSessionStore, SessionStore
from memstore.store import handoff
from memstore.store.aio import create_async_store_engine

from .test_append import assert_one_chain, say

THREADS = 4
THREAD_APPENDS = 20


def test_threads_each_with_an_async_store_append_exact_counts_and_linear_chains(
    database_url: str,
) -> None:
    """4 threads, each with its own event loop and AsyncSessionStore on one database, append to
    a private session and to a shared one."""
    SessionStore(database_url).close()  # migrate once, up front
    failures: list[BaseException] = []

    async def work(worker: int) -> None:
        async with AsyncSessionStore(database_url) as store:
            handle = await store.session("shared")
            for n in range(THREAD_APPENDS):
                await store.append(f"private-{worker}", say(f"{worker}:{n}"))
                if n % 2:
                    await handle.append(say(f"shared {worker}:{n}"))
                else:
                    await store.append("shared", say(f"shared {worker}:{n}"))

    def run(worker: int) -> None:
        try:
            asyncio.run(work(worker))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(worker,)) for worker in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    with SessionStore(database_url) as store:
        for worker in range(THREADS):
            assert_one_chain(store, f"private-{worker}", THREAD_APPENDS)
        assert_one_chain(store, "shared", THREADS * THREAD_APPENDS)


TASKS = 20
TASK_APPENDS = 4


def test_tasks_sharing_one_sync_store_through_threads_append_exact_counts(
    database_url: str,
) -> None:
    """20 tasks share one SessionStore through `asyncio.to_thread`, as an asyncio application
    that keeps the sync store would."""

    async def work(store: SessionStore, worker: int) -> None:
        for n in range(TASK_APPENDS):
            await asyncio.to_thread(store.append, f"private-{worker}", say(f"{worker}:{n}"))
            await asyncio.to_thread(store.append, "shared", say(f"shared {worker}:{n}"))

    with SessionStore(database_url) as store:

        async def main() -> None:
            await asyncio.gather(*(work(store, worker) for worker in range(TASKS)))

        asyncio.run(main())
        for worker in range(TASKS):
            assert_one_chain(store, f"private-{worker}", TASK_APPENDS)
        assert_one_chain(store, "shared", TASKS * TASK_APPENDS)


PROCESSES = 4
PROCESS_APPENDS = 25


def _append_async(url: str, worker: int) -> None:
    async def main() -> None:
        async with AsyncSessionStore(url) as store:
            for n in range(PROCESS_APPENDS):
                await store.append("at-head", say(f"worker {worker} turn {n}"))
                await store.append(f"private-{worker}", say(f"{n}"))

    asyncio.run(main())


@pytest.mark.slow
def test_processes_with_async_stores_appending_at_the_head_make_one_linear_chain(
    database_url: str,
) -> None:
    SessionStore(database_url).close()  # migrate once, up front
    context = multiprocessing.get_context("spawn")
    with context.Pool(PROCESSES) as pool:
        pool.starmap(_append_async, [(database_url, w) for w in range(PROCESSES)])
    with SessionStore(database_url) as store:
        path = assert_one_chain(store, "at-head", PROCESSES * PROCESS_APPENDS)
        texts = sorted(node.turn.to_json()["blocks"][0]["text"] for node in path)
        expected = sorted(
            f"worker {w} turn {n}" for w in range(PROCESSES) for n in range(PROCESS_APPENDS)
        )
        assert texts == expected
        for worker in range(PROCESSES):
            assert_one_chain(store, f"private-{worker}", PROCESS_APPENDS)


# --- cancellation --------------------------------------------------------------------------------

BATCH = 3
CANCELLED_TASKS = 24


def test_cancelled_tasks_leave_nothing_half_written(database_url: str) -> None:
    """Tasks appending batches of 3 turns (and one of 400, which SQLite moves to a thread) are
    cancelled at every point of their run: each batch is stored whole or not at all, every
    session is one linear chain, and the store goes on working."""

    async def work(store: AsyncSessionStore, worker: int, started: asyncio.Event) -> None:
        for n in itertools.count():
            turns = [say(f"{worker}:{n}:{k}") for k in range(BATCH)]
            await store.append_many(f"s{worker % 4}", turns)
            started.set()  # one batch committed: from now on it may be cancelled anywhere

    async def big(store: AsyncSessionStore) -> None:
        await store.append_many("big", [say(f"big {k}") for k in range(400)])

    async def main() -> None:
        async with AsyncSessionStore(database_url) as store:
            started = [asyncio.Event() for _ in range(CANCELLED_TASKS)]
            tasks = [
                asyncio.create_task(work(store, worker, started[worker]))
                for worker in range(CANCELLED_TASKS)
            ]
            await asyncio.gather(*(event.wait() for event in started))
            tasks.append(asyncio.create_task(big(store)))
            for index, task in enumerate(tasks):  # a different moment for each
                for _ in range(3 * index):
                    await asyncio.sleep(0)
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            assert all(task.done() for task in tasks)
            await store.append("after", say("still working"))

    asyncio.run(main())
    with SessionStore(database_url) as store:
        batches: dict[str, list[str]] = {}
        for session in ("s0", "s1", "s2", "s3"):
            path = store.load_path_nodes(session)
            if path:
                assert_one_chain(store, session, len(path))
            for node in path:
                worker, n, k = node.turn.to_json()["blocks"][0]["text"].split(":")
                batches.setdefault(f"{worker}:{n}", []).append(k)
        assert len(batches) >= CANCELLED_TASKS  # each committed one before it was cancelled
        assert all(ks == ["0", "1", "2"] for ks in batches.values()), batches
        assert len(store.load_path_nodes("big")) in (0, 400)
        assert_one_chain(store, "after", 1)


# --- more tasks than connections --------------------------------------------------------------

POOL = 2
TASKS = 6


def test_tasks_waiting_for_a_connection_each_get_one_in_turn(postgres_url: str) -> None:
    """More tasks than the pool has connections, each appending as fast as it can: a connection
    given back goes to a task waiting for one, not back to the task that gave it, which would
    keep it while the others time out in the pool."""

    async def main() -> list[int]:
        engine = create_async_store_engine(
            postgres_url, pool_size=POOL, max_overflow=0, pool_timeout=10
        )
        appended = [0] * TASKS

        async def work(store: AsyncSessionStore, worker: int) -> None:
            while min(appended) < 3 and sum(appended) < 1000:
                await store.append(f"s{worker}", say(f"{worker}:{appended[worker]}"))
                appended[worker] += 1

        async with AsyncSessionStore(engine) as store:
            await asyncio.gather(*(work(store, worker) for worker in range(TASKS)))
        return appended

    assert min(asyncio.run(main())) >= 3


# --- SQLite: on the loop, or in a thread ----------------------------------------------------------


def test_a_writer_that_would_wait_moves_to_a_thread_and_the_loop_stays_free(
    sqlite_url: str, tmp_path: Path
) -> None:
    """Another connection holds the write lock: an append waits for it in a thread (it does not
    fail), while reads on the loop go on; it commits once the lock is free."""
    SessionStore(sqlite_url).close()
    blocker = sqlite3.connect(tmp_path / "memstore.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")

    async def main() -> None:
        async with AsyncSessionStore(sqlite_url) as store:
            writer = asyncio.create_task(store.append("s", say("waited")))
            for _ in range(20):
                await asyncio.sleep(0.01)
                assert await store.head("s") is None  # read on the loop, the writer waiting
            assert not writer.done()
            blocker.execute("COMMIT")
            node = await writer
            assert await store.head("s") == node.id

    try:
        asyncio.run(main())
    finally:
        blocker.close()


def test_transactions_start_on_the_loop_and_long_ones_finish_in_a_thread(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within its budget an append commits on the loop (no thread); past it, an append_many
    moves to one; either way each is whole."""
    threads: list[str] = []
    finish = handoff.LoopConnection._finish

    def finishing(self: Any, plan: Any, action: str) -> Any:
        threads.append(threading.current_thread().name)
        return finish(self, plan, action)

    monkeypatch.setattr(handoff.LoopConnection, "_finish", finishing)

    async def main() -> None:
        async with AsyncSessionStore(sqlite_url) as store:
            monkeypatch.setattr(handoff, "LOOP_BUDGET_SECONDS", 60.0)  # a busy machine's pauses
            for n in range(5):
                await store.append("s", say(f"short {n}"))
            # (a fresh file's first BEGIN may find SQLite briefly busy, and move: not all five)
            assert len(threads) < 5
            before = len(threads)
            monkeypatch.setattr(handoff, "LOOP_BUDGET_SECONDS", 0.0)
            await store.append_many("s", [say(f"long {k}") for k in range(50)])
            assert threads[before:] == ["memstore-sqlite-handoff"]
            assert threading.current_thread().name not in threads

    asyncio.run(main())
    with SessionStore(sqlite_url) as store:
        assert_one_chain(store, "s", 55)
