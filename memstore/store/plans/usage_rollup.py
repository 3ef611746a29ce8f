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

__all__ = [
    "DAY",
    "SUMMED",
    "UsageRollup",
    "pruned_part",
    "roll_up",
    "session_usage_sums",
    "usage_sum",
]

SUMMED = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd")
DAY = {
    "sqlite": "date({created} / 1000, 'unixepoch')",
    "postgresql": "to_char(to_timestamp({created} / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
}
"""A node's day (UTC) from its time in ms, per dialect (the `usage` view's `day`)."""
CHUNK = 500
Group = tuple[str, str, str | None, str | None, int]  # session, day, provider, model, counted
BIGINT_MAX = 2**63 - 1
"""The largest value of a 64-bit integer column (SQLite's, PostgreSQL's `bigint`)."""


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
    groups: dict[Group, list[list[Any]]] = {}  # a group's rows: one, but for huge sums
    for session_id, node_id, day, provider, model, values in rows:
        counted = int(node_id not in kept and first[node_id] == session_id)
        parts = groups.setdefault((session_id, day, provider, model, counted), [])
        call = [1, *values]
        if parts and _fits(parts[-1], call):
            parts[-1] = [_plus(total, value) for total, value in zip(parts[-1], call, strict=True)]
        else:
            parts.append(call)
    if write:
        yield from _add_to_rows(groups)
    every = [part for parts in groups.values() for part in parts]
    totals = [sum(part[index] or 0 for part in every) for index in range(6)]
    calls, input_tokens, output_tokens, cache_read, cache_write = (int(n) for n in totals[:5])
    return UsageRollup(
        calls, input_tokens, output_tokens, cache_read, cache_write, round(float(totals[5]), 9)
    )


def _fits(sums: Sequence[Any], more: Sequence[Any]) -> bool:
    """Whether `more` (calls, then `SUMMED`) adds to `sums` within the 64-bit integers of the
    token columns; a group's usage that does not goes on another row of `pruned_usage`."""
    added = [_plus(total, value) for total, value in zip(sums[1:5], more[1:5], strict=True)]
    return all(total is None or abs(total) <= BIGINT_MAX for total in added)


def _add_to_rows(groups: Mapping[Group, list[list[Any]]]) -> Plan[None]:
    """Add each group's sums to its `pruned_usage` row, or make the row (and more rows for
    sums past the 64-bit integers)."""
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
    keys = ("session_id", "day", "provider", "model", "counted")
    for group, parts in groups.items():
        row = existing.get(group)
        if row is not None and _fits(row[6:], parts[0]):
            added = {
                name: _plus(row[6 + index], parts[0][index]) for index, name in enumerate(columns)
            }
            yield (
                update(pruned_usage)
                .where(of_tenant(pruned_usage), pruned_usage.c.pk == row.pk)
                .values(**added)
            )
            parts = parts[1:]
        for sums in parts:
            values = dict(zip(keys, group, strict=True)) | dict(zip(columns, sums, strict=True))
            yield insert(pruned_usage).values(tenant=TENANT, **values)


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


_WORD: ColumnElement[int] = literal_column("32")
_LOW_BITS: ColumnElement[int] = literal_column("4294967295")  # 2**32 - 1
_HIGH_UNIT: ColumnElement[int] = literal_column("4294967296")  # 2**32


def usage_sum(column: ColumnElement[Any]) -> ColumnElement[Any]:
    """SUM of a usage column that no stored value makes fail. A token count is summed as its
    high and low 32 bits apart (neither sum can pass 2**63 under 2**31 rows) and joined: the
    exact total up to 2**63 - 1; above it, SQLite's integer arithmetic gives the nearest float
    (PostgreSQL's numeric stays exact). SQLite's SUM raised "integer overflow" past 2**63 - 1:
    1,025 turns at `MAX_TOKENS` made every listing fail. The cost (a float) is summed as it is."""
    if column.name == "cost_usd":
        return func.sum(column)
    return func.sum(column.op(">>")(_WORD)) * _HIGH_UNIT + func.sum(column.op("&")(_LOW_BITS))


def _session_sum(name: str) -> ColumnElement[Any]:
    """A session's total of a column: its nodes' usage and the usage pruned from it."""
    of_session = [
        select(usage_sum(table.c[name]))
        .where(of_tenant(table), table.c.session_id == sessions.c.id)
        .scalar_subquery()
        for table in (node_usage, pruned_usage)
    ]
    zero = literal(0)
    return (func.coalesce(of_session[0], zero) + func.coalesce(of_session[1], zero)).label(name)


def session_usage_sums(names: Sequence[str]) -> list[ColumnElement[Any]]:
    """The `SessionInfo` usage totals of a `sessions` row, one labelled column each."""
    return [_session_sum(name) for name in names]
