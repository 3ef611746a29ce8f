"""Nodes by id: their rows decoded, the ids the store can hold, and the lookups by key.

A lookup by key is two prepared statements deep on the append path (a node and its parent),
a few more for a batch, a LATERAL lookup per id on PostgreSQL beyond that (see `lookup_by_ids`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Select, bindparam, func, literal, select, true, union_all
from sqlalchemy.dialects import postgresql

from memstore.errors import (
    AmbiguousNodeError,
    InvalidNodeIdError,
    InvalidSessionIdError,
    NodeConflictError,
    UnknownNodeError,
)
from memstore.graph import SessionGraph
from memstore.store.bulk import paused_gc
from memstore.store.plans.contract import Plan, Step
from memstore.store.policy import Backend
from memstore.store.prepared import Prepared
from memstore.store.tables import (
    IN_STORED_ORDER,
    NOT_IMPORTING,
    Id,
    nodes,
    of_tenant,
    of_visible_session,
    sessions,
)
from memstore.types import SessionNode, Turn, is_storable_text

__all__ = [
    "MAX_NODE_ID",
    "head",
    "load_session",
    "lookup_by_ids",
    "lookup_id",
    "node_from_row",
    "node_id_problem",
    "node_rows",
    "nodes_from_rows",
    "refuse_bad_node_ids",
    "refuse_other_content",
    "resolve_node_id",
    "session_row",
    "stored_ids",
    "stored_node_rows",
]


def node_from_row(row: Sequence[Any]) -> SessionNode:
    """A SessionNode from a `nodes` row that starts (id, parent_id, turn_json, created_at)."""
    turn = Turn._from_stored_text(row[2])
    return SessionNode._stored(row[0], row[1], turn, row[3])


def nodes_from_rows(rows: Iterable[Any]) -> list[SessionNode]:
    """SessionNodes from many `nodes` rows (as `node_from_row`, the turns built in one loop)."""
    node = SessionNode._stored
    with paused_gc():
        rows = rows if isinstance(rows, list) else list(rows)
        turns = Turn._from_stored_texts([row[2] for row in rows])
        return [node(row[0], row[1], turn, row[3]) for row, turn in zip(rows, turns, strict=True)]


MAX_NODE_ID = 255


def node_id_problem(node_id: str) -> str | None:
    """Why the store cannot hold `node_id`, or None when it can."""
    if len(node_id) > MAX_NODE_ID:
        return f"is longer than {MAX_NODE_ID} characters"
    if not is_storable_text(node_id):
        return "holds NUL or a lone surrogate"
    return None


def refuse_bad_node_ids(session_id: str, *node_ids: object) -> None:
    """Raise InvalidNodeIdError for the first of `node_ids` the store cannot hold; what is no
    string (None: no parent, `UNSET`: not given) is skipped."""
    for node_id in node_ids:
        if isinstance(node_id, str) and (problem := node_id_problem(node_id)):
            raise InvalidNodeIdError(f"session {session_id!r}: node id {node_id[:40]!r} {problem}")


def refuse_other_content(session_id: str, node: SessionNode, stored: tuple[Any, ...]) -> None:
    """Raise NodeConflictError if the stored row of `node`'s id, (parent_id, created_at,
    turn_json), holds other content: a node id names one content."""
    if stored != (node.parent, node.created_at, node.turn.json_text()):
        raise NodeConflictError(
            f"session {session_id!r} already holds node {node.id!r} with different content"
        )


def lookup_id(session_id: str) -> str:
    """The key to look a session up by. An id that no database can store (it holds NUL or a
    lone surrogate) names no session: it becomes '', which no session has, so that reads find
    nothing instead of failing in the driver.

    Raises:
        InvalidSessionIdError: `session_id` is not a string at all.
    """
    if not isinstance(session_id, str):
        raise InvalidSessionIdError(f"a session id is a string, not {type(session_id).__name__}")
    return session_id if is_storable_text(session_id) else ""


_SESSION_HEAD = Prepared(
    select(sessions.c.head).where(sessions.c.id == bindparam("session_id"), NOT_IMPORTING)
)


def session_row(session_id: str) -> Step:
    """The session's row (its head), if it exists (one being imported is absent)."""
    return _SESSION_HEAD, {"session_id": lookup_id(session_id)}


def _node_by_key(node_id: str) -> Select[Any]:
    return select(nodes.c.id, nodes.c.parent_id, nodes.c.created_at, nodes.c.turn_json).where(
        of_tenant(nodes),
        nodes.c.session_id == bindparam("session_id"),
        nodes.c.id == bindparam(node_id),
    )


# Two lookups by key, not `id IN (:node_id, :parent_id)`: PostgreSQL may read an IN list on the
# index's second column as a filter over the whole session, when it thinks the session small.
_NODE_AND_PARENT = Prepared(union_all(_node_by_key("node_id"), _node_by_key("parent_id")))
# The same for a few more keys (a batch appended at once, with its parent), in sizes of powers of
# two, the unused keys NULL (which matches no row): one prepared statement per size.
_KEYED_LOOKUP_SIZES = (4, 8, 16, 32)
_NODES_BY_KEYS = {
    size: Prepared(union_all(*(_node_by_key(f"key_{index}") for index in range(size))))
    for size in _KEYED_LOOKUP_SIZES
}
_LOOKUP_CHUNK = 500  # ids per lookup: SQLite caps a statement's parameters
_NODES_BY_ID = select(nodes.c.id, nodes.c.parent_id, nodes.c.turn_json, nodes.c.created_at).where(
    of_tenant(nodes),
    nodes.c.session_id == bindparam("session_id"),
    nodes.c.id.in_(bindparam("node_ids", expanding=True)),
)
_SESSION_NODES = Prepared(
    select(nodes.c.id, nodes.c.parent_id, nodes.c.turn_json, nodes.c.created_at)
    .where(of_tenant(nodes), nodes.c.session_id == bindparam("session_id"), IN_STORED_ORDER)
    .order_by(nodes.c.pk)
)


