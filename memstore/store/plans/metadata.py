"""Merging into sessions' metadata objects and appending, in one transaction: what a framework
that keeps state beside its history (app, user and session state) writes with each event."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import select, update

from memstore.errors import HeadMovedError, UnknownSessionError
from memstore.store.plans.appends import UsageLike, append_turns, record_node_usage
from memstore.store.plans.contract import UNSET, Plan, Unset, now_ms
from memstore.store.plans.nodes import refuse_bad_node_ids
from memstore.store.plans.sessions import ensure_session, metadata_object, refuse_taken_id
from memstore.store.policy import Backend
from memstore.store.tables import NOT_IMPORTING, of_tenant, sessions
from memstore.types import SessionNode, TurnLike, validate_session_id
from memstore.usage import NodeUsage, parse_usage

MetadataMerges = Mapping[str, Mapping[str, Any]]
"""Session id -> metadata key -> a value for that key: a mapping is merged into the object at the
key (its items set, the others kept), any other value replaces the key's."""


@dataclass(frozen=True)
class StoredMetadata:
    """A session's head, metadata object and last update (epoch ms)."""

    head: str | None
    metadata: Mapping[str, Any]
    updated_at: int


def read_metadata(session_ids: Sequence[str]) -> Plan[dict[str, StoredMetadata]]:
    """The `StoredMetadata` of each of the sessions that exists, by id."""
    for session_id in session_ids:
        validate_session_id(session_id)
    if not session_ids:
        return {}
    query = select(sessions.c.id, sessions.c.head, sessions.c.meta, sessions.c.updated_at)
    rows = yield query.where(sessions.c.id.in_(list(session_ids)), NOT_IMPORTING)
    return {row.id: StoredMetadata(row.head, row.meta or {}, row.updated_at) for row in rows}


def append_merging_metadata(
    backend: Backend,
    session_id: str,
    turns: Sequence[TurnLike],
    merges: MetadataMerges,
    expected_head: str | Unset | None = UNSET,
    exists: bool | None = None,
    usage: Mapping[str, UsageLike] | None = None,
) -> Plan[list[SessionNode]]:
    """Merge `merges` into the sessions' metadata (each created if missing), record `usage`
    (node id -> usage) beside those nodes of `session_id`, replacing theirs, and append `turns`
    to `session_id`; the rows are locked in id order, so concurrent calls cannot deadlock.

    Raises:
        InvalidArgumentError: a merge is not a mapping with string keys, or a usage is
            malformed; nothing was written.
        SessionExistsError: `exists` is False and `session_id` exists.
        UnknownSessionError: `exists` is True and there is no session `session_id`.
        UnknownNodeError: `session_id` has no node that `usage` names.
        HeadMovedError: `expected_head` was given and the head is elsewhere.
    """
    validate_session_id(session_id)
    usages = {node_id: parse_usage(value) for node_id, value in (usage or {}).items()}
    refuse_bad_node_ids(session_id, *usages)
    for merged_id, merge in merges.items():
        validate_session_id(merged_id)
        metadata_object(backend, f"metadata merge for session {merged_id!r}", merge)
    return _append_merging(backend, session_id, turns, merges, expected_head, exists, usages)


def _append_merging(
    backend: Backend,
    session_id: str,
    turns: Sequence[TurnLike],
    merges: MetadataMerges,
    expected_head: str | Unset | None,
    exists: bool | None,
    usages: Mapping[str, NodeUsage],
) -> Plan[list[SessionNode]]:
    if exists is False:
        yield from refuse_taken_id(session_id)
    elif exists:
        found = yield select(sessions.c.id).where(of_tenant(sessions), sessions.c.id == session_id)
        if found.first() is None:
            raise UnknownSessionError(f"no session {session_id!r}")
    now = now_ms()
    for merged_id in sorted({*merges, session_id}):
        head = yield from ensure_session(backend, merged_id, now)
        checked = merged_id == session_id and not isinstance(expected_head, Unset)
        if checked and head != expected_head:
            raise HeadMovedError(session_id, cast(str | None, expected_head), head)
        if merged_id not in merges:
            continue
        found = yield select(sessions.c.meta).where(of_tenant(sessions), sessions.c.id == merged_id)
        metadata = dict(found.scalar_one_or_none() or {})
        for key, value in merges[merged_id].items():
            old = metadata.get(key)
            if isinstance(value, Mapping):
                value = {**(old if isinstance(old, Mapping) else {}), **value}
            metadata[key] = value
        yield (
            update(sessions)
            .where(of_tenant(sessions), sessions.c.id == merged_id)
            .values(meta=metadata)
        )
    for node_id, node_usage in usages.items():
        yield from record_node_usage(backend, session_id, node_id, node_usage)
    if not turns:
        return []
    return (yield from append_turns(backend, session_id, turns, expected_head))
