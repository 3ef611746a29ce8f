"""Driver errors translated, at the store's boundary, into memstore's hierarchy: Core's and the
prepared statements' alike, since those raise SQLAlchemy's errors too (`prepared`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from memstore.errors import DatabaseError

__all__ = ["translate_database_errors"]


@contextmanager
def translate_database_errors(action: str) -> Iterator[None]:
    """Re-raise SQLAlchemy's errors as DatabaseError, naming what was being done."""
    try:
        yield
    except DBAPIError as exc:
        raise DatabaseError(f"{action} failed: {_explained(str(exc.orig).strip())}") from exc
    except SQLAlchemyError as exc:
        raise DatabaseError(f"{action} failed: {exc}") from exc


def _explained(message: str) -> str:
    """A driver's message, with what a lock wait that ran out means and what to do."""
    if "lock timeout" in message or message == "database is locked":
        return (
            f"{message.splitlines()[0]} (another connection held a lock this needs for too "
            "long: a long query, an import or a migration; try again when it is done)"
        )
    return message
