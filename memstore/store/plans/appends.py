"""Appends: chaining turns onto a session's head, storing new nodes with their blocks and
search text, and logging each append (forks: `plans.forks`).

The append path is hot: its statements are `Prepared` (compiled once, run on the driver's
cursor), and one node or a batch goes through the same `store_chain`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, exists, or_, select, update

from memstore import jsjson
from memstore.errors import (
    HeadMovedError,
    InvalidArgumentError,
    UnknownNodeError,
    UnknownSessionError,
)
from memstore.store.copying import BulkRows
from memstore.store.plans import one_call
from memstore.store.plans.contract import UNSET, Plan, Step, Unset, now_ms
from memstore.store.plans.nodes import (
    refuse_bad_node_ids,
    refuse_other_content,
    stored_ids,
    stored_node_rows,
)
from memstore.store.plans.one_call import chain_nodes
from memstore.store.plans.search_index import index_new_nodes
from memstore.store.plans.sessions import ensure_session
from memstore.store.policy import BACKENDS, Backend
from memstore.store.prepared import Prepared
from memstore.store.rows import stored_rows
from memstore.store.tables import (
    TENANT,
    node_blocks,
    node_usage,
    nodes,
    of_tenant,
    records,
    sessions,
    stored_on,
)
from memstore.types import (
    SessionNode,
    Turn,
    TurnLike,
    parse_turn,
    validate_session_id,
)
from memstore.usage import NodeUsage, parse_usage, usage_record

__all__ = [
    "BLOCK_ROWS",
    "INSERT_RECORDS",
    "append_node",
    "append_records",
    "append_turns",
    "chain_nodes",
    "insert_nodes",
    "insert_rows",
    "parse_usages",
    "record_usage",
    "store_chain",
    "store_usage",
    "upsert_usage",
]

UsageLike = NodeUsage | Mapping[str, Any]
UsagesLike = UsageLike | Sequence[UsageLike | None] | None
"""What `append` and `append_many` take as `usage=`: one (the last turn's), or one per turn."""

# Inserts of whole rows (every column but the generated key), one row per parameter dict.
INSERT_NODES = Prepared.insert(nodes, [c.name for c in nodes.columns if c.name != "pk"])
BLOCK_ROWS = 10_000
"""Block rows inserted by one statement, at most."""
INSERT_BLOCKS = Prepared.insert(node_blocks, [c.name for c in node_blocks.columns])
INSERT_RECORDS = Prepared.insert(records, [c.name for c in records.columns if c.name != "pk"])


def _insert_under_parent(backend: Backend) -> Prepared:
    """The INSERT of one node's row that stores it only where its parent is stored (or it has
    none) and it is not: the append path's lookup of the node and its parent, in the insert."""
    columns = [c for c in nodes.columns if c.name != "pk" and stored_on(c, backend.name)]
    values = [TENANT if c.name == "tenant" else bindparam(c.name, type_=c.type) for c in columns]
    parent = nodes.alias("parent")
    stored_parent = exists().where(
        of_tenant(parent),
        parent.c.session_id == bindparam("session_id"),
        parent.c.id == bindparam("parent_id"),
    )
    no_parent = bindparam("parent_id", type_=nodes.c.parent_id.type).is_(None)
    under_parent = select(*values).where(or_(no_parent, stored_parent))
    keys = [nodes.c.tenant, nodes.c.session_id, nodes.c.id]
    insert = backend.insert(nodes).from_select([c.name for c in columns], under_parent)
    return Prepared(insert.on_conflict_do_nothing(index_elements=keys))


_INSERT_UNDER_PARENT = {backend: _insert_under_parent(backend) for backend in BACKENDS}
_MOVE_HEAD = Prepared(
    update(sessions)
    .where(of_tenant(sessions), sessions.c.id == bindparam("session_id"))
    .values(head=bindparam("new_head"), updated_at=bindparam("now"))
)


def append_records(
    session_id: str,
    chain: Sequence[SessionNode],
    usages: Sequence[NodeUsage | None] = (),
) -> Step:
    """The insert of `chain`'s log records: one `append` per node (a node line and a head line
    of its JSONL file), what appending the nodes one by one writes, each followed by its usage
    line if `usages` gives one (see `memstore.usage`)."""
    logged = []
    for node, usage in itertools.zip_longest(chain, usages[: len(chain)]):
        logged.append({"session_id": session_id, "kind": "append", "node_id": node.id, "raw": None})
        if usage is not None:
            raw = usage_record(node.id, usage) + "\n"
            logged.append({"session_id": session_id, "kind": "other", "node_id": None, "raw": raw})
    return INSERT_RECORDS, logged[0] if len(logged) == 1 else logged


def parse_usages(usage: UsagesLike, count: int) -> list[NodeUsage | None]:
    """`usage=` as one entry per turn: a single usage is the last turn's (the model call that
    produced the batch), a sequence must have one entry (or None) per turn.

    Raises:
        InvalidArgumentError: a sequence of another length, or a malformed usage.
    """
    if usage is None:
        return []
    if isinstance(usage, NodeUsage | Mapping):
        return [None] * (count - 1) + [parse_usage(usage)] if count else []
    if isinstance(usage, str | bytes) or not isinstance(usage, Sequence):
        raise InvalidArgumentError(
            f"usage is a NodeUsage, a mapping, or a list of them, not {type(usage).__name__}"
        )
    if len(usage) != count:
        raise InvalidArgumentError(
            f"usage lists one entry per turn: {len(usage)} for {count} turn(s)"
        )
    return [None if item is None else parse_usage(item) for item in usage]


def store_usage(
    backend: Backend,
    session_id: str,
    node_ids: Sequence[str],
    usages: Sequence[NodeUsage | None],
) -> Plan[None]:
    """Write (or replace) the `node_usage` rows of the nodes that `usages` gives one for."""
    rows = [
        {"session_id": session_id, "node_id": node_id, **usage.row()}
        for node_id, usage in zip(node_ids, usages, strict=False)
        if usage is not None
    ]
    yield from upsert_usage(backend, rows)


def record_usage(
    backend: Backend, session_id: str, node_id: str | None, usage: UsageLike
) -> Plan[str]:
    """Store `usage` for the session's node `node_id` (None: its head), replacing any earlier,
    with its usage line in the log (so in the JSONL export); returns the node's id.

    Raises:
        UnknownSessionError: no such session (or it is empty, for the head).
        UnknownNodeError: the session has no node `node_id`.
        InvalidArgumentError: a malformed usage.
    """
    parsed = parse_usage(usage)
    validate_session_id(session_id)
    refuse_bad_node_ids(session_id, node_id)
    head = yield from ensure_session(backend, session_id, now_ms())
    target = head if node_id is None else node_id
    if target is None:
        raise UnknownSessionError(f"session {session_id!r} has no turns to record usage for")
    yield from record_node_usage(backend, session_id, target, parsed)
    return target


def record_node_usage(
    backend: Backend, session_id: str, node_id: str, usage: NodeUsage
) -> Plan[None]:
    """Store `usage` beside the session's node `node_id`, replacing any earlier, with its usage
    line in the log.

    Raises:
        UnknownNodeError: the session has no node `node_id`.
    """
    if node_id not in (yield from stored_node_rows(backend, session_id, [node_id])):
        raise UnknownNodeError(session_id, node_id)
    raw = usage_record(node_id, usage) + "\n"
    yield INSERT_RECORDS, {"session_id": session_id, "kind": "other", "node_id": None, "raw": raw}
    yield from store_usage(backend, session_id, [node_id], [usage])


def upsert_usage(backend: Backend, rows: Sequence[Mapping[str, Any]]) -> Plan[None]:
    """Insert `node_usage` rows, replacing a node's earlier usage."""
    if rows:
        upsert = backend.insert(node_usage).values(tenant=TENANT)
        columns = {name: upsert.excluded[name] for name in NodeUsage.__dataclass_fields__}
        keys = [node_usage.c.tenant, node_usage.c.session_id, node_usage.c.node_id]
        yield upsert.on_conflict_do_update(index_elements=keys, set_=columns), list(rows)


def append_node(
    backend: Backend,
    session_id: str,
    node: SessionNode,
    expected_head: str | Unset | None = UNSET,
    usage: NodeUsage | None = None,
    *,
    stored_only: str | None = None,
) -> Plan[None]:
    """Store `node` (unless it is there already) with its `usage`, and move the head to it,
    atomically. With `stored_only` (why), only a node the session holds already is taken: any
    other is refused with that reason (the store's redactor would change its turn)."""
    validate_session_id(session_id)
    refuse_bad_node_ids(session_id, node.id, node.parent)
    if stored_only is not None:
        found = yield stored_ids(backend, session_id, [node.id])
        if found.first() is None:
            raise InvalidArgumentError(stored_only)
    now = now_ms()
    usages = [usage] if usage else []
    if backend.appends_in_one_call and one_call.fits([node.turn]):
        answer = yield from one_call.store_chain(
            session_id, (node,), now, usages, expected_head, alone=not usages
        )
        one_call.refuse(session_id, answer.row, expected_head, "an append")
        if usages:
            yield from store_usage(backend, session_id, [node.id], usages)
        return
    head = yield from ensure_session(backend, session_id, now)
    if not isinstance(expected_head, Unset) and head != expected_head:
        raise HeadMovedError(session_id, expected_head, head)
    yield from store_chain(backend, session_id, (node,), now, usages)


def append_turns(
    backend: Backend,
    session_id: str,
    turns: Iterable[TurnLike],
    expected_head: str | Unset | None = UNSET,
    created_at: int | None = None,
    parent: str | Unset | None = UNSET,
    usage: UsagesLike = None,
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
    usages = parse_usages(usage, len(parsed))
    return _append_turns(backend, session_id, parsed, expected_head, created_at, parent, usages)


def _append_turns(
    backend: Backend,
    session_id: str,
    turns: Sequence[Turn],
    expected_head: str | Unset | None,
    created_at: int | None,
    parent: str | Unset | None,
    usages: Sequence[NodeUsage | None] = (),
) -> Plan[list[SessionNode]]:
    if not turns:
        return []
    for turn in turns:  # serialized here, before the writer lock (the ids hash it, rows keep it)
        turn.json_text()
    now = now_ms()
    stamp = now if created_at is None else created_at
    if backend.appends_in_one_call and one_call.fits(turns):  # PostgreSQL: see `one_call`
        if isinstance(parent, Unset) and isinstance(expected_head, Unset):
            chain = yield from one_call.store_from_head(
                session_id, turns, stamp, now, usages, alone=not usages
            )
        else:
            base = expected_head if isinstance(parent, Unset) else parent
            chain = chain_nodes(None if isinstance(base, Unset) else base, turns, stamp)
            answer = yield from one_call.store_chain(
                session_id, chain, now, usages, expected_head, alone=not usages
            )
            if answer.outcome == "moved":
                if created_at is not None and (yield from _holds_chain(backend, session_id, chain)):
                    return chain
                one_call.refuse(session_id, answer.row, expected_head, "an append")
        if usages:
            yield from store_usage(backend, session_id, [node.id for node in chain], usages)
        return chain
    head = yield from ensure_session(backend, session_id, now)
    if not isinstance(expected_head, Unset) and head != expected_head:
        base = expected_head if isinstance(parent, Unset) else parent
        landed = chain_nodes(base, turns, stamp)
        if created_at is not None and (yield from _holds_chain(backend, session_id, landed)):
            return landed
        raise HeadMovedError(session_id, expected_head, head)
    chain = chain_nodes(head if isinstance(parent, Unset) else parent, turns, stamp)
    yield from store_chain(backend, session_id, chain, now, usages)
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
    backend: Backend,
    session_id: str,
    chain: Sequence[SessionNode],
    now: int,
    usages: Sequence[NodeUsage | None] = (),
) -> Plan[None]:
    """Insert the chain's new nodes, log one append per node (and its usage line), store the
    usage and move the head to the last."""
    if backend.appends_in_one_call and one_call.fits([node.turn for node in chain]):
        yield from one_call.store_chain(session_id, chain, now, usages)
        if usages:
            yield from store_usage(backend, session_id, [node.id for node in chain], usages)
        return
    if len(chain) == 1:
        yield from _store_node(backend, session_id, chain[0])
    else:
        new = yield from _new_nodes(backend, session_id, chain)
        if new:
            yield from insert_nodes(backend, session_id, new)
    yield append_records(session_id, chain, usages)
    if usages:
        yield from store_usage(backend, session_id, [node.id for node in chain], usages)
    yield _MOVE_HEAD, {"session_id": session_id, "new_head": chain[-1].id, "now": now}


def _new_nodes(
    backend: Backend, session_id: str, chain: Sequence[SessionNode]
) -> Plan[list[SessionNode]]:
    """The nodes of `chain` the session does not hold, the others compared with its rows.

    Raises:
        UnknownNodeError: the chain's parent is not stored.
        NodeConflictError: a node's id is stored with other content.
    """
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
    return new


def _store_node(backend: Backend, session_id: str, node: SessionNode) -> Plan[None]:
    """Insert one node with its blocks, unless the session holds it already: one statement
    inserts it where its parent is stored and it is not, and only when it inserts nothing are
    the two looked up (`_new_nodes`: which of them answers). One statement fewer per append
    than looking them up first, with SQLite's writer lock held."""
    row, blocks = _node_rows(session_id, node)
    inserted = yield _INSERT_UNDER_PARENT[backend], row
    if inserted.rowcount:
        yield from insert_rows(backend, session_id, [row], blocks, node_rows_inserted=True)
    elif (yield from _new_nodes(backend, session_id, (node,))):  # pragma: no cover - inserted
        yield from insert_rows(backend, session_id, [row], blocks)


def _node_rows(
    session_id: str, node: SessionNode
) -> tuple[dict[str, Any], Iterable[dict[str, Any]]]:
    """A node's `nodes` row and its `node_blocks` rows."""
    text = node.turn.json_text()
    turn = jsjson.loads(text)  # the wire dict, for the derived columns: faster than to_json
    return stored_rows(session_id, node.id, node.parent, node.created_at, turn, text)


def insert_nodes(backend: Backend, session_id: str, new_nodes: Sequence[SessionNode]) -> Plan[None]:
    """Insert nodes (parents first) with their blocks."""
    node_rows: list[dict[str, Any]] = []
    blocks: list[Iterable[dict[str, Any]]] = []
    for node in new_nodes:
        row, rows = _node_rows(session_id, node)
        node_rows.append(row)
        blocks.append(rows)
    yield from insert_rows(backend, session_id, node_rows, itertools.chain.from_iterable(blocks))


def insert_rows(
    backend: Backend,
    session_id: str,
    node_rows: Sequence[Mapping[str, Any]],
    blocks: Iterable[Mapping[str, Any]],
    *,
    bulk: bool = False,
    node_rows_inserted: bool = False,
) -> Plan[None]:
    """Insert one session's `nodes` rows (parents first) and their `node_blocks` rows, a
    bounded batch at a time (the rows may be built as they are read), and index the nodes'
    text for full-text search. `bulk`: an import's many rows, copied where the backend can
    (`BulkRows`: PostgreSQL's COPY). `node_rows_inserted`: the `nodes` rows are in already."""
    if node_rows and not node_rows_inserted:
        yield BulkRows(INSERT_NODES, node_rows) if bulk else (INSERT_NODES, node_rows)
    rows = iter(blocks)
    while batch := list(itertools.islice(rows, BLOCK_ROWS)):
        yield BulkRows(INSERT_BLOCKS, batch) if bulk else (INSERT_BLOCKS, batch)
    if backend.writes_text_index and node_rows:
        yield from index_new_nodes(session_id, node_rows)
