"""What differs between the backends, for the stores: one object per backend.

The stores (and the plans they run) ask a `Backend` what to do rather than comparing dialect
names: adding a backend means adding one here and teaching the plans its SQL.
"""

from __future__ import annotations

from dataclasses import dataclass

from memstore.errors import InvalidArgumentError

__all__ = ["POSTGRESQL", "SQLITE", "Backend", "backend_of"]


@dataclass(frozen=True)
class Backend:
    """A database's policies, as the stores see them."""

    name: str
    """SQLAlchemy's dialect name; the plans still take it to pick their SQL."""
    search_backlog: bool
    """Writes of a few nodes leave their full-text indexing to a backlog, which a store that can
    write indexes before it searches (SQLite; PostgreSQL indexes each write)."""
    imports_commit_as_they_go: bool
    """A new session's import commits in chunks, hidden until complete, so an import that died
    leaves rows that opening a store for writing cleans (SQLite)."""
    async_in_thread: bool
    """The async store runs a whole transaction on the sync driver in a worker thread: through
    aiosqlite every statement was a round trip to its thread (SQLite)."""
    async_prepared_on_driver: bool
    """The async store hands prepared statements to the driver's own asyncio connection
    (psycopg on PostgreSQL)."""


SQLITE = Backend(
    name="sqlite",
    search_backlog=True,
    imports_commit_as_they_go=True,
    async_in_thread=True,
    async_prepared_on_driver=False,
)
POSTGRESQL = Backend(
    name="postgresql",
    search_backlog=False,
    imports_commit_as_they_go=False,
    async_in_thread=False,
    async_prepared_on_driver=True,
)
_BACKENDS = {backend.name: backend for backend in (SQLITE, POSTGRESQL)}


def backend_of(dialect: str) -> Backend:
    """The backend of a SQLAlchemy dialect name; any other is an InvalidArgumentError."""
    try:
        return _BACKENDS[dialect]
    except KeyError:
        raise InvalidArgumentError(
            f"memstore runs on SQLite or PostgreSQL, not {dialect!r}: give a sqlite:// or "
            "postgresql:// URL"
        ) from None
