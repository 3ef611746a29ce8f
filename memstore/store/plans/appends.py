"""Appends: chaining turns onto a session's head, storing new nodes with their blocks and
search text, logging each append, and forking a path into a new session.

The append path is hot: its statements are `Prepared` (compiled once, run on the driver's
cursor), and one node or a batch goes through the same `store_chain`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, insert, update

from memstore import jsjson
from memstore.errors import (
    HeadMovedError,
    InvalidArgumentError,
    UnknownNodeError,
    UnknownSessionError,
)
from memstore.hashing import hash_node
from memstore.store.plans.contract import UNSET, Plan, Step, Unset, now_ms
from memstore.store.plans.nodes import (
    refuse_bad_node_ids,
    refuse_other_content,
    session_row,
    stored_node_rows,
)
from memstore.store.plans.paths import load_path_nodes
from memstore.store.plans.search_index import index_new_nodes
from memstore.store.plans.sessions import ensure_session, refuse_taken_id
from memstore.store.policy import Backend
from memstore.store.prepared import Prepared
from memstore.store.rows import stored_rows
from memstore.store.tables import node_blocks, nodes, records, sessions
from memstore.types import (
    MAX_CREATED_AT,
    MIN_CREATED_AT,
    SessionNode,
    Turn,
    TurnLike,
    parse_turn,
    validate_session_id,
)

__all__ = [
    "BLOCK_ROWS",
    "INSERT_RECORDS",
    "append_node",
    "append_records",
    "append_turns",
    "chain_nodes",
    "fork_session",
    "insert_nodes",
    "insert_rows",
    "store_chain",
]

# Inserts of whole rows (every column but the generated key), one row per parameter dict.
INSERT_NODES = Prepared.insert(nodes, [c.name for c in nodes.columns if c.name != "pk"])
BLOCK_ROWS = 10_000
"""Block rows inserted by one statement, at most."""
INSERT_BLOCKS = Prepared.insert(node_blocks, [c.name for c in node_blocks.columns])
INSERT_RECORDS = Prepared.insert(records, [c.name for c in records.columns if c.name != "pk"])
_MOVE_HEAD = Prepared(
    update(sessions)
    .where(sessions.c.id == bindparam("session_id"))
    .values(head=bindparam("new_head"), updated_at=bindparam("now"))
)


def append_records(session_id: str, chain: Sequence[SessionNode]) -> Step:
    """The insert of `chain`'s log records: one `append` per node (a node line and a head line
    of its JSONL file), what appending the nodes one by one writes."""
    logged = [
        {"session_id": session_id, "kind": "append", "node_id": node.id, "raw": None}
        for node in chain
    ]
    return INSERT_RECORDS, logged[0] if len(logged) == 1 else logged


def append_node(
    backend: Backend,
    session_id: str,
    node: SessionNode,
    expected_head: str | Unset | None = UNSET,
) -> Plan[None]:
    """Store `node` (unless it is there already) and move the head to it, atomically."""
    validate_session_id(session_id)
    refuse_bad_node_ids(session_id, node.id, node.parent)
    now = now_ms()
    head = yield from ensure_session(backend, session_id, now)
    if not isinstance(expected_head, Unset) and head != expected_head:
        raise HeadMovedError(session_id, expected_head, head)
    yield from store_chain(backend, session_id, (node,), now)


def chain_nodes(parent: str | None, turns: Sequence[Turn], created_at: int) -> list[SessionNode]:
    """`turns` as a chain of content-addressed nodes under `parent`, all made at `created_at`."""
    chain: list[SessionNode] = []
    for turn in turns:
        node_id = hash_node(parent, turn, created_at)
        chain.append(SessionNode._stored(node_id, parent, turn, created_at))
        parent = node_id
    return chain


def append_turns(
    backend: Backend,
    session_id: str,
    turns: Iterable[TurnLike],
    expected_head: str | Unset | None = UNSET,
    created_at: int | None = None,
    parent: str | Unset | None = UNSET,
) -> Plan[list[SessionNode]]:
    """Chain `turns` onto the head as it is inside this transaction (or onto `parent`: a fork)
    and move the head to the last, writing one `append` record per turn (what appending them
    one by one writes).

    The first statement locks the session row against other writers (SQLite's BEGIN IMMEDIATE
    has taken the database's write lock already), so concurrent calls queue up and each one's
    chain hangs from the last one's: one linear chain, no retry. A repeat (see
    `SessionStore.append_many`) writes nothing and returns the nodes stored the first time.
    """
    validate_session_id(session_id)
    if isinstance(turns, str | bytes | Mapping | Turn):
        raise InvalidArgumentError("append_many takes a list of turns, not one turn")
    parsed = [parse_turn(turn) for turn in turns]
    if created_at is not None and type(created_at) is not int:
        raise InvalidArgumentError(f"created_at is epoch milliseconds (an int), not {created_at!r}")
    refuse_bad_node_ids(session_id, expected_head, parent)
    return _append_turns(backend, session_id, parsed, expected_head, created_at, parent)


def _append_turns(
    backend: Backend,
    session_id: str,
    turns: Sequence[Turn],
    expected_head: str | Unset | None,
    created_at: int | None,
    parent: str | Unset | None,
) -> Plan[list[SessionNode]]:
    if not turns:
        return []
    now = now_ms()
    head = yield from ensure_session(backend, session_id, now)
    stamp = now if created_at is None else created_at
    if not isinstance(expected_head, Unset) and head != expected_head:
        base = expected_head if isinstance(parent, Unset) else parent
        landed = chain_nodes(base, turns, stamp)
        if created_at is not None and (yield from _holds_chain(backend, session_id, landed)):
            return landed
        raise HeadMovedError(session_id, expected_head, head)
    chain = chain_nodes(head if isinstance(parent, Unset) else parent, turns, stamp)
    yield from store_chain(backend, session_id, chain, now)
    return chain


def _holds_chain(backend: Backend, session_id: str, chain: Sequence[SessionNode]) -> Plan[bool]:
    """Whether the session holds every node of `chain` already (the batch landed before)."""
    found = yield from stored_node_rows(backend, session_id, [node.id for node in chain])
    for node in chain:
        if node.id not in found:
            return False
        refuse_other_content(session_id, node, found[node.id])
    return True


def store_chain(
    backend: Backend, session_id: str, chain: Sequence[SessionNode], now: int
) -> Plan[None]:
    """Insert the chain's new nodes, log one append per node and move the head to the last."""
    parent = chain[0].parent
    wanted = [node.id for node in chain] + ([parent] if parent is not None else [])
    found = yield from stored_node_rows(backend, session_id, wanted)
    if parent is not None and parent not in found:
        raise UnknownNodeError(session_id, parent)
    new: list[SessionNode] = []
    for node in chain:
        if node.id in found:
            refuse_other_content(session_id, node, found[node.id])
        else:
            new.append(node)
    if new:
        yield from insert_nodes(backend, session_id, new)
    yield append_records(session_id, chain)
    yield _MOVE_HEAD, {"session_id": session_id, "new_head": chain[-1].id, "now": now}


