"""Appending a batch of turns at a session's head in one transaction, for stores that do not
have `append_many` yet (the framework adapters' batches; `append_many` supersedes it)."""

from __future__ import annotations

from collections.abc import Sequence

from memstore.hashing import hash_node
from memstore.store.plans import Plan, append_node, ensure_session, now_ms
from memstore.types import SessionNode, TurnLike, parse_turn


def append_chain(
    dialect: str, session_id: str, turns: Sequence[TurnLike]
) -> Plan[list[SessionNode]]:
    """Chain `turns` onto the head as it is inside this transaction (whose first statement
    locks the session row against other writers) and move the head to the last: one batch,
    one linear chain, whatever other writers do."""
    parsed = [parse_turn(turn) for turn in turns]
    now = now_ms()
    parent = yield from ensure_session(dialect, session_id, now)
    nodes: list[SessionNode] = []
    for turn in parsed:
        node = SessionNode(
            id=hash_node(parent, turn, now), parent=parent, turn=turn, created_at=now
        )
        yield from append_node(dialect, session_id, node)
        nodes.append(node)
        parent = node.id
    return nodes
