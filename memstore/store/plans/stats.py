"""Totals over the whole store (`memstore stats`): sessions, nodes, records and tool calls; and
what the model calls cost, by session, model or day (`memstore stats --by`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Select,
    Table,
    exists,
    func,
    literal_column,
    select,
    table,
    union_all,
)

from memstore.errors import InvalidArgumentError, StoreError
from memstore.store.plans.contract import Plan
from memstore.store.plans.usage_rollup import DAY, SUMMED, pruned_part, usage_sum
from memstore.store.policy import Backend
from memstore.store.tables import (
    NOT_IMPORTING,
    node_blocks,
    node_usage,
    nodes,
    of_tenant,
    of_visible_session,
    records,
    sessions,
)
from memstore.usage import NodeUsage, cost_total

__all__ = [
    "StoreStats",
    "TenantTotals",
    "UsageGrouping",
    "UsageTotals",
    "node_usages",
    "store_stats",
    "tenant_totals",
    "usage_totals",
]


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
    importing = select(sessions.c.id).where(of_tenant(sessions), sessions.c.importing.is_not(None))
    everything = select(func.count()).select_from(table).where(of_tenant(table), *where)
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


@dataclass(frozen=True)
class TenantTotals:
    """One tenant of a database (`memstore tenants`): its sessions, and when the last of them
    was updated (epoch ms); '' is the default tenant."""

    tenant: str
    sessions: int
    updated_at: int


def tenant_totals(backend: Backend) -> Plan[list[TenantTotals]]:
    """Every tenant that holds a session, with its count of sessions, but for those being
    imported: the one plan that reads across tenants (it names no tenant), for an operator.

    Raises:
        StoreError: PostgreSQL, over a login the row-level security policies bind, which would
            list its own tenant only (or none) as if it were every tenant.
    """
    if not backend.one_file:
        unbound: ColumnElement[bool] = literal_column("rolsuper OR rolbypassrls")
        login = literal_column("rolname") == func.current_user()
        (row,) = yield select(unbound).select_from(table("pg_roles")).where(login)
        if not row[0]:
            raise StoreError(
                "listing tenants needs a login that row-level security does not bind (a "
                "superuser or a BYPASSRLS role, docs/tenants.md): this one sees one tenant's "
                "sessions at most"
            )
    count = func.count().label("sessions")
    latest = func.max(sessions.c.updated_at).label("updated_at")
    rows = yield (
        select(sessions.c.tenant, count, latest)
        .where(sessions.c.importing.is_(None))
        .group_by(sessions.c.tenant)
        .order_by(sessions.c.tenant)
    )
    return [TenantTotals(row.tenant, int(row.sessions), int(row.updated_at)) for row in rows]


UsageGrouping = Literal["session", "model", "day"]


@dataclass(frozen=True)
class UsageTotals:
    """What the model calls of one group (a session, a model or a day, UTC) cost: the nodes
    with usage, their tokens and US dollars."""

    key: str | None
    nodes: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float


def usage_totals(backend: Backend, by: str, limit: int | None = None) -> Plan[list[UsageTotals]]:
    """`node_usage` summed by session, model or day (UTC), with the usage prunes deleted
    (`pruned_usage`), the most expensive first (then by tokens and key).

    Raises:
        InvalidArgumentError: `by` is none of "session", "model", "day", or a bad `limit`.
    """
    if by not in ("session", "model", "day"):
        raise InvalidArgumentError(f"usage is totalled by session, model or day, not {by!r}")
    if limit is not None and (type(limit) is not int or limit < 0):
        raise InvalidArgumentError(f"a limit is a whole number >= 0, not {limit!r}")
    both = union_all(_nodes_part(backend, by), pruned_part(by)).subquery("both_usage")
    key = both.c.key
    sums = [func.coalesce(usage_sum(both.c[name]), 0) for name in SUMMED]
    cost = func.round(sums[-1] * 1_000_000_000)  # as `cost_total` rounds: sums' drift ties
    query = (
        select(key, func.sum(both.c.calls), *sums)
        .group_by(key)
        .order_by(cost.desc(), (sums[0] + sums[1]).desc(), key)
    )
    if limit is not None:
        query = query.limit(limit)
    rows = (yield query).all()
    return [
        UsageTotals(
            key=row[0],
            nodes=int(row[1]),
            input_tokens=int(row[2]),
            output_tokens=int(row[3]),
            cache_read_tokens=int(row[4]),
            cache_write_tokens=int(row[5]),
            cost_usd=cost_total(row[6]),
        )
        for row in rows
    ]


def _nodes_part(backend: Backend, by: str) -> Select[Any]:
    """The visible `node_usage` rows as (key, calls, the sums); by model or day, each model
    call once (`_first_copy`)."""
    visible = [of_visible_session(node_usage.c.session_id)]
    if by != "session":  # a node copied by a fork is one model call: counted once
        visible.append(_first_copy())
    if by == "day":
        created = f"{nodes.name}.{nodes.c.created_at.name}"
        key: Any = literal_column(DAY[backend.name].format(created=created))
    else:
        key = node_usage.c.session_id if by == "session" else node_usage.c.model
    query = (
        select(
            key.label("key"),
            literal_column("1").label("calls"),
            *(node_usage.c[name].label(name) for name in SUMMED),
        )
        .select_from(node_usage)
        .where(*visible)
    )
    if by == "day":
        of_node = (
            of_tenant(nodes)
            & (nodes.c.session_id == node_usage.c.session_id)
            & (nodes.c.id == node_usage.c.node_id)
        )
        query = query.join(nodes, of_node)
    return query


def _first_copy() -> ColumnElement[bool]:
    """Whether a visible `node_usage` row is its node's first copy: no visible session whose id
    sorts before its own holds a row of the same node id. A node id is a content address
    (parent, turn, time), so rows of one node id in several sessions are copies of one model
    call (a fork's, or the same export imported twice). One index probe per row
    (`ix_node_usage_tenant_node_id_session_id`, migrations 0027 and 0030), where numbering each
    node's copies with a window function sorted every row."""
    earlier = node_usage.alias("earlier")
    return ~exists().where(
        earlier.c.node_id == node_usage.c.node_id,
        earlier.c.session_id < node_usage.c.session_id,
        of_visible_session(earlier.c.session_id),
    )


def node_usages(session_id: str, node_ids: Sequence[str]) -> Plan[dict[str, NodeUsage]]:
    """The usage of those of `node_ids` (a session's) that have one."""
    found: dict[str, NodeUsage] = {}
    columns = [node_usage.c[name] for name in NodeUsage.__dataclass_fields__]
    for start in range(0, len(node_ids), _IDS_PER_QUERY):
        wanted = list(node_ids[start : start + _IDS_PER_QUERY])
        rows = yield select(node_usage.c.node_id, *columns).where(
            of_tenant(node_usage),
            node_usage.c.session_id == session_id,
            node_usage.c.node_id.in_(wanted),
        )
        for row in rows:
            values = dict(zip(NodeUsage.__dataclass_fields__, row[1:], strict=True))
            found[row[0]] = NodeUsage(**values)
    return found


_IDS_PER_QUERY = 500
