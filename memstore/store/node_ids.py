"""NodeIds: node ids as people type and read them, short or whole (see `StoreBase`)."""

from __future__ import annotations

from collections.abc import Iterable

from memstore.store import plans, short_ids
from memstore.store.core import StoreCore
from memstore.store.operation import Program, operation

__all__ = ["NodeIds"]


class NodeIds(StoreCore):
    """Resolving and shortening node ids, as operations of both stores."""

    @operation
    def resolve_node_id(self, session_id: str, node_id: str) -> Program[str]:
        """The full id of the node that `node_id` (the id, or a unique prefix of it) names.

        Raises:
            UnknownNodeError: no node of the session has or starts with that id.
            AmbiguousNodeError: several nodes' ids start with it (they are listed).
        """
        plan = plans.resolve_node_id(session_id, node_id)
        return (yield from self._read(plan, "looking up a node id"))

    @operation
    def short_node_ids(self, session_id: str, node_ids: Iterable[str]) -> Program[dict[str, str]]:
        """Each of `node_ids` the session holds, mapped to the shortest prefix of it (8
        characters at least) that no other id of the session starts with, as git shortens
        hashes, or to the whole id when it starts another; `resolve_node_id` takes each back
        to its id. Ids the session does not hold are left out."""
        plan = short_ids.short_node_ids(session_id, node_ids)
        return (yield from self._read(plan, "shortening node ids"))

    @operation
    def short_node_ids_by_session(
        self, node_ids: Iterable[tuple[str, str]]
    ) -> Program[dict[tuple[str, str], str]]:
        """`short_node_ids` of several sessions in one read: each (session id, node id) pair
        whose session holds the node, mapped to the node's short form (a listing of many
        sessions asks once, not once per session). Pairs of nodes not held are left out."""
        plan = short_ids.short_node_ids_by_session(node_ids)
        return (yield from self._read(plan, "shortening node ids"))
