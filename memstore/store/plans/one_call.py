"""PostgreSQL appends in one round trip, through the function `memstore_append` (migration 0025;
0028 gives it the store's tenant, 0033 makes it a transaction of its own).

An append's statements (lock the session, compare the head, look up the parent and the stored
nodes, insert the nodes, their blocks and the records, move the head) were one round trip each
to the server; the function runs them all there. The plan yields one call with everything the
rows need, derived in Python as before (`rows.stored_rows`: the single source of the columns);
the ids of a chain hung from the head are hashed by the function, since only it knows the head.
What the function answers other than 'ok' is mapped to memstore's errors here (`refuse`), after
it wrote nothing (since migration 0038 the function checks everything before it writes). A
call the plan writes nothing else with is yielded `alone`: with no transaction open, the driver
runs it as one of its own, one round trip instead of BEGIN, the call and COMMIT (`standalone`).
SQLite keeps its statements: they run in-process, no round trips to save.

A turn too big to send as one parameter (`fits`) takes the statements, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import text
from sqlalchemy.dialects import postgresql

from memstore import jsjson
from memstore.errors import HeadMovedError, NodeConflictError, UnknownNodeError
from memstore.hashing import hash_node
from memstore.store.owners import refuse_if_importing
from memstore.store.plans.contract import UNSET, Plan, Unset
from memstore.store.prepared import Prepared
from memstore.store.rows import stored_rows
from memstore.store.tables import TENANT_KEY, SearchVector
from memstore.types import SessionNode, Turn
from memstore.usage import NodeUsage, usage_record

__all__ = ["Answer", "chain_nodes", "fits", "refuse", "store_chain", "store_from_head"]

SENT_CHARS = 1 << 20
"""Characters of turn JSON one call sends at most; a bigger append takes the statements."""
_CALL = text(
    "SELECT outcome, head, importing, ids, detail FROM memstore_append("
    f":{TENANT_KEY}, :session_id, :now, "
    ":check, :expected, CAST(:ids AS text[]), :parent, CAST(:nodes AS jsonb), "
    "CAST(:blocks AS jsonb), CAST(:usage AS text[]))"
)
_APPEND = Prepared(_CALL)
_APPEND_ALONE = Prepared(_CALL, alone=True)
"""The call as a transaction of its own, when the plan writes nothing else with it (the
function is all or nothing, and since migration 0036 gives its transaction the tenant it is
given): one round trip, see `standalone`."""
_VECTOR = SearchVector()
_DIALECT = postgresql.dialect()  # type: ignore[no-untyped-call]
_MARK = "0" * 32  # a node id JSON writes as it is, to cut a usage line after it
_USAGE_HEAD = f'{{"type":"usage","node":"{_MARK}"'


@dataclass(frozen=True)
class Answer:
    """What the function did: 'ok' (the ids it stored), or 'moved' (the head it found)."""

    outcome: str
    head: str | None
    ids: list[str]
    row: tuple[Any, ...]
    """The function's answer as it came (see `refuse`)."""


def fits(turns: Sequence[Turn]) -> bool:
    """Whether one call may carry these turns (their JSON, at most `SENT_CHARS` in all)."""
    return sum(len(turn.json_text()) for turn in turns) <= SENT_CHARS


def refuse(session_id: str, row: Sequence[Any], expected: str | Unset | None, sent: str) -> None:
    """Raise memstore's error for the function's answer `row` (outcome, head, importing, ids,
    detail); 'ok', and 'rehash' (which the caller handles), raise nothing. `sent`: what the call
    sent, for messages."""
    outcome, head, importing, _, detail = row
    if outcome == "importing":  # the first two as `ensure_session` and the head check raised
        refuse_if_importing(session_id, importing)
    elif outcome == "moved":
        raise HeadMovedError(session_id, None if isinstance(expected, Unset) else expected, head)
    elif outcome == "unknown_parent":
        raise UnknownNodeError(session_id, detail)
    elif outcome == "conflict":
        raise NodeConflictError(
            f"session {session_id!r} already holds node {detail!r} with different content"
        )
    elif outcome not in ("ok", "rehash"):  # pragma: no cover - the function answers no other
        raise RuntimeError(f"memstore_append answered {outcome!r} for {sent}")


def _sent(rows: list[dict[str, Any]]) -> str:
    """The JSON text of the call's node or block rows, which the function reads as jsonb: not
    hashed nor kept as text, so any JSON of the same values does, and orjson's needs no check
    against `JSON.stringify`'s (`jsjson.dumps`, which writes what orjson refuses: a lone
    surrogate, an integer beyond 2**53-1)."""
    try:
        return orjson.dumps(rows, option=orjson.OPT_STRICT_INTEGER).decode()
    except orjson.JSONEncodeError:
        return jsjson.dumps(rows)