def insert_nodes(backend: Backend, session_id: str, new_nodes: Sequence[SessionNode]) -> Plan[None]:
    """Insert nodes (parents first) with their blocks."""
    node_rows: list[dict[str, Any]] = []
    blocks: list[Iterable[dict[str, Any]]] = []
    for node in new_nodes:
        if not MIN_CREATED_AT <= node.created_at <= MAX_CREATED_AT:
            raise InvalidArgumentError(
                f"session {session_id!r}: node {node.id[:40]!r} has created_at {node.created_at}, "
                "out of the range the databases hold (-2**63 to 2**63-1 epoch milliseconds)"
            )
        text = node.turn.json_text()
        turn = jsjson.loads(text)  # the wire dict, for the derived columns: faster than to_json
        row, rows = stored_rows(session_id, node.id, node.parent, node.created_at, turn, text)
        node_rows.append(row)
        blocks.append(rows)
    yield from insert_rows(backend, session_id, node_rows, itertools.chain.from_iterable(blocks))


def insert_rows(
    backend: Backend,
    session_id: str,
    node_rows: Sequence[Mapping[str, Any]],
    blocks: Iterable[Mapping[str, Any]],
) -> Plan[None]:
    """Insert one session's `nodes` rows (parents first) and their `node_blocks` rows, a
    bounded batch at a time (the rows may be built as they are read), and index the nodes'
    text for full-text search."""
    if node_rows:
        yield INSERT_NODES, node_rows
    rows = iter(blocks)
    while batch := list(itertools.islice(rows, BLOCK_ROWS)):
        yield INSERT_BLOCKS, batch
    if backend.writes_text_index and node_rows:
        yield from index_new_nodes(session_id, node_rows)


def fork_session(
    backend: Backend, source_id: str, leaf: str | None, new_id: str
) -> Plan[str | None]:
    """Copy the path to `leaf` (default: the head) of one session into a new session.

    The new session's records are those the original writer would have written for appending
    the path's nodes one by one. Returns the new session's head.
    """
    validate_session_id(new_id)
    if (yield session_row(source_id)).first() is None:
        raise UnknownSessionError(f"no session {source_id!r}")
    yield from refuse_taken_id(new_id)
    path = yield from load_path_nodes(backend, source_id, leaf)
    now = now_ms()
    new_head = path[-1].id if path else None
    yield insert(sessions).values(id=new_id, head=new_head, created_at=now, updated_at=now)
    if path:
        yield from insert_nodes(backend, new_id, path)
        yield append_records(new_id, path)
    return new_head
