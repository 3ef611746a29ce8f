"""Erasure receipts: the rows of `erasures` that `erase` writes (see `plans.erasure`), read
back as `ErasureReceipt`s."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from memstore.errors import InvalidArgumentError
from memstore.store.plans.contract import Plan
from memstore.store.tables import erasures, of_tenant

__all__ = ["ErasureReceipt", "erasures_of"]


@dataclass(frozen=True)
class ErasureReceipt:
    """One erasure's receipt, a row of `erasures`: when (`erased_at`, epoch ms), what (`scope`:
    "session", "node" or "subject"; `target`: the session id, `session/node` or `key=value`),
    why (`reason`), how much (`sessions_deleted`, `nodes_erased`, `summaries_erased` among
    those), and what it reached: the sessions deleted whole (`sessions`) and, per other
    session, the nodes tombstoned (`nodes`). Never the content erased."""

    id: int
    erased_at: int
    scope: str
    target: str
    reason: str
    sessions_deleted: int
    nodes_erased: int
    summaries_erased: int
    sessions: tuple[str, ...] = ()
    nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def _receipt(row: Any) -> ErasureReceipt:
    """A row of `erasures` as its receipt (`targets_json` read into `sessions` and `nodes`)."""
    reached = json.loads(row.targets_json)
    return ErasureReceipt(
        id=int(row.id),
        erased_at=int(row.erased_at),
        scope=row.scope,
        target=row.target,
        reason=row.reason,
        sessions_deleted=int(row.sessions_deleted),
        nodes_erased=int(row.nodes_erased),
        summaries_erased=int(row.summaries_erased),
        sessions=tuple(reached["sessions"]),
        nodes={session: tuple(ids) for session, ids in reached["nodes"].items()},
    )


def erasures_of(limit: int | None = None) -> Plan[list[ErasureReceipt]]:
    """The receipts, newest first.

    Raises:
        InvalidArgumentError: `limit` is no whole number >= 0.
    """
    if limit is not None and (type(limit) is not int or limit < 0):
        raise InvalidArgumentError(f"a receipt list's limit is a whole number >= 0, not {limit!r}")
    query = select(erasures).where(of_tenant(erasures)).order_by(erasures.c.id.desc())
    if limit is not None:
        query = query.limit(limit)
    rows = yield query
    return [_receipt(row) for row in rows]
