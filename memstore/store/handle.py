"""HandleBase: a session handle's state and operations, for the sync and the async handle."""

from __future__ import annotations

from collections.abc import Iterable

from memstore.graph import SessionGraph
from memstore.store.base import StoreBase
from memstore.store.operation import Program, operation
from memstore.store.plans import UNSET, Unset
from memstore.store.plans.appends import UsageLike, UsagesLike
from memstore.types import SessionNode, Turn, TurnLike

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

    def __init__(self, store: StoreBase, session_id: str, head: str | None) -> None:
        self.store = store
        self.session_id = session_id
        self.head = head
        """The head this handle last saw: after opening, `refresh()`, or its own append."""
        self._forking = False

    def __repr__(self) -> str:
        kind = f"{type(self.store).__name__} on {self.store.dialect}"
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

    @operation
    def append(
        self,
        turn: TurnLike,
        *,
        expected_head: str | Unset | None = UNSET,
        usage: UsageLike | None = None,
    ) -> Program[SessionNode]:
        """Append `turn` at the store's head (or after `branch_from`'s node) and persist it,
        with what its model call cost (`usage`, see `SessionStore.append_many`).

        Raises:
            HeadMovedError: `expected_head` was given and the head is elsewhere.
        """
        (node,) = yield from HandleBase.append_many.program(
            self, [turn], expected_head=expected_head, usage=usage
        )
        return node

    @operation
    def append_many(
        self,
        turns: Iterable[TurnLike],
        *,
        expected_head: str | Unset | None = UNSET,
        usage: UsagesLike = None,
    ) -> Program[list[SessionNode]]:
        """Append `turns` as one chain (see `SessionStore.append_many`, and its `usage`), at
        the store's head or after `branch_from`'s node."""
        nodes = yield from StoreBase.append_many.program(
            self.store,
            self.session_id,
            turns,
            expected_head=expected_head,
            parent=self._fork_parent(),
            usage=usage,
        )
        return self._moved_to(nodes)

    @operation
    def refresh(self) -> Program[str | None]:
        """Read the store's head again (one query), after other writers appended; returns it."""
        return self._seen((yield from StoreBase.head.program(self.store, self.session_id)))

    @operation
    def path(self, *, last: int | None = None) -> Program[list[Turn]]:
        """The turns from the root (or the newest `last`) to this handle's head."""
        if self.head is None:
            return []
        load = StoreBase.load_path.program(self.store, self.session_id, self.head, last=last)
        return (yield from load)

    @operation
    def load_graph(self) -> Program[SessionGraph]:
        """The session's whole DAG, loaded now (its `leaf` is the store's head)."""
        return (yield from StoreBase.load_session.program(self.store, self.session_id))
