"""Listing: the store operations that list sessions and total them (see `StoreBase`).

Sessions a page at a time (keyset cursors, `plans.paging`), one session's summary, and the
store's totals, overall or by session, model or day.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from memstore.condense import estimate_context_tokens
from memstore.store import plans
from memstore.store.core import StoreCore
from memstore.store.operation import Program, operation
from memstore.store.plans import (
    SessionInfo,
    SessionOrder,
    SessionPage,
    StoreStats,
    TenantTotals,
    UsageGrouping,
    UsageTotals,
    Window,
    epoch_ms,
)
from memstore.store.plans.paging import tag_filter
from memstore.usage import estimate_with_usage

__all__ = ["Listing"]


def _window(
    order: SessionOrder,
    cursor: str | None,
    updated_before: int | datetime | None,
    updated_after: int | datetime | None,
) -> Window:
    return Window(
        order,
        cursor,
        epoch_ms(updated_before, "updated_before"),
        epoch_ms(updated_after, "updated_after"),
    )


class Listing(StoreCore):
    """Listings and totals, as operations of both stores."""

    @operation
    def sessions(
        self,
        *,
        tag: str | None = None,
        title_contains: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        updated_before: int | datetime | None = None,
        updated_after: int | datetime | None = None,
        order: SessionOrder = "updated",
    ) -> Program[list[SessionInfo]]:
        """Sessions with their metadata and usage totals, most recently updated first,
        optionally filtered; `session_page` gives them a page at a time with its next cursor.

        Args:
            tag: only sessions with this tag.
            title_contains: only sessions whose title contains this text.
            metadata: only sessions whose metadata holds these top-level values.
            limit: at most this many.
            cursor: start after the session a page's `next_cursor` names (keyset: a page
                costs the same at any depth, and writes meanwhile shift nothing).
            updated_before: only sessions updated before this (epoch ms or an aware datetime).
            updated_after: only sessions updated after this.
            order: "updated" (newest first) or "id"; in "id" order paging lists every session
                exactly once however sessions are written meanwhile, in "updated" order a
                session written meanwhile moves ahead of the cursor (never listed twice).

        Raises:
            InvalidArgumentError: a malformed filter (an empty `tag` too), limit, time or
                cursor (or a cursor of another order).
        """
        window = _window(order, cursor, updated_before, updated_after)
        plan = plans.list_sessions(
            tag=tag_filter(tag),
            title_contains=title_contains,
            metadata=metadata,
            limit=limit,
            window=window,
        )
        return (yield from self._read(plan, "listing sessions"))

    @operation
    def session_page(
        self,
        *,
        tag: str | None = None,
        title_contains: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 100,
        cursor: str | None = None,
        updated_before: int | datetime | None = None,
        updated_after: int | datetime | None = None,
        order: SessionOrder = "updated",
    ) -> Program[SessionPage]:
        """One page of `sessions` (at most `limit`, default 100) and the cursor of the next
        (None after the last page): pass it back as `cursor`, with the same filters.

        Raises:
            InvalidArgumentError: as `sessions`, or `limit` below 1.
        """
        window = _window(order, cursor, updated_before, updated_after)
        plan = plans.session_page(
            tag=tag_filter(tag),
            title_contains=title_contains,
            metadata=metadata,
            limit=limit,
            window=window,
        )
        return (yield from self._read(plan, "listing sessions"))

    @operation
    def session_info(self, session_id: str) -> Program[SessionInfo]:
        """One session's metadata. Raises UnknownSessionError when it does not exist."""
        return (yield from self._read(plans.session_info(session_id), "reading a session"))

    @operation
    def stats(self, *, top: int = 10) -> Program[StoreStats]:
        """Totals over the whole store: sessions, nodes, records, tool calls, top tools."""
        return (yield from self._read(plans.store_stats(top), "reading statistics"))

    @operation
    def tenants(self) -> Program[list[TenantTotals]]:
        """Every tenant of the database that holds sessions, with how many, whatever this
        store's own tenant: for an operator (`memstore tenants`). On PostgreSQL only a login
        the row-level security policies do not bind may list them (docs/tenants.md).

        Raises:
            StoreError: PostgreSQL, over a login the policies bind.
        """
        return (yield from self._read(plans.tenant_totals(self.backend), "listing tenants"))

    @operation
    def usage_stats(
        self, by: UsageGrouping = "session", *, limit: int | None = None
    ) -> Program[list[UsageTotals]]:
        """What the model calls cost (`node_usage`: tokens and US dollars), summed by "session",
        "model" or "day" (UTC, the nodes' times), the most expensive first.

        Raises:
            InvalidArgumentError: `by` is none of those, or `limit` is below 0.
        """
        plan = plans.usage_totals(self.backend, by, limit)
        return (yield from self._read(plan, "totalling usage"))

    @operation
    def estimate_tokens(
        self, session_id: str, leaf: str | None = None, *, usage_aware: bool = False
    ) -> Program[int]:
        """The context tokens of the path to `leaf` (default: the head): the seed's character
        rule (`estimate_context_tokens`), or with `usage_aware=True` the input tokens a provider
        last reported on the path plus the character rule for the turns after it (see
        `memstore.usage.estimate_with_usage`).

        Raises:
            UnknownNodeError: the session has no node `leaf`.
        """
        path = yield from self._read(
            plans.load_path_nodes(self.backend, session_id, leaf), "loading a path"
        )
        turns = [node.turn for node in path]
        if not usage_aware:
            return estimate_context_tokens(turns)
        ids = [node.id for node in path]
        found = yield from self._read(plans.node_usages(session_id, ids), "reading usage")
        return estimate_with_usage(turns, [found.get(node_id) for node_id in ids])
