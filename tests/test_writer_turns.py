"""SQLite's writers take turns through a lock file beside the database (`writer_turns`)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from memstore import AsyncSessionStore, SessionStore
from memstore.store import writer_turns

from .test_append import assert_one_chain, say


def _held_by_another(path: Path) -> bool:
    """Whether some other open file holds the lock: try to take it without waiting."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def test_a_writing_transaction_holds_the_turn_until_it_ends(
    sqlite_url: str, tmp_path: Path
) -> None:
    lock = tmp_path / "memstore.db-writers"
    with SessionStore(sqlite_url) as store:
        store.append("s", say("first"))
        assert lock.exists()
        assert not _held_by_another(lock)  # released at the commit
        with store.transaction(write=True):
            assert _held_by_another(lock)
        assert not _held_by_another(lock)
        with pytest.raises(RuntimeError), store.transaction(write=True):
            raise RuntimeError("rolled back")
        assert not _held_by_another(lock)
        with store.transaction(write=False):
            assert not _held_by_another(lock)  # readers take no turn


def test_an_async_writer_waits_for_its_turn_off_the_loop(sqlite_url: str, tmp_path: Path) -> None:
    """Another holds the turn: an async append waits for it in a thread while reads go on on
    the loop, then commits; its turn is released after."""
    SessionStore(sqlite_url).close()
    lock = tmp_path / "memstore.db-writers"
    holder = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)

    async def main() -> None:
        async with AsyncSessionStore(sqlite_url) as store:
            writer = asyncio.create_task(store.append("s", say("waited")))
            for _ in range(10):
                await asyncio.sleep(0.01)
                assert await store.head("s") is None
            assert not writer.done()
            fcntl.flock(holder, fcntl.LOCK_UN)
            await writer
            await store.append("s", say("and on the loop"))
        assert not _held_by_another(lock)

    try:
        asyncio.run(main())
    finally:
        os.close(holder)
    with SessionStore(sqlite_url) as store:
        assert_one_chain(store, "s", 2)


def test_a_writer_gives_up_its_wait_with_database_is_locked_and_lets_the_lock_go(
    tmp_path: Path,
) -> None:
    """A stuck holder never keeps a writer waiting forever: it gives up when its time is out,
    as SQLite's busy timeout does, and its waiting thread lets the lock go once it gets it."""
    lock = tmp_path / "db-writers"
    holder = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)
    info: dict[str, object] = {}
    try:
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            writer_turns.take(info, str(lock), 0.2)
        assert 0.2 <= time.monotonic() - started < 5
    finally:
        fcntl.flock(holder, fcntl.LOCK_UN)
        os.close(holder)
    deadline = time.monotonic() + 5
    while _held_by_another(lock):  # the given-up waiter takes it, then lets it go
        assert time.monotonic() < deadline, "the abandoned wait kept the lock"
        time.sleep(0.01)
    writer_turns.take(info, str(lock), 1.0)  # and the writer may take its turn again
    assert _held_by_another(lock)
    writer_turns.forget(info)
    assert not _held_by_another(lock)


def test_a_waiting_writer_gets_its_turn_when_the_holder_is_done(tmp_path: Path) -> None:
    lock = tmp_path / "db-writers"
    holder = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)
    info: dict[str, object] = {}
    waiting = threading.Thread(target=writer_turns.take, args=(info, str(lock), 30.0))
    waiting.start()
    time.sleep(0.1)  # past the quick tries: a thread waits in flock
    assert waiting.is_alive()
    fcntl.flock(holder, fcntl.LOCK_UN)
    os.close(holder)
    waiting.join(10)
    assert not waiting.is_alive()
    assert _held_by_another(lock)  # held through the connection's (new) file
    writer_turns.forget(info)
    assert not _held_by_another(lock)
