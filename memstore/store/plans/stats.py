"""Totals over the whole store (`memstore stats`): sessions, nodes, records and tool calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Table, func, select

from memstore.store.plans.contract import Plan
from memstore.store.tables import (
    NOT_IMPORTING,
    node_blocks,
    nodes,
    of_visible_session,
    records,
    sessions,
)

__all__ = ["StoreStats", "store_stats"]


@dataclass(frozen=True)
class StoreStats:
    """Totals over the whole store; `records` counts JSONL lines, as an import reports them."""

    sessions: int
    nodes: int
    records: int
    tool_calls: int
    failed_tool_calls: int
    top_tools: tuple[tuple[str, int], ...]


def _visible_count(table: Table, *where: ColumnElement[bool]) -> Any:
    """How many rows of `table` match `where`, but for sessions being imported: a count of all
    and one of theirs (none but while an import runs), so that counting all stays fast."""
    importing = select(sessions.c.id).where(sessions.c.importing.is_not(None))
    everything = select(func.count()).select_from(table).where(*where)
    theirs = everything.where(table.c.session_id.in_(importing))
    return everything.scalar_subquery() - theirs.scalar_subquery()


def store_stats(top: int = 10) -> Plan[StoreStats]:
    """Counts of sessions, nodes, records and tool calls, and the most used tools."""
    totals = (
        yield select(
            select(func.count()).where(NOT_IMPORTING).scalar_subquery(),
            _visible_count(nodes),
            _visible_count(records),
            _visible_count(records, records.c.kind == "append"),
            _visible_count(node_blocks, node_blocks.c.kind == "tool_call"),
            _visible_count(node_blocks, node_blocks.c.is_error == 1),
        )
    ).one()
    calls = func.count().label("calls")
    tools = yield (
        select(node_blocks.c.tool_name, calls)
        .where(node_blocks.c.kind == "tool_call", of_visible_session(node_blocks.c.session_id))
        .group_by(node_blocks.c.tool_name)
        .order_by(calls.desc(), node_blocks.c.tool_name)
        .limit(top)
    )
    session_count, node_count, rows, appends, call_count, failed_count = map(int, tuple(totals))
    return StoreStats(
        sessions=session_count,
        nodes=node_count,
        records=rows + appends,  # an append row stands for a node line and a head line
        tool_calls=call_count,
        failed_tool_calls=failed_count,
        top_tools=tuple((row.tool_name or "", row.calls) for row in tools),
    )
