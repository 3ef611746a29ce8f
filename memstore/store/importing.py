"""Imports of new sessions that commit as they go (SQLite), invisible until they complete.

SQLite has one write lock for the whole database: an import in one transaction made every other
writer wait for the whole file (a 700 MB file: longer than the busy timeout, so appends to other
sessions failed). So on SQLite an import into a session that does not exist yet marks the
session's row with its owner (`sessions.importing`: host, process id and start, a token of its
own) and commits every CHUNK_SECONDS of work; after each commit the store's driver leaves the
lock free for a moment (`engine.LOCK_GAP_SECONDS`), which the import spends reading and parsing
the next lines. A file imported within the first CHUNK_SECONDS is one transaction, as before.
Until the last transaction clears the mark (with the head), every read treats the session as
absent and every write to it is refused (`SessionImportingError`, naming the importing process).

An import that is refused or fails deletes what it wrote, DELETE_ROWS rows a transaction. One
whose process died (SIGKILL, power) is deleted by the next store that opens the database for
writing, or by the next import of that session: SQLite is local, so an owner on this host is
alive exactly when its process (same id, same start time) is, or, in this process, while its
import runs. An owner on another host (a shared file system) is never presumed dead.

Imports into a session that holds rows already stay one transaction, as do PostgreSQL's (its
row locks keep writers of other sessions free).
"""

from __future__ import annotations

import time

from sqlalchemy import delete, insert, select, update

from memstore.store.engine import LOCK_GAP_SECONDS
from memstore.store.owners import ImportOwner, refusal, release, running_as
from memstore.store.plans import COMMIT, ROLLBACK, Plan, now_ms
from memstore.store.tables import IN_STORED_ORDER, nodes, records, sessions

__all__ = [
    "CHUNK_SECONDS",
    "DELETE_ROWS",
    "Chunks",
    "abandon",
    "abandoned_imports",
    "claim_new_session",
    "clean_abandoned",
    "complete",
    "discard",
]

CHUNK_SECONDS = 1.0
"""How long a chunked import keeps SQLite's write lock before it commits (and lets others in)."""
DELETE_ROWS = 5000
"""Rows deleted per transaction when an import is undone."""


def claim_new_session(session_id: str, owner: ImportOwner) -> Plan[bool]:
    """Mark the session as being imported by `owner`, if it does not exist (True); False when
    it holds rows already (the import is incremental: one transaction). A partial import whose
    owner is gone is deleted first.

    Raises:
        SessionImportingError: a live import of the session runs.
    """
    row = (yield select(sessions.c.importing).where(sessions.c.id == session_id)).first()
    if row is not None and row.importing is not None:
        found = ImportOwner.parse(row.importing)
        if (
            found is None
            or found.alive()
            or not (yield from _take_over(session_id, row.importing, owner))
        ):
            raise refusal(session_id, found)
        return (yield from claim_new_session(session_id, owner))  # unless another claimed it
    if row is not None:
        return False
    now = now_ms()
    values = {"id": session_id, "created_at": now, "updated_at": now, "importing": owner.marker}
    running_as(owner)
    yield insert(sessions).values(values)  # committed with the first chunk
    return True


class Chunks:
    """When a chunked import commits: after each CHUNK_SECONDS of work. A file imported within
    the first is one transaction, as before (the mark set and cleared in it)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.committed = False
        self.gap_ends = 0.0

    def due(self) -> bool:
        """Whether the open transaction has held the write lock long enough."""
        return time.monotonic() - self.started >= CHUNK_SECONDS

    def commit(self) -> Plan[None]:
        """Commit what the import wrote so far (the next statement begins a new transaction)."""
        yield COMMIT
        self.committed = True
        self.started = time.monotonic()
        self.gap_ends = self.started + LOCK_GAP_SECONDS

    def reading_ahead(self) -> bool:
        """Whether the lock is still to be left free after a commit: the import reads and
        parses lines meanwhile, rather than wait for nothing (the driver waits the rest)."""
        return time.monotonic() < self.gap_ends


def complete(session_id: str, owner: ImportOwner, values: dict[str, object]) -> Plan[None]:
    """Make the imported session visible: clear its mark, setting `values` (head, times)."""
    done = yield (
        update(sessions)
        .where(sessions.c.id == session_id, sessions.c.importing == owner.marker)
        .values(importing=None, **values)
    )
    if done.rowcount != 1:  # only a cleanup that took this live import for dead could do this
        raise refusal(session_id, None)


def discard(session_id: str, owner: ImportOwner) -> Plan[None]:
    """Delete a session `owner` is importing, DELETE_ROWS rows a transaction: its records, then
    its nodes newest first (their blocks go with them), then its row."""
    for table, keys in ((records, records.c.pk), (nodes, nodes.c.pk)):
        while True:
            owned = select(keys).where(table.c.session_id == session_id)
            if table is nodes:
                owned = owned.where(IN_STORED_ORDER)
            chunk = owned.order_by(keys.desc()).limit(DELETE_ROWS).scalar_subquery()
            if table is nodes:  # no cascade along parent links: it recurses once per level
                yield update(nodes).where(nodes.c.pk.in_(chunk)).values(parent_id=None)
            result = yield delete(table).where(keys.in_(chunk))
            yield COMMIT
            if result.rowcount < DELETE_ROWS:
                break
    yield delete(sessions).where(sessions.c.id == session_id, sessions.c.importing == owner.marker)
    yield COMMIT


def abandon(session_id: str, owner: ImportOwner) -> Plan[None]:
    """Undo a refused or failed import: roll back its open chunk, delete the committed ones."""
    yield ROLLBACK
    yield from discard(session_id, owner)


def _take_over(session_id: str, marker: str, owner: ImportOwner) -> Plan[bool]:
    """Delete a partial import whose owner is gone, as `owner` (so that no other cleaner or
    import works on it meanwhile); False when another got to it first."""
    running_as(owner)
    try:
        taken = yield (
            update(sessions)
            .where(sessions.c.id == session_id, sessions.c.importing == marker)
            .values(importing=owner.marker)
        )
        yield COMMIT
        if taken.rowcount != 1:
            return False
        yield from discard(session_id, owner)
        return True
    finally:
        release(owner)


def abandoned_imports() -> Plan[list[tuple[str, str]]]:
    """The (session id, mark) of every partial import whose owner is gone."""
    rows = yield select(sessions.c.id, sessions.c.importing).where(
        sessions.c.importing.is_not(None)
    )
    found: list[tuple[str, str]] = []
    for session_id, marker in rows:
        owner = ImportOwner.parse(marker)
        if owner is not None and not owner.alive():
            found.append((session_id, marker))
    return found


def clean_abandoned(abandoned: list[tuple[str, str]]) -> Plan[list[str]]:
    """Delete the partial imports `abandoned` lists (see `abandoned_imports`); returns the ids
    of the sessions deleted."""
    cleaned: list[str] = []
    for session_id, marker in abandoned:
        if (yield from _take_over(session_id, marker, ImportOwner.mine())):
            cleaned.append(session_id)
    return cleaned
