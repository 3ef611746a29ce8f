"""Short node ids: the shortest prefix of each id that is unique in its session, as git shows
hashes. The tree, the transcript, the tables and the HTML page show these, and
`resolve_node_id` takes any of them back to its node."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func, select

from memstore.graph import SHORT_ID, short_ids
from memstore.store.plans import Plan
from memstore.store.tables import nodes, of_visible_session
from memstore.types import is_storable_text

__all__ = ["short_node_ids", "short_node_ids_by_session"]

WHOLE_SESSION = 1000
"""Ids asked for at once above which the session's ids are read whole, rather than only the
ids that share a first `minimum` characters with one of them."""


SESSIONS_AT_ONCE = 500
"""Sessions whose ids one statement of `short_node_ids_by_session` reads."""


def short_node_ids(
    session_id: str, node_ids: Iterable[str], minimum: int = SHORT_ID
) -> Plan[dict[str, str]]:
    """Each of `node_ids` that the session holds, mapped to its short form (see
    `memstore.graph.short_id`); ids the session does not hold are left out."""
    wanted = ((session_id, node_id) for node_id in node_ids)
    found = yield from short_node_ids_by_session(wanted, minimum)
    return {node_id: shown for (_, node_id), shown in found.items()}


def short_node_ids_by_session(
    wanted: Iterable[tuple[str, str]], minimum: int = SHORT_ID
) -> Plan[dict[tuple[str, str], str]]:
    """`short_node_ids` of several sessions at once: each (session id, node id) pair whose
    session holds the node, mapped to the node's short form; one statement for up to
    `SESSIONS_AT_ONCE` sessions (a listing of 1,000 sessions made 1,000 before).

    Only another id that shares an id's first `minimum` characters can make its short form
    longer than that, so a statement reads just those: a pass over each session's index,
    whatever the database's collation, with no sort.
    """
    by_session: dict[str, set[str]] = {}
    for session_id, node_id in wanted:
        if is_storable_text(session_id) and is_storable_text(node_id):
            by_session.setdefault(session_id, set()).add(node_id)
    found: dict[tuple[str, str], str] = {}
    ordered = sorted(by_session)
    for start in range(0, len(ordered), SESSIONS_AT_ONCE):
        chunk = ordered[start : start + SESSIONS_AT_ONCE]
        query = select(nodes.c.session_id, nodes.c.id).where(
            nodes.c.session_id.in_(chunk), of_visible_session(nodes.c.session_id)
        )
        starts = {node_id[:minimum] for session_id in chunk for node_id in by_session[session_id]}
        if len(starts) <= WHOLE_SESSION:
            query = query.where(func.substr(nodes.c.id, 1, minimum).in_(sorted(starts)))
        near: dict[str, set[str]] = {session_id: set() for session_id in chunk}
        for session_id, node_id in (yield query):
            near[session_id].add(node_id)
        for session_id in chunk:
            shown = short_ids(near[session_id], minimum)
            found.update(
                ((session_id, node_id), shown[node_id])
                for node_id in by_session[session_id]
                if node_id in shown
            )
    return found
