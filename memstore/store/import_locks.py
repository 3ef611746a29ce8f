"""Whether an import still runs, asked of the kernel rather than the process table.

An import that commits as it goes (see `memstore.store.importing`) holds, for its whole life, a
POSIX record lock on one byte of `<database file>-imports`: the byte its token names. The kernel
releases the lock when the process ends, however it ends and in whatever PID namespace it ran,
so a mark whose byte is free is abandoned and one whose byte is held is alive, whatever host and
pid the mark names (those are for messages only). A mark that names no token (not memstore's, or
damaged) can have no lock: it is abandoned.

The limit is the file system's: on a local disk every process that opens the file sees every
lock; over NFS with working locks (lockd) so do other machines. Where locks are not shared (a
file system without them, a copy of the file on another machine) another machine's import looks
abandoned and is deleted under it; SQLite's own locks, and so its safety, need shared locks too.

A process's record locks on a file all go when it closes any of its descriptors of that file,
and never conflict with each other: so each process opens each lock file once and keeps it, and
knows its own imports by their tokens.
"""

from __future__ import annotations

import os
import re
import threading
from typing import TypeGuard

from memstore.errors import DatabaseError

try:
    import fcntl
except ImportError:  # Windows: no record locks, so no import commits as it goes
    fcntl = None  # type: ignore[assignment]

__all__ = ["hold", "is_token", "let_go", "lock_file", "running"]

_TOKEN = re.compile(r"[0-9a-f]{16}")
_BYTES = 1 << 62  # where a token's byte may lie: inside every platform's 64-bit file offsets

_lock = threading.Lock()
_files: dict[str, int] = {}  # lock file path -> this process's one descriptor of it
_mine: dict[str, int | None] = {}  # token of an import of this process -> its lock's descriptor


def is_token(value: object) -> TypeGuard[str]:
    """Whether `value` is a token as `ImportOwner.mine` makes them (16 hex digits)."""
    return isinstance(value, str) and _TOKEN.fullmatch(value) is not None


def lock_file(database: str) -> str | None:
    """The lock file of a SQLite database file (None: an in-memory one, only this process's)."""
    return f"{database}-imports" if database else None


def _descriptor(path: str) -> int:
    """This process's descriptor of lock file `path`, opened (made, like the database) once."""
    fd = _files.get(path)
    if fd is None:
        database = path.removesuffix("-imports")
        mode = os.stat(database).st_mode & 0o666 if os.path.exists(database) else 0o644
        fd = _files[path] = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
    return fd


def _try_lock(fd: int, token: str) -> bool:
    """Take the lock of `token`'s byte without waiting (False: another process holds it)."""
    assert fcntl is not None
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, int(token, 16) % _BYTES)
    except (BlockingIOError, PermissionError):
        return False
    return True


def _unlock(fd: int, token: str) -> None:
    assert fcntl is not None
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, int(token, 16) % _BYTES)


def hold(token: str, database: str) -> bool:
    """Count import `token` as running in this process and take its lock (until `let_go`);
    False when it cannot be held (no record locks here, an unwritable directory): the import
    must then not commit as it goes."""
    path = lock_file(database)
    with _lock:
        if path is None:
            _mine[token] = None
            return True
        if fcntl is None:
            return False
        try:
            fd = _descriptor(path)
        except OSError:
            return False
        if not _try_lock(fd, token):
            return False  # another process's token names the same byte
        _mine[token] = fd
        return True


def let_go(token: str) -> None:
    """Release import `token`'s lock: it has ended, one way or another."""
    with _lock:
        if token not in _mine:
            return
        fd = _mine.pop(token)
        if fd is not None:
            _unlock(fd, token)


def running(token: str | None, database: str) -> bool:
    """Whether import `token` still runs: in this process, or in one that holds its lock.

    Raises:
        DatabaseError: the lock file cannot be opened, so nobody can tell.
    """
    if token is None or not is_token(token):
        return False
    path = lock_file(database)
    with _lock:
        if token in _mine:
            return True
        if path is None:
            return False
        if fcntl is None:
            return False  # no import here marks without a lock: this one is another machine's
        try:
            fd = _descriptor(path)
        except OSError as error:
            raise DatabaseError(f"cannot tell whether imports still run: {error}") from error
        if not _try_lock(fd, token):
            return True
        _unlock(fd, token)
        return False


def _forget_after_fork() -> None:
    """A forked child runs none of its parent's imports and holds none of its locks."""
    global _lock
    _lock = threading.Lock()
    _mine.clear()
    _files.clear()  # the descriptors stay open: closing one would only drop the child's locks


os.register_at_fork(after_in_child=_forget_after_fork)
