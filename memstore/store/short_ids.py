"""Short node ids: the shortest prefix of each id that is unique in its session, as git shows
hashes. The tree, the transcript, the tables and the HTML page show these, and
`resolve_node_id` takes any of them back to its node."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import ColumnElement, exists, func, select

from memstore.graph import SHORT_ID, short_id, short_ids
from memstore.store.plans import Plan, lookup_id
from memstore.store.tables import nodes, of_visible_session
from memstore.types import is_storable_text

__all__ = ["short_node_ids"]

WHOLE_SESSION = 32
"""Ids asked for at once above which the session's ids are read whole (one statement) rather
than each id's two neighbours (one statement each)."""


def short_node_ids(
    dialect: str, session_id: str, node_ids: Iterable[str], minimum: int = SHORT_ID
) -> Plan[dict[str, str]]:
    """Each of `node_ids` that the session holds, mapped to its short form (see
    `memstore.graph.short_id`); ids the session does not hold are left out."""
    wanted = sorted({node_id for node_id in node_ids if is_storable_text(node_id)})
    owned = (nodes.c.session_id == lookup_id(session_id)) & of_visible_session(nodes.c.session_id)
    if len(wanted) > WHOLE_SESSION:
        every = set((yield select(nodes.c.id).where(owned)).scalars())
        shown = short_ids(every, minimum)
        return {node_id: shown[node_id] for node_id in wanted if node_id in every}
    key = _code_point_order(dialect, nodes.c.id)
    found: dict[str, str] = {}
    for node_id in wanted:
        held = exists().where(owned, nodes.c.id == node_id)
        before = select(func.max(key)).where(owned, key < node_id).scalar_subquery()
        after = select(func.min(key)).where(owned, key > node_id).scalar_subquery()
        row = (yield select(held, before, after)).one()
        if row[0]:
            found[node_id] = short_id(node_id, row[1], row[2], minimum)
    return found


def _code_point_order(dialect: str, column: ColumnElement[str]) -> ColumnElement[str]:
    """`column` compared by code point, the order in which an id's neighbours are the ids
    sharing its longest prefix: SQLite's default; PostgreSQL's "C" collation (a database's
    own, such as en_US, may skip punctuation)."""
    return column.collate("C") if dialect == "postgresql" else column
