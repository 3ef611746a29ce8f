"""The usage a prune deletes, kept as totals (`pruned_usage`, migration 0035).

A prune of the branches no head reaches deletes their nodes' `node_usage` rows; after a
compaction the condensed branch carries most of a session's cost. Before deleting, the prune
sums those rows per session, day (UTC, the node's time), provider and model into `pruned_usage`,
in the same transaction, adding to a row of the same group. The session totals
(`SessionInfo`), `usage_stats` and the `usage` view add those rows, so a session's totals are the
same before and after. `counted` keeps totals by model and day the same as well: they count a
model call that forks copied once (`stats._first_copy`), so a pruned copy is counted there only
when no copy stays in another session (and then only the first pruned one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Select, func, insert, literal, literal_column, select, update

from memstore.store.plans.contract import Plan
from memstore.store.policy import Backend
from memstore.store.tables import (
    TENANT,
    node_usage,
    nodes,
    of_tenant,
    of_visible_session,
    pruned_usage,
    sessions,
)

__all__ = ["DAY", "SUMMED", "UsageRollup", "pruned_part", "roll_up", "session_usage_sums"]

SUMMED = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd")
DAY = {
    "sqlite": "date({created} / 1000, 'unixepoch')",
    "postgresql": "to_char(to_timestamp({created} / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
}
"""A node's day (UTC) from its time in ms, per dialect (the `usage` view's `day`)."""
CHUNK = 500
Group = tuple[str, str, str | None, str | None, int]  # session, day, provider, model, counted


@dataclass(frozen=True)
class UsageRollup:
    """The usage of the model calls a prune deletes (or would), which it adds to the sessions'
    totals (`pruned_usage`): how many calls, their tokens and US dollars."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0


def _plus(total: Any, value: Any) -> Any:
    """A sum as SQL's SUM makes it: NULL until a value is not NULL."""
    if value is None:
        return total
    return value if total is None else total + value


def _pruned_rows(
    backend: Backend, branches: Mapping[str, Sequence[str]]
) -> Plan[list[tuple[str, str, str, str | None, str | None, tuple[Any, ...]]]]:
    """The `node_usage` rows of the nodes of `branches` (by session): session, node, day,
    provider, model and the summed columns."""
    created = f"{nodes.name}.created_at"
    day: ColumnElement[str] = literal_column(DAY[backend.name].format(created=created))
    of_node = (
        of_tenant(nodes)
        & (nodes.c.session_id == node_usage.c.session_id)
        & (nodes.c.id == node_usage.c.node_id)
    )
    found = []
    for session_id, node_ids in branches.items():
        for start in range(0, len(node_ids), CHUNK):
            chunk = list(node_ids[start : start + CHUNK])
            rows = yield (
                select(
                    node_usage.c.session_id,
                    node_usage.c.node_id,
                    day,
                    node_usage.c.provider,
                    node_usage.c.model,
                    *(node_usage.c[name] for name in SUMMED),
                )
                .join(nodes, of_node)
                .where(
                    of_tenant(node_usage),
                    node_usage.c.session_id == session_id,
                    node_usage.c.node_id.in_(chunk),
                )
            )
            found += [(row[0], row[1], row[2], row[3], row[4], tuple(row[5:])) for row in rows]
    return found


def _copies_kept(node_ids: set[str], pruned: set[tuple[str, str]]) -> Plan[set[str]]:
    """Those of `node_ids` whose usage a visible session keeps after the prune."""
    kept: set[str] = set()
    ordered = sorted(node_ids)
    for start in range(0, len(ordered), CHUNK):
        rows = yield select(node_usage.c.session_id, node_usage.c.node_id).where(
            of_visible_session(node_usage.c.session_id),
            node_usage.c.node_id.in_(ordered[start : start + CHUNK]),
        )
        kept |= {node_id for session_id, node_id in rows if (session_id, node_id) not in pruned}
    return kept


