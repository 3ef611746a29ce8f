"""Imports of new sessions that commit as they go (SQLite), invisible until they complete.

SQLite has one write lock for the whole database: an import in one transaction made every other
writer wait for the whole file (a 700 MB file: longer than the busy timeout, so appends to other
sessions failed). So on SQLite an import into a session that does not exist yet marks the
session's row with its owner (`sessions.importing`: host, process id, a token of its own) and
commits every CHUNK_SECONDS of work; after each commit the store's driver leaves the lock free
for a moment (`engine.LOCK_GAP_SECONDS`), which the import spends reading and parsing the next
lines. A file imported within the first CHUNK_SECONDS is one transaction, as before. Until the
last transaction clears the mark (with the head), every read treats the session as absent and
every write to it is refused (`SessionImportingError`, naming the importing process).

An import that is refused or fails deletes what it wrote, DELETE_ROWS rows a transaction. While
it runs it holds its token's lock (`import_locks`); one whose lock is free (its process died, or
the mark is damaged) is deleted by the next store that opens the database for writing, or by the
next import of that session. Opening still works when that deleting fails (a full disk): it says
so once and the next opening tries again. `clean_abandoned_imports(force=...)` takes over an
import whose process cannot be reached. Where no lock can be held, imports stay one transaction.

Imports into a session that holds rows already stay one transaction, as do PostgreSQL's (its
row locks keep writers of other sessions free).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager

from sqlalchemy import delete, insert, select, text, update

from memstore.errors import DatabaseError, InvalidArgumentError
from memstore.store.engine import LOCK_GAP_SECONDS
from memstore.store.import_locks import hold, running
from memstore.store.owners import ImportOwner, refusal, release, token_of
from memstore.store.plans import COMMIT, ROLLBACK, Plan, now_ms
from memstore.store.policy import Backend
from memstore.store.tables import IN_STORED_ORDER, TENANT, nodes, of_tenant, records, sessions

__all__ = [
    "CHUNK_SECONDS",
    "DELETE_ROWS",
    "Chunks",
    "abandon",
    "abandoned_imports",
    "claim_new_session",
    "clean_abandoned",
    "complete",
    "deleting",
    "discard",
    "reported_if_not_cleaned",
]

logger = logging.getLogger(__name__)

CHUNK_SECONDS = 1.0
"""How long a chunked import keeps SQLite's write lock before it commits (and lets others in)."""
DELETE_ROWS = 5000
"""Rows deleted per transaction when an import is undone."""


def database_file(backend: Backend) -> Plan[str]:
    """The database file the connection writes ("" for an in-memory database, or a server)."""
    if not backend.one_file:
        return ""
    for row in (yield text("PRAGMA database_list")):
        if row[1] == "main":
            return str(row[2] or "")
    return ""


def claim_new_session(backend: Backend, session_id: str, owner: ImportOwner) -> Plan[bool]:
    """Mark the session as being imported by `owner`, if it does not exist (True); False when
    it holds rows already (the import is incremental: one transaction), or when `owner` cannot
    hold its lock (see `import_locks`). A partial import whose owner is gone is deleted first.

    Raises:
        SessionImportingError: a live import of the session runs.
    """
    database = yield from database_file(backend)
    query = select(sessions.c.importing).where(of_tenant(sessions), sessions.c.id == session_id)
    row = (yield query).first()
    if row is not None and row.importing is not None:
        if running(token_of(row.importing), database) or not (
            yield from _take_over(session_id, row.importing, database)
        ):
            raise refusal(session_id, row.importing)
        return (
            yield from claim_new_session(backend, session_id, owner)
        )  # unless another claimed it
    if row is not None or not hold(owner.token, database):
        return False
    now = now_ms()
    values = {
        "tenant": TENANT,
        "id": session_id,
        "created_at": now,
        "updated_at": now,
        "importing": owner.marker,
    }
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
        .where(of_tenant(sessions), sessions.c.id == session_id)
        .where(sessions.c.importing == owner.marker)
        .values(importing=None, **values)
    )
    if done.rowcount != 1:  # only a take-over (forced, or of a lock not shared) does this
        raise refusal(session_id, None)
    yield COMMIT  # before the import lets go of its lock (see `import_locks`)


