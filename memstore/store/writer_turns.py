"""SQLite's writers take turns through a lock file, not through SQLite's busy handler.

SQLite lets one writer in at a time; one that finds the write lock taken sleeps and retries,
sleeping longer each time (1, 2, 5, ... 100 ms). With 8 processes appending at once, most
appends took half a millisecond and the unlucky ones, asleep while others came and went, most of
a second (p99 1,500x p50). So before `BEGIN IMMEDIATE` a memstore writer takes an exclusive
`flock` on a file beside the database (`<database>-writers`): the kernel wakes the next waiter
as soon as the holder is done, and SQLite's lock is then free. A waiter gives up with "database
is locked" when SQLite's busy timeout would have (a stuck process never holds the others forever).
The lock is released when the transaction ends (at its commit or rollback, or when its
connection goes back to the pool).

Writers that do not take it (another program, an older memstore) still meet SQLite's lock and
its busy handler, as before. A thread that already holds the lock through another connection
does not take it again (it would wait for itself). Where the file cannot be made (a read-only
directory) or `flock` does not exist (Windows), writers wait in SQLite's busy handler alone.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Any

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["NO_WAIT", "lock_path", "release", "take"]

NO_WAIT = "memstore_writer_no_wait"
"""A connection's info key: its writer turn is taken without waiting, or BlockingIOError (the
async store's connection on the event loop, which hands a transaction that would wait to a
thread)."""
_FD = "memstore_writer_fd"
_OWNER = "memstore_writer_owner"
_held: dict[int, int] = {}
"""Per thread, how many writer locks it holds."""
_guard = threading.Lock()
_QUICK_TRIES = (0.0001, 0.0002, 0.0004)
"""The pauses, in seconds, before each quick try for the lock, before a thread waits for it."""


def lock_path(database: str | None) -> str | None:
    """The lock file of a SQLite database file, or None (no file, or no `flock` here)."""
    if fcntl is None or not database or database == ":memory:" or database.startswith("file:"):
        return None
    return f"{database}-writers"


def take(info: dict[str, Any], path: str | None, timeout: float) -> None:
    """Take the writer lock for the connection whose pool `info` this is (see the module),
    waiting at most `timeout` seconds for it.

    Raises:
        sqlite3.OperationalError: "database is locked", as SQLite's own wait says when it runs
            out (a writer held its turn for longer: a stuck process, a long import).
        BlockingIOError: the lock is held and the connection takes it without waiting.
    """
    if path is None or info.get(_OWNER) is not None:
        return
    me = threading.get_ident()
    if _held.get(me):
        return
    fd = info.get(_FD)
    if fd is None:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError:
            fd = -1
        info[_FD] = fd
    if fd < 0:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if info.get(NO_WAIT):
            raise
        _wait_for_turn(info, path, timeout)
    with _guard:
        info[_OWNER] = me
        _held[me] = _held.get(me, 0) + 1


def _wait_for_turn(info: dict[str, Any], path: str, timeout: float) -> None:
    """Wait for the lock, at most `timeout` seconds: a few quick tries (an append holds it about
    a millisecond), then a thread blocked in `flock` on a file of its own, which the kernel wakes
    when the lock is free, while this one waits with the timeout a blocking `flock` lacks."""
    for pause in _QUICK_TRIES:
        time.sleep(pause)
        try:
            fcntl.flock(info[_FD], fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue
        return
    waiter = _Waiter(path)
    if not waiter.wait(timeout):
        raise sqlite3.OperationalError("database is locked")
    os.close(info[_FD])
    info[_FD] = waiter.fd


class _Waiter:
    """A thread that takes the lock on a file of its own; if the wait for it is given up, the
    thread lets the lock go as soon as it gets it."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        self._taken = threading.Event()
        self._abandoned = False
        self._decided = threading.Lock()
        threading.Thread(target=self._take, name="memstore-writer-turn", daemon=True).start()

    def _take(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        with self._decided:
            if self._abandoned:
                os.close(self.fd)  # lets the lock go
            else:
                self._taken.set()

    def wait(self, timeout: float) -> bool:
        """Whether the lock was taken within `timeout` seconds (else it is given up)."""
        self._taken.wait(timeout)
        with self._decided:
            if not self._taken.is_set():
                self._abandoned = True
            return self._taken.is_set()


def release(info: dict[str, Any]) -> None:
    """Release the connection's writer lock, if it holds it."""
    owner = info.get(_OWNER)
    if owner is None:
        return
    fcntl.flock(info[_FD], fcntl.LOCK_UN)
    with _guard:
        info[_OWNER] = None
        if _held.get(owner, 0) <= 1:
            _held.pop(owner, None)
        else:
            _held[owner] -= 1


def forget(info: dict[str, Any]) -> None:
    """The connection is closing: release its lock and close the lock file."""
    release(info)
    fd = info.pop(_FD, None)
    if fd is not None and fd >= 0:
        os.close(fd)
