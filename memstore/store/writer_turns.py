"""SQLite's writers take turns through a lock file, not through SQLite's busy handler.

SQLite lets one writer in at a time; one that finds the write lock taken sleeps and retries,
sleeping longer each time (1, 2, 5, ... 100 ms). With 8 processes appending at once, most
appends took half a millisecond and the unlucky ones, asleep while others came and went, most of
a second (p99 1,500x p50). So before `BEGIN IMMEDIATE` a memstore writer takes an exclusive
`flock` on a file beside the database (`<database>-writers`): the kernel wakes the next waiter
as soon as the holder is done, and SQLite's lock is then free. The lock is released when the
transaction ends (at its commit or rollback, or when its connection goes back to the pool).

Writers that do not take it (another program, an older memstore) still meet SQLite's lock and
its busy handler, as before. A thread that already holds the lock through another connection
does not take it again (it would wait for itself). Where the file cannot be made (a read-only
directory) or `flock` does not exist (Windows), writers wait in SQLite's busy handler alone.
"""

from __future__ import annotations

import os
import threading
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


def lock_path(database: str | None) -> str | None:
    """The lock file of a SQLite database file, or None (no file, or no `flock` here)."""
    if fcntl is None or not database or database == ":memory:" or database.startswith("file:"):
        return None
    return f"{database}-writers"


def take(info: dict[str, Any], path: str | None) -> None:
    """Take the writer lock for the connection whose pool `info` this is (see the module)."""
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
    fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if info.get(NO_WAIT) else 0))
    with _guard:
        info[_OWNER] = me
        _held[me] = _held.get(me, 0) + 1


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