def discard(session_id: str, owner: ImportOwner) -> Plan[None]:
    """Delete a session `owner` is importing, DELETE_ROWS rows a transaction: its records, then
    its nodes newest first (their blocks go with them), then its row."""
    for table, keys in ((records, records.c.pk), (nodes, nodes.c.pk)):
        while True:
            owned = select(keys).where(of_tenant(table), table.c.session_id == session_id)
            if table is nodes:
                owned = owned.where(IN_STORED_ORDER)
            chunk = owned.order_by(keys.desc()).limit(DELETE_ROWS).scalar_subquery()
            if table is nodes:  # no cascade along parent links: it recurses once per level
                yield update(nodes).where(nodes.c.pk.in_(chunk)).values(parent_id=None)
            result = yield delete(table).where(keys.in_(chunk))
            yield COMMIT
            if result.rowcount < DELETE_ROWS:
                break
    yield delete(sessions).where(
        of_tenant(sessions), sessions.c.id == session_id, sessions.c.importing == owner.marker
    )
    yield COMMIT


def abandon(session_id: str, owner: ImportOwner) -> Plan[None]:
    """Undo a refused or failed import: roll back its open chunk, delete the committed ones."""
    yield ROLLBACK
    yield from discard(session_id, owner)


def _take_over(session_id: str, marker: str, database: str) -> Plan[bool]:
    """Delete a partial import whose owner is gone, marking it as this cleaner's first (so that
    no other cleaner or import works on it meanwhile); False when another got to it first."""
    cleaner = ImportOwner.mine()
    hold(cleaner.token, database)  # without it, another cleaner may help: no harm
    try:
        taken = yield (
            update(sessions)
            .where(of_tenant(sessions), sessions.c.id == session_id)
            .where(sessions.c.importing == marker)
            .values(importing=cleaner.marker)
        )
        yield COMMIT
        if taken.rowcount != 1:
            return False
        yield from discard(session_id, cleaner)
        return True
    finally:
        release(cleaner)


def abandoned_imports(backend: Backend, force: Collection[str] = ()) -> Plan[list[tuple[str, str]]]:
    """The (session id, mark) of every partial import whose owner no longer runs, and of the
    sessions `force` names whatever their owner.

    Raises:
        InvalidArgumentError: `force` names a session that is not being imported.
    """
    if isinstance(force, str):
        raise InvalidArgumentError(f"force takes a list of session ids, not the string {force!r}")
    database = yield from database_file(backend)
    rows = yield select(sessions.c.id, sessions.c.importing).where(
        of_tenant(sessions), sessions.c.importing.is_not(None)
    )
    marks: dict[str, str] = {row.id: row.importing for row in rows}
    for session_id in force:
        if session_id not in marks:
            raise InvalidArgumentError(
                f"session {session_id!r} is not being imported: there is no import to take over"
            )
    return [
        (session_id, marker)
        for session_id, marker in marks.items()
        if session_id in force or not running(token_of(marker), database)
    ]


def clean_abandoned(backend: Backend, abandoned: list[tuple[str, str]]) -> Plan[list[str]]:
    """Delete the partial imports `abandoned` lists (see `abandoned_imports`); returns the ids
    of the sessions deleted."""
    database = yield from database_file(backend)
    cleaned: list[str] = []
    for session_id, marker in abandoned:
        if (yield from _take_over(session_id, marker, database)):
            cleaned.append(session_id)
    return cleaned


def deleting(abandoned: list[tuple[str, str]]) -> str:
    """What cleaning `abandoned` does, as an error names it."""
    names = ", ".join(repr(session_id) for session_id, _ in abandoned)
    return f"deleting the partial imports of {len(abandoned)} session(s) ({names})"


@contextmanager
def reported_if_not_cleaned() -> Iterator[None]:
    """Opening a store for writing works even when deleting abandoned imports fails (a full
    disk): the failure is logged once, the imports stay hidden, and the next opening retries."""
    try:
        yield
    except DatabaseError as error:
        logger.warning(
            "%s; they stay hidden, and the next store opened for writing deletes them (or "
            "`memstore db clean-imports`)",
            error,
        )
