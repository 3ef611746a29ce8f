"""Short node ids: the shortest prefix of each id that is unique in its session, as git shows
hashes. The tree, the transcript, the tables and the HTML page show these, and
`resolve_node_id` takes any of them back to its node."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func, select

from memstore.graph import SHORT_ID, short_ids
from memstore.store.plans import Plan, lookup_id
from memstore.store.tables import nodes, of_visible_session
from memstore.types import is_storable_text

__all__ = ["short_node_ids"]

WHOLE_SESSION = 1000
"""Ids asked for at once above which the session's ids are read whole, rather than only the
ids that share a first `minimum` characters with one of them."""


def short_node_ids(
    session_id: str, node_ids: Iterable[str], minimum: int = SHORT_ID
) -> Plan[dict[str, str]]:
    """Each of `node_ids` that the session holds, mapped to its short form (see
    `memstore.graph.short_id`); ids the session does not hold are left out.

    Only another id that shares an id's first `minimum` characters can make its short form
    longer than that, so one statement reads just those: a pass over the session's index,
    whatever the database's collation, with no sort.
    """
    wanted = {node_id for node_id in node_ids if is_storable_text(node_id)}
    if not wanted:
        return {}
    owned = (nodes.c.session_id == lookup_id(session_id)) & of_visible_session(nodes.c.session_id)
    query = select(nodes.c.id).where(owned)
    if len(wanted) <= WHOLE_SESSION:
        starts = {node_id[:minimum] for node_id in wanted}
        query = query.where(func.substr(nodes.c.id, 1, minimum).in_(sorted(starts)))
    near = set((yield query).scalars())
    shown = short_ids(near, minimum)
    return {node_id: shown[node_id] for node_id in wanted if node_id in near}
