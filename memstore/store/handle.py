"""What the sync and async session handles share: the head they last saw, and forks."""

from __future__ import annotations

from memstore.store.plans import UNSET, Unset
from memstore.types import SessionNode

__all__ = ["HandleBase"]


class HandleBase:
    """A light handle on one session: its id and the head it last saw, never the whole graph.

    Opening one and `refresh()` each read the head only (one query). `append` goes at the
    store's head, atomically: several handles (or workers sharing one) append one linear chain
    with no retry. Pass `expected_head=handle.head` to have an append refused
    (`HeadMovedError`) when another writer moved the head since this handle last saw it.
    `path(last=N)` reads the history through `load_path`; `load_graph()` loads the whole DAG.

    A handle's `head` is plain state: sharing a handle between threads or tasks is safe for
    appends (each lands at the store's head), but `branch_from` affects whichever append comes
    next through that handle, so keep forks to a handle of one worker.
    """

    def __init__(self, session_id: str, head: str | None) -> None:
        self.session_id = session_id
        self.head = head
        """The head this handle last saw: after opening, `refresh()`, or its own append."""
        self._forking = False

    def __repr__(self) -> str:
        store = getattr(self, "store", None)
        kind = f"{type(store).__name__} on {store.dialect}" if store is not None else None
        return (
            f"{type(self).__name__}(session_id={self.session_id!r}, head={self.head!r}, "
            f"store={kind!r})"
        )

    @property
    def leaf(self) -> str | None:
        """The head this handle last saw, or the node `branch_from` moved it to."""
        return self.head

    def branch_from(self, node_id: str) -> None:
        """Make the next append through this handle a child of `node_id` (a fork), not of the
        store's head. The store checks that the session holds `node_id` when that append runs
        (`UnknownNodeError` if not)."""
        self.head = node_id
        self._forking = True

    def _fork_parent(self) -> str | Unset:
        """The parent of the next append's chain: `branch_from`'s node, or UNSET (the head)."""
        return self.head if self._forking and self.head is not None else UNSET

    def _moved_to(self, nodes: list[SessionNode]) -> list[SessionNode]:
        """Record that the store's head is the last of `nodes` after this handle's append."""
        if nodes:
            self.head = nodes[-1].id
            self._forking = False
        return nodes

    def _seen(self, head: str | None) -> str | None:
        """Record the head a refresh read."""
        self.head = head
        self._forking = False
        return head
