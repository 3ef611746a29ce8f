"""What the sync and async session handles share: the local graph and its bookkeeping."""

from __future__ import annotations

from memstore.graph import SessionGraph
from memstore.types import SessionNode, Turn, TurnLike

__all__ = ["HandleBase"]


class HandleBase:
    """One session's graph, kept in step with the store.

    Appends persist as a compare-and-set against the head this handle last saw, so two
    handles on one session never silently fork or truncate it: the slower one gets a
    HeadMovedError and can `refresh()`.
    """

    def __init__(self, session_id: str, graph: SessionGraph) -> None:
        self.session_id = session_id
        self.graph = graph
        self._stored_head = graph.leaf

    @property
    def leaf(self) -> str | None:
        """The head of the local graph (moved by `branch_from` before the next append)."""
        return self.graph.leaf

    def branch_from(self, node_id: str) -> SessionNode:
        """Move the local head, so that the next append forks from `node_id`."""
        return self.graph.branch_from(node_id)

    def path(self) -> list[Turn]:
        """The turns from the root to the local head."""
        return [] if self.graph.leaf is None else self.graph.path_to(self.graph.leaf)

    def _prepare(self, turn: TurnLike) -> tuple[SessionNode, str | None]:
        """The node to store for `turn`, and the head the store must still have."""
        return self.graph.next_node(turn), self._stored_head

    def _stored(self, node: SessionNode) -> SessionNode:
        self._stored_head = node.id
        return self.graph.add(node)

    def _replace(self, graph: SessionGraph) -> None:
        self.graph = graph
        self._stored_head = graph.leaf