def _usage_tail(usage: NodeUsage | None) -> str | None:
    """A usage line (with its newline) from after the node's id, which the function writes."""
    if usage is None:
        return None
    line = usage_record(_MARK, usage)
    return line[len(_USAGE_HEAD) :] + "\n"


def _params(
    session_id: str,
    now: int,
    turns: Sequence[Turn],
    stamps: Sequence[int],
    usages: Sequence[NodeUsage | None],
) -> dict[str, Any]:
    """The call's parameters but the ids, the parent and the head check."""
    sent_nodes: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] = []
    for index, (turn, stamp) in enumerate(zip(turns, stamps, strict=True), start=1):
        turn_json = turn.json_text()
        row, rows = stored_rows(session_id, "", None, stamp, jsjson.loads(turn_json), turn_json)
        sent_nodes.append(
            {
                "turn_json": turn_json,
                "role": row["role"],
                "created_at": stamp,
                "created_json": jsjson.dumps(stamp),
                "search_chars": row["search_chars"],
                "search_vector": _VECTOR.process_bind_param(row["search_vector"], _DIALECT),
                "search_chars_vector": _VECTOR.process_bind_param(
                    row["search_chars_vector"], _DIALECT
                ),
            }
        )
        for block in rows:
            block["n"] = index
            blocks.append(block)
    tails = [_usage_tail(usage) for usage in usages[: len(turns)]]
    return {
        "session_id": session_id,
        "now": now,
        "nodes": _sent(sent_nodes),
        "blocks": _sent(blocks),
        "usage": tails + [None] * (len(turns) - len(tails)) if any(tails) else None,
    }


def store_chain(
    session_id: str,
    chain: Sequence[SessionNode],
    now: int,
    usages: Sequence[NodeUsage | None] = (),
    expected: str | Unset | None = UNSET,
    *,
    alone: bool = False,
) -> Plan[Answer]:
    """Store `chain` (its ids known) and move the head to its last node, in one call; with
    `expected`, only if the head is that (else the answer is 'moved' and nothing is written).
    `alone`: the caller writes nothing after it that must share its transaction (the call may
    then be one).

    Raises:
        SessionImportingError, UnknownNodeError, NodeConflictError: as the statements did.
    """
    params = _params(
        session_id, now, [node.turn for node in chain], [node.created_at for node in chain], usages
    )
    return (yield from _call(session_id, params, chain, expected, alone))


def store_from_head(
    session_id: str,
    turns: Sequence[Turn],
    stamp: int,
    now: int,
    usages: Sequence[NodeUsage | None] = (),
    *,
    alone: bool = False,
) -> Plan[list[SessionNode]]:
    """Chain `turns` (made at `stamp`) onto the session's head, which the call finds and
    hashes the ids from, and move the head to the last; the nodes stored, under the ids the
    call stored them by (`hash_node`'s: not hashed here again). `alone`: as for
    `store_chain`."""
    params = _params(session_id, now, turns, [stamp] * len(turns), usages)
    answer = yield from _call(session_id, params, None, UNSET, alone)
    if answer.outcome == "rehash":  # a head whose JSON the function does not write itself
        chain = chain_nodes(answer.head, turns, stamp)
        yield from _call(session_id, params, chain, UNSET, alone)  # the first wrote none
        return chain
    return chain_nodes(answer.head, turns, stamp, answer.ids)


def chain_nodes(
    parent: str | None,
    turns: Sequence[Turn],
    created_at: int,
    ids: Sequence[str] | None = None,
) -> list[SessionNode]:
    """`turns` as a chain of content-addressed nodes under `parent`, all made at `created_at`;
    `ids`: their ids as the function hashed them (else hashed here)."""
    chain: list[SessionNode] = []
    for index, turn in enumerate(turns):
        node_id = hash_node(parent, turn, created_at) if ids is None else ids[index]
        chain.append(SessionNode._stored(node_id, parent, turn, created_at))
        parent = node_id
    return chain


def _call(
    session_id: str,
    params: dict[str, Any],
    chain: Sequence[SessionNode] | None,
    expected: str | Unset | None,
    alone: bool,
) -> Plan[Answer]:
    """Run the function (`alone`: as a transaction of its own if none is open); raise for its
    refusals (not 'moved' when `expected` is given: the caller may find the chain landed
    already)."""
    params = {
        **params,
        "check": not isinstance(expected, Unset),
        "expected": None if isinstance(expected, Unset) else expected,
        "ids": None if chain is None else [node.id for node in chain],
        "parent": None if chain is None else chain[0].parent,
    }
    row = (yield (_APPEND_ALONE if alone else _APPEND), params).one()
    outcome, head, _, ids, _ = row
    if outcome != "moved":
        refuse(session_id, row, expected, f"session {session_id!r}")
    return Answer(outcome, head, list(ids or ()), tuple(row))
