"""Erasure: the store operations that erase a session, a node or a subject with every copy
memstore made of it, list the receipts, and leave SQLite's file without the erased bytes
(see `StoreBase`; the plans are `plans.erasure`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from memstore.store.exchange import Exchange
from memstore.store.operation import OnEngine, Program, operation
from memstore.store.plans.contract import now_ms
from memstore.store.plans.erasure import ErasureReport, erase, target_of
from memstore.store.plans.erasure_receipts import ErasureReceipt, erasures_of
from memstore.store.plans.paging import epoch_ms
from memstore.store.plans.sessions import refuse_unstorable

__all__ = ["Erasure"]


def _vacuum_sqlite(engine: Engine) -> None:
    """Merge both full-text indexes into one segment each (dropping the entries of deleted
    rows), rebuild the file (`VACUUM`), and empty the write-ahead log."""
    raw: Any = engine.raw_connection()
    try:
        driver = raw.driver_connection  # autocommit: memstore's engine issues BEGIN itself
        for index in ("nodes_fts", "nodes_fts_chars"):
            driver.execute(f"INSERT INTO {index}({index}) VALUES ('optimize')")
        driver.execute("VACUUM")
        driver.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        raw.close()


class Erasure(Exchange):
    """Erasure and its receipts, as operations of both stores."""

    @operation
    def erase(
        self,
        *,
        reason: str,
        session_id: str | None = None,
        node_id: str | None = None,
        subject: tuple[str, str] | None = None,
        dry_run: bool = True,
        now: int | datetime | None = None,
    ) -> Program[ErasureReport]:
        """Erase a session, a node or a subject, with every copy memstore made of it; by
        default only report what it would erase.

        A session goes whole (deleted). A node's turn, and those of its copies (the same turn
        in its session, as compaction re-appends it, or in a session forked from it or it from)
        and of every summary compaction made from it, become tombstones (`[erased]`, see
        docs/erasure.md): ids, parents and roles stay, so every path still loads. A subject,
        `(key, value)`, is every session whose metadata has `key` = `value` (erased whole) and
        every turn with that top-level key and string value. One transaction; a receipt row
        in `erasures` (never the content). On SQLite, `vacuum()` then removes the erased bytes
        from the file.

        Args:
            reason: why (kept in the receipt); required.
            session_id: the session to erase, or the session of `node_id`.
            node_id: the node to erase.
            subject: a metadata key and the value that names the subject.
            dry_run: only report (the default); False erases.
            now: the receipt's and tombstones' time, epoch ms or an aware datetime (default:
                now).

        Raises:
            InvalidArgumentError: no reason, or not one of a session, a node or a subject; a
                reason or subject the database cannot store (a lone surrogate; on PostgreSQL, a
                NUL character); a `now` that is no epoch ms >= 0 or aware datetime.
            UnknownSessionError, UnknownNodeError: nothing to erase by that name; nothing
                was written.
        """
        target = target_of(session_id, node_id, subject, reason)
        refuse_unstorable(self.backend, {"reason": reason, "subject value": target.value or ""})
        moment = epoch_ms(now, "now", minimum=0)
        plan = erase(
            self.backend, target, reason, now_ms() if moment is None else moment, erase_=not dry_run
        )
        if dry_run:
            return (yield from self._read(plan, "erasing (a dry run)"))
        return (yield from self._write(plan, f"erasing {target.scope} {target.label!r}"))

    @operation
    def erasures(self, *, limit: int | None = None) -> Program[list[ErasureReceipt]]:
        """The erasure receipts (rows of `erasures`), newest first: at most `limit` of them.

        Raises:
            InvalidArgumentError: `limit` is no whole number >= 0.
        """
        return (yield from self._read(erasures_of(limit), "reading erasure receipts"))

    @operation
    def vacuum(self) -> Program[None]:
        """SQLite: leave no bytes of deleted or erased content in the file: merge the full-text
        indexes, `VACUUM`, and truncate the write-ahead log. PostgreSQL: nothing (no SQL finds
        erased rows; its own VACUUM reclaims their space)."""
        self._writable("vacuuming")
        if self.backend.secure_delete:
            yield from OnEngine(_vacuum_sqlite, "vacuuming")
