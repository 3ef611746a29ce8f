"""Path reads: the turns from a session's root to a leaf, or the newest of them.

A session that is one chain is read flat, in the order stored; any other path is walked in SQL,
parent link by parent link, from the leaf (`_walk_query`).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import ColumnElement, Select, bindparam, case, false, func, literal, select, true

from memstore.errors import InvalidArgumentError, InvalidNodeIdError, UnknownNodeError
from memstore.store.bulk import paused_gc
from memstore.store.plans.contract import Plan
from memstore.store.plans.nodes import (
    lookup_id,
    node_from_row,
    node_rows,
    nodes_from_rows,
    session_row,
)
from memstore.store.policy import BACKENDS, Backend
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
from memstore.toolpairs import call_ids, result_ids, unanswered
from memstore.types import SessionNode, Turn

__all__ = ["load_path", "load_path_nodes"]


def _walk_start() -> Select[Any]:
    """The walk's first row: the leaf (`:leaf`), its parent and depth 1, if the session
    (`:session_id`) holds it and is visible."""
    session_id: Any = bindparam("session_id")
    return select(nodes.c.pk, nodes.c.parent_id, literal(1).label("depth")).where(
        of_tenant(nodes),
        nodes.c.session_id == session_id,
        nodes.c.id == bindparam("leaf"),
        of_visible_session(session_id),  # of the parameter: checked once, not per row
    )


def _walk_query(backend: Backend) -> Select[Any]:
    """Walk parent links from `:leaf` towards the root (at most `:limit` nodes), giving each
    node's row and depth (1: the leaf), in no particular order.

    The recursive part carries each node's key and parent only; the turns are read once, by key,
    after the walk (carrying them through the recursion copied every turn into its work table).
    On PostgreSQL each step, and each read of a turn, is a LATERAL subquery with LIMIT 1, which
    the planner must run once per node (an index lookup): as a plain join it may pick a hash
    join, reading the whole session once per step, when its statistics are stale. The caller
    sorts by depth: a sort in the database would copy every turn once more (to disk, past
    `work_mem`), where the rows come out of the walk nearly in order already.
    """
    if not backend.cost_based_planner:
        return _indexed_walk_query()
    session_id: Any = bindparam("session_id")
    path = _walk_start().cte("path", recursive=True)
    parent = (
        select(nodes.c.pk, nodes.c.parent_id)
        .where(of_tenant(nodes), nodes.c.session_id == session_id, nodes.c.id == path.c.parent_id)
        .limit(1)
        .lateral("parent")
    )
    step = select(parent.c.pk, parent.c.parent_id, (path.c.depth + 1).label("depth"))
    step = step.join_from(path, parent, true()).where(path.c.depth < bindparam("limit"))
    path = path.union_all(step)
    columns = (nodes.c.id, nodes.c.parent_id, nodes.c.turn_json, nodes.c.created_at)
    row = select(*columns).where(nodes.c.pk == path.c.pk).limit(1).lateral("row")
    return select(*row.c, path.c.depth).join_from(path, row, true())


def _indexed_walk_query() -> Select[Any]:
    """The walk where the planner has no statistics to misread (SQLite's, which always walks
    the unique index, one node at a time): the recursive part carries each node's key and
    parent only, and the turns are read once, by key, root first. Carrying the turns through
    the walk copied each into the queue of the recursion: it took twice as long as reading the
    whole session."""
    session_id: Any = bindparam("session_id")
    path = _walk_start().cte("path", recursive=True)
    parent = nodes.alias("parent")
    step = select(parent.c.pk, parent.c.parent_id, (path.c.depth + 1).label("depth")).where(
        of_tenant(parent),
        parent.c.session_id == session_id,
        parent.c.id == path.c.parent_id,
        path.c.depth < bindparam("limit"),
    )
    path = path.union_all(step)
    walked = select(path.c.pk, path.c.depth).order_by(path.c.depth.desc()).subquery("walked")
    return select(
        nodes.c.id, nodes.c.parent_id, nodes.c.turn_json, nodes.c.created_at, walked.c.depth
    ).join_from(walked, nodes, nodes.c.pk == walked.c.pk)


_PATHS = {backend: Prepared(_walk_query(backend)) for backend in BACKENDS}
_NO_LIMIT = 2**31 - 1
_DEPTH = 4  # the depth's column in a row of `_PATHS`


def _chain_check() -> Select[Any]:
    """Where a whole path ends and whether it can be read flat, in one statement: the leaf
    (`:leaf`, else the session's head), its key, and whether the session is one chain (one
    root, no node with two children: index scans, about 1 ms per 5,000 nodes on SQLite). No
    row: no such session, or one being imported."""
    session_id: Any = bindparam("session_id")
    leaf = func.coalesce(bindparam("leaf", type_=Id), sessions.c.head)
    of_session = of_tenant(nodes) & (nodes.c.session_id == session_id)
    linked = nodes.c.parent_id.is_not(None)

    def count(*where: ColumnElement[bool]) -> Any:
        return select(func.count()).select_from(nodes).where(of_session, *where).scalar_subquery()

    # Grouped in the order of the partial index on (session_id, parent_id): no temporary table
    # (count(DISTINCT parent_id) built one), and it stops at the first node with two children.
    forked = (
        select(nodes.c.parent_id)
        .where(of_session, linked)
        .group_by(nodes.c.parent_id)
        .having(func.count() > 1)
        .exists()
    )
    leaf_key = select(nodes.c.pk).where(of_session, nodes.c.id == leaf).scalar_subquery()
    # The roots are counted only when no node has two children: a branchy session's first fork
    # is found a few index entries in, where counting reads the whole session.
    one_chain = case((~forked, count(IN_STORED_ORDER) - count(linked) == 1), else_=false())
    return select(leaf, leaf_key, one_chain).where(sessions.c.id == session_id, NOT_IMPORTING)


_CHAIN_CHECK = Prepared(_chain_check())


def _chain_rows(backend: Backend, *, times: bool) -> Select[Any]:
    """The nodes stored up to the leaf (`:leaf_key`): in a session that is one chain, where each
    node is stored after its parent, the path to the leaf (the reader checks that it is).
    SQLite reads them in stored order from its index. Where the planner is cost-based
    (PostgreSQL) they come with their keys, and the reader sorts them, as it sorts a walk's rows:
    a sort in the database, which that planner may prefer to the index, copies every turn once
    more (to disk, past `work_mem`).
    Without `times`, no `created_at` (for turns without their nodes)."""
    columns = [nodes.c.id, nodes.c.parent_id, nodes.c.turn_json]
    query = select(*columns, *([nodes.c.created_at] if times else [])).where(
        of_tenant(nodes),
        nodes.c.session_id == bindparam("session_id"),
        IN_STORED_ORDER,
        nodes.c.pk <= bindparam("leaf_key"),
    )
    return (
        query.add_columns(nodes.c.pk) if backend.cost_based_planner else query.order_by(nodes.c.pk)
    )


_CHAIN_ROWS = {
    (backend, times): Prepared(_chain_rows(backend, times=times))
    for backend in BACKENDS
    for times in (False, True)
}
_KEY = -1  # the key's column in a row of `_CHAIN_ROWS` for a cost-based planner


def _is_path_to(rows: Sequence[Any], leaf: str) -> bool:
    """Whether `rows` (id, parent_id, ...) are a path: a root, then each the child of the row
    before, up to `leaf`. Stored order puts parents first, but this does not trust it."""
    ids = [row[0] for row in rows]
    return bool(ids) and ids[-1] == leaf and [row[1] for row in rows] == [None, *ids[:-1]]


def _walked_rows(backend: Backend, session_id: str, leaf: str, limit: int) -> Plan[list[Any]]:
    """The rows (id, parent_id, turn_json, created_at, depth) of the path to `leaf`, at most
    `limit` of them, walked in SQL from the leaf; root first."""
    walk = _PATHS[backend]
    key = {"session_id": lookup_id(session_id), "leaf": lookup_id(leaf), "limit": limit}
    return sorted((yield walk, key), key=itemgetter(_DEPTH), reverse=True)


def _whole_path_rows(
    backend: Backend, session_id: str, leaf: str | None, *, times: bool = True
) -> Plan[Sequence[Any]]:
    """The rows (id, parent_id, turn_json, created_at, ...) of the path from the root to `leaf`
    (default: the head), root first; none for an empty or missing session (without `times`,
    the rows may lack `created_at`: for turns without their nodes). A session that is
    one chain is read flat, in the order stored (a walk looks each node up by its key: twice
    as long); any other, or one whose rows are no path, is walked.

    Raises:
        UnknownNodeError: the session has no node `leaf`.
    """
    key = lookup_id(session_id)
    given = None if leaf is None else lookup_id(leaf)
    found = (yield _CHAIN_CHECK, {"session_id": key, "leaf": given}).first()
    if found is None or found[0] is None:
        if leaf is None:
            return []
        raise UnknownNodeError(session_id, leaf)
    end, end_key, one_chain = found
    if end_key is None:
        raise UnknownNodeError(session_id, end if leaf is None else leaf)
    if one_chain:
        rows = yield from _rows_stored_up_to(backend, key, end_key, times=times)
        if _is_path_to(rows, end):
            return rows
    return (yield from _walked_rows(backend, session_id, end, _NO_LIMIT))


def _rows_stored_up_to(
    backend: Backend, session_id: str, leaf_key: int, *, times: bool
) -> Plan[Sequence[Any]]:
    """The rows of `_CHAIN_ROWS`, in the order stored."""
    params = {"session_id": session_id, "leaf_key": leaf_key}
    if backend.cost_based_planner:
        return sorted((yield _CHAIN_ROWS[backend, times], params), key=itemgetter(_KEY))
    return (yield _CHAIN_ROWS[backend, times], params).all()


def _newest_path_nodes(
    backend: Backend, session_id: str, leaf: str | None, last: int
) -> Plan[list[SessionNode]]:
    """The newest `last` nodes of the path to `leaf` (default: the head), walked in SQL (a
    walk of `last` steps, where a flat read would read the whole session), moved back so that
    no tool_result is cut off from its tool_call."""
    if leaf is None:
        leaf = (yield session_row(session_id)).scalar_one_or_none()
        if leaf is None:
            return []
    if last == 0:
        return []
    with paused_gc():  # the rows too: fetching them triggered collections of the whole heap
        path = nodes_from_rows((yield from _walked_rows(backend, session_id, leaf, last)))
    if not path:
        raise UnknownNodeError(session_id, leaf)
    # Back off a tool_result, and through a run of tool calls until every result's call is in:
    # parallel calls stored one per turn put a result's call several turns before it.
    missing = unanswered([node.turn for node in path])
    while path[0].parent is not None and (
        path[0].turn.has_tool_result or (missing and call_ids(path[0].turn))
    ):
        (row,) = yield node_rows(session_id, [path[0].parent])
        path.insert(0, node_from_row(row))
        missing.update(result_ids(path[0].turn))
        missing.difference_update(call_ids(path[0].turn))
    return path


def _check_path_arguments(leaf: object, last: object) -> None:
    """Refuse a leaf that is no string and a `last` that is no whole number >= 0."""
    if leaf is not None and not isinstance(leaf, str):
        raise InvalidNodeIdError(f"a node id is a string, not {type(leaf).__name__}")
    if last is not None and (type(last) is not int or last < 0):
        raise InvalidArgumentError(f"last must be a whole number >= 0, got {last!r}")


def load_path_nodes(
    backend: Backend, session_id: str, leaf: str | None = None, last: int | None = None
) -> Plan[list[SessionNode]]:
    """The nodes from the root (or the newest `last`, moved back off a tool_result) to `leaf`."""
    _check_path_arguments(leaf, last)
    if last is not None:
        return (yield from _newest_path_nodes(backend, session_id, leaf, min(last, _NO_LIMIT)))
    with paused_gc():  # the rows too: fetching them triggered collections of the whole heap
        return nodes_from_rows((yield from _whole_path_rows(backend, session_id, leaf)))


def load_path(
    backend: Backend, session_id: str, leaf: str | None = None, last: int | None = None
) -> Plan[list[Turn]]:
    """The turns of `load_path_nodes`, without the nodes: a long path's turns are built in one
    loop, and no node is built to be thrown away."""
    _check_path_arguments(leaf, last)
    if last is not None:
        path = yield from _newest_path_nodes(backend, session_id, leaf, min(last, _NO_LIMIT))
        return [node.turn for node in path]
    with paused_gc():
        rows = yield from _whole_path_rows(backend, session_id, leaf, times=False)
        return Turn._from_stored_texts([row[2] for row in rows])
