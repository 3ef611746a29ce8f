"""Listing sessions page by page: keyset cursors and the time window of `sessions(...)`.

A cursor names the last session of a page by its sort key, never by a position, so a page
costs the same at any depth (an index seek, migration 0024) and sessions written meanwhile
shift nothing. Two orders:

- `updated` (the default): most recently updated first, ties by id. A session written while a
  caller pages moves ahead of the cursor: it is never listed twice; one not reached yet when it
  was written is not listed either (it is newer than the listing; start again to see it).
- `id`: by id. Ids never change, so every session that exists when the paging starts is
  listed exactly once, whatever is written meanwhile (new sessions appear if their id sorts
  after the cursor).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, Select, and_, or_

from memstore import jsjson
from memstore.errors import InvalidArgumentError, InvalidJsonError
from memstore.store.tables import sessions
from memstore.types import MAX_CREATED_AT, MIN_CREATED_AT

__all__ = [
    "SessionOrder",
    "Window",
    "a_tag",
    "decode_cursor",
    "encode_cursor",
    "epoch_ms",
    "tag_filter",
]

SessionOrder = Literal["updated", "id"]
_ORDERS = ("updated", "id")


def a_tag(tag: object, name: str) -> str:
    """A session's tag: a non-empty string.

    Raises:
        InvalidArgumentError: naming `name`, for anything else ("" as a filter would match no
            session, or only those given an empty tag).
    """
    if not isinstance(tag, str) or not tag:
        raise InvalidArgumentError(f"{name}: a tag is a non-empty string, not {tag!r}")
    return tag


def tag_filter(tag: str | None, name: str = "tag") -> str | None:
    """A tag to filter by (`a_tag`), or None: no filter."""
    return None if tag is None else a_tag(tag, name)


def epoch_ms(
    value: int | datetime | None, name: str, *, minimum: int = MIN_CREATED_AT
) -> int | None:
    """A time as epoch milliseconds: an int as it is, an aware datetime converted; both within
    `minimum` and the 64-bit integers the databases hold.

    Raises:
        InvalidArgumentError: neither, a datetime without a time zone, or out of that range.
    """
    if value is None:
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidArgumentError(f"{name} needs a time zone (datetime.now(UTC), not now())")
        value = int(value.timestamp() * 1000)
    if type(value) is not int or not minimum <= value <= MAX_CREATED_AT:
        raise InvalidArgumentError(
            f"{name} is epoch milliseconds from {minimum} to {MAX_CREATED_AT} or an aware "
            f"datetime, not {value!r}"
        )
    return value


def encode_cursor(order: str, updated_at: int, session_id: str) -> str:
    """The opaque cursor after the session with these keys, in `order`."""
    key: list[Any] = [order, session_id] if order == "id" else [order, updated_at, session_id]
    return base64.urlsafe_b64encode(jsjson.dumps(key).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, order: str, option: str | None = None) -> tuple[int | None, str]:
    """The (updated_at, id) a cursor names (updated_at None in `id` order).

    Raises:
        InvalidArgumentError: not a cursor memstore made, or one of another order (naming the
            command line's `option`, when it gave the cursor).
    """
    problem = f"{cursor[:60]!r} is not a session cursor (pass the next_cursor a page gave)"
    if option is not None:
        problem = f"{option}: {cursor[:60]!r} is not a session cursor (a page's nextCursor)"
    if not isinstance(cursor, str):
        raise InvalidArgumentError(problem)
    try:
        key = jsjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode())
    except (binascii.Error, UnicodeDecodeError, InvalidJsonError, ValueError) as exc:
        raise InvalidArgumentError(problem) from exc
    if not isinstance(key, list) or not key or key[0] not in _ORDERS:
        raise InvalidArgumentError(problem)
    if key[0] != order:
        given = ("the cursor", repr(order)) if option is None else (option, f"--order {order}")
        raise InvalidArgumentError(f"{given[0]} pages in {key[0]!r} order, not {given[1]}")
    if order == "id" and len(key) == 2 and isinstance(key[1], str):
        return None, key[1]
    if len(key) == 3 and type(key[1]) is int and isinstance(key[2], str):
        return key[1], key[2]
    raise InvalidArgumentError(problem)


@dataclass(frozen=True)
class Window:
    """Which sessions a listing covers and in what order: the order, the cursor's position,
    and the time bounds (epoch ms, both exclusive)."""

    order: str = "updated"
    cursor: str | None = None
    updated_before: int | None = None
    updated_after: int | None = None

    def __post_init__(self) -> None:
        if self.order not in _ORDERS:
            raise InvalidArgumentError(
                f"sessions are ordered by 'updated' or 'id', not {self.order!r}"
            )
        if self.cursor is not None:
            decode_cursor(self.cursor, self.order)

    def apply(self, query: Select[Any]) -> Select[Any]:
        """`query` over `sessions`, restricted and ordered."""
        if self.updated_before is not None:
            query = query.where(sessions.c.updated_at < self.updated_before)
        if self.updated_after is not None:
            query = query.where(sessions.c.updated_at > self.updated_after)
        if self.order == "id":
            if self.cursor is not None:
                query = query.where(sessions.c.id > decode_cursor(self.cursor, "id")[1])
            return query.order_by(sessions.c.id)
        if self.cursor is not None:
            query = query.where(self._after(*decode_cursor(self.cursor, "updated")))
        return query.order_by(sessions.c.updated_at.desc(), sessions.c.id)

    @staticmethod
    def _after(updated_at: int | None, session_id: str) -> ColumnElement[bool]:
        """After the cursor in `updated` order; the first condition lets the index seek."""
        assert updated_at is not None
        return and_(
            sessions.c.updated_at <= updated_at,
            or_(sessions.c.updated_at < updated_at, sessions.c.id > session_id),
        )

    def next_cursor(self, updated_at: int, session_id: str) -> str:
        """The cursor after the session with these keys."""
        return encode_cursor(self.order, updated_at, session_id)
