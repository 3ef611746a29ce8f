"""SQLite's writers take turns through a lock file beside the database (`writer_turns`)."""

from __future__ import annotations

import asyncio
import fcntl
import os
from pathlib import Path

import pytest

from memstore import AsyncSessionStore, SessionStore

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
