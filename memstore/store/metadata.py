"""SessionMetadata: the operations on sessions' metadata that frameworks keeping state beside
their history need (the Google ADK adapter's app, user and session state), for `StoreBase`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from memstore.store import plans
from memstore.store.core import StoreCore
from memstore.store.operation import Program, operation
from memstore.store.plans import UNSET, StoredMetadata, Unset
from memstore.store.plans.appends import UsageLike
from memstore.types import SessionNode, TurnLike

__all__ = ["SessionMetadata"]


class SessionMetadata(StoreCore):
    """Reading several sessions' metadata at once; merging into it while appending."""

    @operation
    def append_merging_metadata(
        self,
        session_id: str,
        turns: Sequence[TurnLike],
        merges: plans.MetadataMerges,
        *,
        expected_head: str | Unset | None = UNSET,
        exists: bool | None = None,
        usage: Mapping[str, UsageLike] | None = None,
    ) -> Program[list[SessionNode]]:
        """Update sessions' metadata and append `turns` at `session_id`'s head, in one
        transaction. `merges` maps a session id (created if missing) to metadata keys: a
        mapping value is merged into the object at its key, any other replaces it.
        `expected_head` works as in `append_many`; `exists` True or False requires `session_id`
        to exist (UnknownSessionError) or not (SessionExistsError); `usage` maps nodes of
        `session_id` to what their model calls cost, recorded as `record_usage` does
        (UnknownNodeError for a node it lacks)."""
        plan = plans.append_merging_metadata(
            self.backend, session_id, list(turns), merges, expected_head, exists, usage
        )
        return (yield from self._write(plan, f"appending to session {session_id!r}"))

    @operation
    def session_metadata(self, session_ids: Iterable[str]) -> Program[dict[str, StoredMetadata]]:
        """The head, metadata and update time of each of `session_ids` that exists, in one
        query (no counts of nodes or branches, unlike `session_info`)."""
        plan = plans.read_metadata(list(session_ids))
        return (yield from self._read(plan, "reading sessions' metadata"))
