"""Retention: the store operations that say when sessions expire and prune what a filter
selects (see `StoreBase`; the plans are `plans.retention`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from memstore.store import plans
from memstore.store.exchange import Exchange
from memstore.store.operation import Program, operation
from memstore.store.plans.paging import epoch_ms, tag_filter
from memstore.store.plans.retention import Expiry, ExpiryDefaults, PruneReport, duration_ms

__all__ = ["Retention"]


class Retention(Exchange):
    """Expiry defaults and pruning, as operations of both stores."""

    @operation
    def set_expiry_default(
        self, after: timedelta | None, *, tag: str | None = None
    ) -> Program[None]:
        """Expire sessions without an `expires_at` this long after their last update: those
        with `tag` (with several such tags, the longest wins), else the store's (None: never)."""
        after_ms = None if after is None else duration_ms(after, "after")
        plan = plans.set_expiry_default(after_ms, tag_filter(tag))
        yield from self._write(plan, "setting an expiry default")

    @operation
    def set_expiry(self, session_ids: Sequence[str], expires_at: Expiry) -> Program[None]:
        """Give several sessions one expiry of their own, all or none (one transaction).

        `update_session(id, expires_at=...)` does it for one session (and makes it when it is
        missing); this changes only sessions that exist, so a mistyped id changes nothing.

        Args:
            session_ids: the sessions, every one of which must exist.
            expires_at: epoch ms or an aware datetime; None: back to the tags' or the store's
                default (`set_expiry_default`).

        Raises:
            UnknownSessionError: a session the store does not hold (nothing is changed).
            InvalidArgumentError: no session ids, or an expiry that is no epoch ms >= 0 or
                aware datetime.
        """
        plan = plans.set_expiry(session_ids, expires_at)
        yield from self._write(plan, "setting sessions' expiry")

    @operation
    def expiry_defaults(self) -> Program[ExpiryDefaults]:
        """The store's default expiry and each tag's, in ms (`set_expiry_default`)."""
        return (yield from self._read(plans.expiry_defaults_of(), "reading expiry defaults"))

    @operation
    def prune(
        self,
        *,
        older_than: timedelta | None = None,
        tag: str | None = None,
        expired: bool = False,
        unreachable: bool = False,
        dry_run: bool = True,
        now: int | datetime | None = None,
    ) -> Program[PruneReport]:
        """Delete whole sessions, or the branches no head reaches; by default only report them.

        The sessions that match every session filter given (`older_than`, `tag`, `expired`) go
        whole; with `unreachable`, every other session loses the nodes its head does not reach
        (its head's ancestors all stay). The report names each session and node, and the bytes
        of stored turns and lines; a run that deletes deletes exactly what it reports. The
        usage of the pruned branches stays in their sessions' totals (`pruned_usage`;
        `PruneReport.rolled_up` says how much).

        Args:
            older_than: sessions last updated longer ago than this.
            tag: sessions with this tag.
            expired: sessions past their `expires_at`, else their tags' or the store's default.
            unreachable: nodes no head reaches, in every session not deleted whole.
            dry_run: only report (the default); False deletes, in one transaction.
            now: the time to judge by, epoch ms or an aware datetime (default: now).

        Raises:
            InvalidArgumentError: no filter was given, an empty `tag`, a negative or
                non-timedelta duration, or a `now` that is no epoch ms >= 0 or aware datetime.
        """
        filters = plans.PruneFilters(
            None if older_than is None else duration_ms(older_than, "older_than"),
            tag_filter(tag),
            expired,
            unreachable,
        )
        moment = epoch_ms(now, "now", minimum=0)
        plan = plans.prune(
            self.backend, filters, plans.now_ms() if moment is None else moment, delete_=not dry_run
        )
        if dry_run:
            return (yield from self._read(plan, "pruning (a dry run)"))
        return (yield from self._write(plan, "pruning"))