def node_rows(session_id: str, node_ids: Iterable[str]) -> Step:
    """The stored nodes among `node_ids` (id, parent_id, turn_json, created_at)."""
    return _NODES_BY_ID, {"session_id": session_id, "node_ids": list(node_ids)}


def stored_ids(backend: Backend, session_id: str, node_ids: Sequence[str]) -> Select[Any]:
    """The ids among `node_ids` that the session holds (see `lookup_by_ids`)."""
    return lookup_by_ids(backend, session_id, node_ids, (nodes.c.id,))


def lookup_by_ids(
    backend: Backend, session_id: str, node_ids: Sequence[str], columns: Sequence[Any]
) -> Select[Any]:
    """`columns` of the session's nodes whose ids are among `node_ids`.

    On PostgreSQL each id is looked up by itself (a LATERAL subquery with LIMIT 1, per id): as
    `id IN (...)`, the planner may read the whole session instead, when it thinks it small.
    """
    if not backend.cost_based_planner:
        return select(*columns).where(
            of_tenant(nodes), nodes.c.session_id == session_id, nodes.c.id.in_(node_ids)
        )
    given = (
        func.unnest(literal(list(node_ids), postgresql.ARRAY(Id)))
        .table_valued("id")
        .render_derived("given")
    )
    found = (
        select(*columns)
        .where(of_tenant(nodes), nodes.c.session_id == session_id, nodes.c.id == given.c.id)
        .limit(1)
        .lateral("found")
    )
    return select(*found.c).select_from(given).join(found, true())


def stored_node_rows(
    backend: Backend, session_id: str, node_ids: Sequence[str | None]
) -> Plan[dict[str, tuple[Any, ...]]]:
    """The session's nodes among `node_ids` (None: no node): id -> (parent_id, created_at,
    turn_json), the form `refuse_other_content` compares."""
    if len(node_ids) <= 2:  # the append path's prepared statement: two lookups by key
        wanted = [*node_ids, None][:2]
        lookup = {"session_id": session_id, "node_id": wanted[0], "parent_id": wanted[1]}
        rows = yield _NODE_AND_PARENT, lookup
        return {row[0]: tuple(row[1:]) for row in rows}
    size = next((size for size in _KEYED_LOOKUP_SIZES if len(node_ids) <= size), None)
    if size is not None:  # a batch's: as many lookups by key, prepared
        keys = dict(zip((f"key_{index}" for index in range(size)), node_ids, strict=False))
        keyed = {f"key_{index}": None for index in range(size)} | keys
        rows = yield _NODES_BY_KEYS[size], {"session_id": session_id, **keyed}
        return {row[0]: tuple(row[1:]) for row in rows}
    columns = (nodes.c.id, nodes.c.parent_id, nodes.c.created_at, nodes.c.turn_json)
    wanted_ids = [node_id for node_id in node_ids if node_id is not None]
    found: dict[str, tuple[Any, ...]] = {}
    for start in range(0, len(wanted_ids), _LOOKUP_CHUNK):
        chunk = wanted_ids[start : start + _LOOKUP_CHUNK]
        for row in (yield lookup_by_ids(backend, session_id, chunk, columns)):
            found[row[0]] = tuple(row[1:])
    return found


def load_session(session_id: str) -> Plan[SessionGraph]:
    """Every node of the session, in the order stored, and its head."""
    row = (yield session_row(session_id)).first()
    if row is None:
        return SessionGraph.hydrate(session_id, [], None)
    head = row[0]
    rows = yield _SESSION_NODES, {"session_id": lookup_id(session_id)}
    return SessionGraph.hydrate(session_id, nodes_from_rows(rows), head)


def head(session_id: str) -> Plan[str | None]:
    """The session's head, or None for an empty or missing session."""
    value: str | None = (yield session_row(session_id)).scalar_one_or_none()
    return value


SHOWN_CANDIDATES = 10


def resolve_node_id(session_id: str, node_id: str) -> Plan[str]:
    """The id of the session's node that `node_id` names: that id itself, or the one id that
    starts with it (a short id, as git takes them).

    Raises:
        UnknownNodeError: no node's id is or starts with `node_id`.
        AmbiguousNodeError: several do; it lists them.
    """
    owned = (nodes.c.session_id == lookup_id(session_id)) & of_visible_session(nodes.c.session_id)
    wanted = lookup_id(node_id)
    if wanted and (yield select(nodes.c.id).where(owned, nodes.c.id == wanted)).first():
        return node_id
    starts = func.substr(nodes.c.id, 1, len(wanted)) == wanted
    query = select(nodes.c.id).where(owned, starts).order_by(nodes.c.id)
    found = list((yield query.limit(SHOWN_CANDIDATES + 1)).scalars()) if wanted else []
    if len(found) == 1:
        return str(found[0])
    if not found:
        raise UnknownNodeError(session_id, node_id)
    more = len(found) > SHOWN_CANDIDATES
    raise AmbiguousNodeError(session_id, node_id, found[:SHOWN_CANDIDATES], more)
