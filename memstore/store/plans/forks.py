"""Forks: a session's path copied into a new session, with what is kept beside its nodes (usage,
writers' keys, and the log lines that carry them to an export)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Table, insert, literal, or_, select

from memstore import jsjson
from memstore.errors import UnknownSessionError
from memstore.store.node_lines import NODE_LINE_TYPES, node_line_opening
from memstore.store.plans.appends import INSERT_RECORDS, append_records, insert_nodes
from memstore.store.plans.contract import Plan, now_ms
from memstore.store.plans.nodes import session_row
from memstore.store.plans.paths import load_path_nodes
from memstore.store.plans.sessions import metadata_object, refuse_taken_id
from memstore.store.policy import Backend
from memstore.store.tables import TENANT, node_keys, node_usage, nodes, of_tenant, records, sessions
from memstore.types import validate_session_id

__all__ = ["fork_session"]


def fork_session(
    backend: Backend,
    source_id: str,
    leaf: str | None,
    new_id: str,
    metadata: Mapping[str, Any] | None = None,
) -> Plan[str | None]:
    """Copy the path to `leaf` (default: the head) of one session into a new session, with
    `metadata` as its metadata object (so a fork that names what it is takes one transaction).

    The new session's records are those the original writer would have written for appending
    the path's nodes one by one; the copied nodes keep their usage (`node_usage`) and their
    writers' keys (`node_keys`), and the usage and key lines of the source's log that carry them
    to an export. Returns the new session's head.
    """
    validate_session_id(new_id)
    meta = (
        None
        if metadata is None
        else metadata_object(backend, f"metadata of session {new_id!r}", metadata)
    )
    if (yield session_row(source_id)).first() is None:
        raise UnknownSessionError(f"no session {source_id!r}")
    yield from refuse_taken_id(new_id)
    path = yield from load_path_nodes(backend, source_id, leaf)
    now = now_ms()
    new_head = path[-1].id if path else None
    yield insert(sessions).values(
        tenant=TENANT, id=new_id, head=new_head, created_at=now, updated_at=now, meta=meta
    )
    if path:
        yield from insert_nodes(backend, new_id, path)
        yield append_records(new_id, path)
        yield from _copy_node_lines(source_id, new_id, {node.id for node in path})
        yield _copy_rows(node_usage, source_id, new_id)
        yield _copy_rows(node_keys, source_id, new_id)
    return new_head


def _copy_node_lines(source_id: str, new_id: str, kept: set[str]) -> Plan[None]:
    """Copy the source's usage and key lines (`memstore.store.node_lines`) of the nodes `kept`
    into the new session's log, in their order, so that its export carries them too."""
    openings = [node_line_opening(kind) for kind in NODE_LINE_TYPES]
    found = yield (
        select(records.c.raw)
        .where(
            of_tenant(records),
            records.c.session_id == source_id,
            records.c.kind == "other",
            records.c.node_id.is_(None),
            or_(*(records.c.raw.startswith(opening, autoescape=True) for opening in openings)),
        )
        .order_by(records.c.pk)
    )
    lines = [
        {"session_id": new_id, "kind": "other", "node_id": None, "raw": raw}
        for raw in found.scalars()
        if jsjson.loads(raw).get("node") in kept
    ]
    if lines:
        yield INSERT_RECORDS, lines


def _copy_rows(table: Table, source_id: str, new_id: str) -> Any:
    """One INSERT ... SELECT that copies the source's rows of `table` (keyed by session and
    node) for the nodes the new session holds: no list of ids is bound, however long the path."""
    copied = select(nodes.c.id).where(of_tenant(nodes), nodes.c.session_id == new_id)
    names = [column.name for column in table.columns]
    rows = select(
        *(
            literal(new_id, column.type).label(name) if name == "session_id" else column
            for name, column in zip(names, table.columns, strict=True)
        )
    ).where(of_tenant(table), table.c.session_id == source_id, table.c.node_id.in_(copied))
    return insert(table).from_select(names, rows)