def roll_up(
    backend: Backend, branches: Mapping[str, Sequence[str]], *, write: bool
) -> Plan[UsageRollup]:
    """Sum the usage of the nodes of `branches` (by session; about to be deleted) into
    `pruned_usage` if `write`, and return how much it is."""
    rows = yield from _pruned_rows(backend, branches)
    if not rows:
        return UsageRollup()
    pruned = {(row[0], row[1]) for row in rows}
    kept = yield from _copies_kept({row[1] for row in rows}, pruned)
    first: dict[str, str] = {}  # node id -> the session whose pruned copy counts
    for session_id, node_id, *_ in sorted(rows):
        first.setdefault(node_id, session_id)
    groups: dict[Group, list[Any]] = {}
    for session_id, node_id, day, provider, model, values in rows:
        counted = int(node_id not in kept and first[node_id] == session_id)
        sums = groups.setdefault((session_id, day, provider, model, counted), [0, *[None] * 5])
        sums[0] += 1
        for index, value in enumerate(values, start=1):
            sums[index] = _plus(sums[index], value)
    if write:
        yield from _add_to_rows(groups)
    totals = [sum(group[index] or 0 for group in groups.values()) for index in range(6)]
    calls, input_tokens, output_tokens, cache_read, cache_write = (int(n) for n in totals[:5])
    return UsageRollup(
        calls, input_tokens, output_tokens, cache_read, cache_write, round(float(totals[5]), 9)
    )


def _add_to_rows(groups: Mapping[Group, list[Any]]) -> Plan[None]:
    """Add each group's sums to its `pruned_usage` row, or make the row."""
    columns = ("calls", *SUMMED)
    key = (
        pruned_usage.c.session_id,
        pruned_usage.c.day,
        pruned_usage.c.provider,
        pruned_usage.c.model,
        pruned_usage.c.counted,
    )
    held = yield select(pruned_usage.c.pk, *key, *(pruned_usage.c[name] for name in columns)).where(
        of_tenant(pruned_usage),
        pruned_usage.c.session_id.in_(sorted({group[0] for group in groups})),
    )
    existing = {tuple(row[1:6]): row for row in held}
    for group, sums in groups.items():
        row = existing.get(group)
        if row is None:
            keys = ("session_id", "day", "provider", "model", "counted")
            values = dict(zip(keys, group, strict=True)) | dict(zip(columns, sums, strict=True))
            yield insert(pruned_usage).values(tenant=TENANT, **values)
            continue
        added = {name: _plus(row[6 + index], sums[index]) for index, name in enumerate(columns)}
        yield (
            update(pruned_usage)
            .where(of_tenant(pruned_usage), pruned_usage.c.pk == row.pk)
            .values(**added)
        )


def pruned_part(by: str) -> Select[Any]:
    """The rows of `pruned_usage` that `usage_stats(by)` adds, as (key, calls, the sums)."""
    key = {"session": pruned_usage.c.session_id, "model": pruned_usage.c.model}.get(
        by, pruned_usage.c.day
    )
    query = select(
        key.label("key"),
        pruned_usage.c.calls.label("calls"),
        *(pruned_usage.c[name].label(name) for name in SUMMED),
    ).where(of_visible_session(pruned_usage.c.session_id))
    if by != "session":
        query = query.where(pruned_usage.c.counted == 1)
    return query


def _session_sum(name: str) -> ColumnElement[Any]:
    """A session's total of a column: its nodes' usage and the usage pruned from it."""
    of_session = [
        select(func.sum(table.c[name]))
        .where(of_tenant(table), table.c.session_id == sessions.c.id)
        .scalar_subquery()
        for table in (node_usage, pruned_usage)
    ]
    zero = literal(0)
    return (func.coalesce(of_session[0], zero) + func.coalesce(of_session[1], zero)).label(name)


def session_usage_sums(names: Sequence[str]) -> list[ColumnElement[Any]]:
    """The `SessionInfo` usage totals of a `sessions` row, one labelled column each."""
    return [_session_sum(name) for name in names]
