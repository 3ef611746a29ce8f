"""Keyed appends: turns that carry a writer's key (a Claude Agent SDK entry's `uuid`), appended
unless the session holds the key already, looked up by the `node_keys` primary key inside the
writing transaction; so the cost of an append does not grow with the session, and concurrent
appends of the same keys store each once (the session row's lock orders them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from sqlalchemy import bindparam, select, update

from memstore import jsjson
from memstore.errors import InvalidArgumentError
from memstore.store.plans.appends import (
    INSERT_RECORDS,
    UsagesLike,
    chain_nodes,
    parse_usages,
    store_chain,
)
from memstore.store.plans.contract import Plan, now_ms
from memstore.store.plans.sessions import ensure_session, update_session
from memstore.store.policy import Backend
from memstore.store.prepared import Prepared
from memstore.store.tables import TENANT, node_keys, of_tenant, sessions
from memstore.types import SessionNode, Turn, TurnLike, parse_turn, validate_session_id
from memstore.usage import NodeUsage
from memstore.writer_keys import MAX_KEY, key_record

__all__ = ["Revise", "append_keyed", "insert_keys"]

Revise: TypeAlias = Callable[[Mapping[str, Any], list[Turn]], Mapping[str, Any] | None]
"""Given a session's metadata and the turns an append added, the title, tags or metadata to set
in the same transaction (`update_session`'s keyword arguments), or None."""

# The hot path's statements, compiled once (see `prepared`).
_HELD_KEY = Prepared(
    select(node_keys.c.key).where(
        of_tenant(node_keys),
        node_keys.c.session_id == bindparam("session_id"),
        node_keys.c.key == bindparam("key"),
    )
)
_INSERT_KEYS = Prepared.insert(node_keys, [c.name for c in node_keys.columns])
_METADATA = Prepared(
    select(sessions.c.meta).where(of_tenant(sessions), sessions.c.id == bindparam("session_id"))
)
_SET_METADATA = Prepared(
    update(sessions)
    .where(of_tenant(sessions), sessions.c.id == bindparam("session_id"))
    .values(meta=bindparam("meta"))
)


def append_keyed(
    backend: Backend,
    session_id: str,
    turns: Sequence[TurnLike],
    keys: Sequence[str | None],
    revise: Revise | None = None,
    usage: UsagesLike = None,
) -> Plan[list[SessionNode]]:
    """Chain onto the head the turns whose key (None: no key) neither the session nor an earlier
    turn of the call holds, store their keys, then apply `revise`; the nodes appended."""
    validate_session_id(session_id)
    if isinstance(turns, str | bytes | Mapping | Turn) or len(turns) != len(keys):
        raise InvalidArgumentError("append_keyed takes a list of turns and a key for each")
    for key in keys:
        if key is not None and (not isinstance(key, str) or not 0 < len(key) <= MAX_KEY):
            raise InvalidArgumentError(
                f"session {session_id!r}: a turn's key is a string of 1 to {MAX_KEY} "
                f"characters or None, not {str(key)[:60]!r}"
            )
    parsed = [parse_turn(turn) for turn in turns]
    usages = parse_usages(usage, len(parsed)) or [None] * len(parsed)
    return _append_keyed(backend, session_id, parsed, keys, revise, usages)


def _append_keyed(
    backend: Backend,
    session_id: str,
    turns: Sequence[Turn],
    keys: Sequence[str | None],
    revise: Revise | None,
    usages: Sequence[NodeUsage | None],
) -> Plan[list[SessionNode]]:
    if not turns:
        return []
    now = now_ms()
    head = yield from ensure_session(backend, session_id, now)  # locks the session: writers queue
    seen: set[str] = set()
    for wanted in sorted({key for key in keys if key is not None}):  # by the primary key
        held = yield _HELD_KEY, {"session_id": session_id, "key": wanted}
        seen.update(held.scalars())
    new: list[tuple[Turn, str | None, NodeUsage | None]] = []
    for turn, key, usage in zip(turns, keys, usages, strict=True):
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        new.append((turn, key, usage))
    if not new:
        return []
    chain = chain_nodes(head, [turn for turn, _, _ in new], now)
    kept = [usage for _, _, usage in new]
    yield from store_chain(backend, session_id, chain, now, kept if any(kept) else [])
    rows = [
        {"session_id": session_id, "key": key, "node_id": node.id}
        for node, (_, key, _) in zip(chain, new, strict=True)
        if key is not None
    ]
    if rows:
        yield _INSERT_KEYS, rows[0] if len(rows) == 1 else rows
        yield INSERT_RECORDS, [_key_line(session_id, row) for row in rows]
    if revise is not None:
        yield from _revised(backend, session_id, chain, revise)
    return chain


def _key_line(session_id: str, row: Mapping[str, str]) -> dict[str, Any]:
    """The log record of a node's key line, so the key travels in the JSONL export (see
    `memstore.writer_keys`)."""
    raw = key_record(row["node_id"], row["key"]) + "\n"
    return {"session_id": session_id, "kind": "other", "node_id": None, "raw": raw}


def insert_keys(backend: Backend, rows: Sequence[Mapping[str, Any]]) -> Plan[None]:
    """Insert `node_keys` rows (an import's key lines); a key the session holds already keeps
    its node."""
    if rows:
        statement = backend.insert(node_keys).values(tenant=TENANT).on_conflict_do_nothing()
        yield statement, list(rows)


def _revised(
    backend: Backend, session_id: str, chain: Sequence[SessionNode], revise: Revise
) -> Plan[None]:
    """Apply `revise` to the session (a change of metadata alone: one prepared update)."""
    meta = (yield _METADATA, {"session_id": session_id}).scalar_one_or_none()
    if isinstance(meta, str | bytes):  # SQLite's driver gives the JSON text
        meta = jsjson.loads(meta)
    change = revise(meta or {}, [node.turn for node in chain])
    if not change:
        return
    if set(change) == {"metadata"} and change["metadata"] is not None:
        yield _SET_METADATA, {"session_id": session_id, "meta": dict(change["metadata"])}
    else:
        yield from update_session(backend, session_id, **change)
