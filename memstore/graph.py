"""SessionGraph: the in-memory, branchable DAG of one session's content-addressed turns."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from memstore.errors import BrokenLineageError, UnknownNodeError
from memstore.hashing import hash_node
from memstore.types import Clock, SessionNode, Turn, TurnLike, parse_turn

__all__ = ["SHORT_ID", "SessionGraph", "short_id", "short_ids", "system_clock"]

SHORT_ID = 8
"""Characters of a node id shown at least; more where another id of the session shares them."""


def system_clock() -> int:
    """The current time in epoch milliseconds, like JavaScript's `Date.now()`."""
    return time.time_ns() // 1_000_000


def short_ids(ids: Iterable[str], minimum: int = SHORT_ID) -> dict[str, str]:
    """Each id's short form among `ids` (one session's): see `short_id`.

    Sorted, an id shares its longest prefix with another id with one of its two neighbours,
    so one pass over the sorted ids finds every short form.
    """
    ordered = sorted(set(ids))
    return {
        node_id: short_id(
            node_id,
            ordered[index - 1] if index else None,
            ordered[index + 1] if index + 1 < len(ordered) else None,
            minimum,
        )
        for index, node_id in enumerate(ordered)
    }


def short_id(node_id: str, before: str | None, after: str | None, minimum: int = SHORT_ID) -> str:
    """The shortest prefix of `node_id` (of at least `minimum` characters) that no other id of
    its session starts with, as git shortens hashes; the whole id when it starts another id
    (a whole id always names itself). `before` and `after` are the session's ids just below
    and just above `node_id` in code-point order (None at either end): they are the ones
    sharing the longest prefix with it. `SessionStore.resolve_node_id` takes the result back
    to `node_id`.
    """
    shared = max(_common_prefix(node_id, other) for other in (before, after, ""))
    return node_id[: max(minimum, shared + 1)]


def _common_prefix(first: str, second: str | None) -> int:
    """How many leading characters two strings share."""
    if second is None:
        return 0
    length = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        length += 1
    return length


class SessionGraph:
    """A mutable DAG of SessionNodes for one session, with a movable head (`leaf`).

    `append` chains a node onto the head and moves the head to it; `branch_from` moves the head
    to an older node so the next append forks; `path_to` reads one root-to-leaf conversation.
    """

    def __init__(self, session_id: str, clock: Clock | None = None) -> None:
        self.session_id = session_id
        self._clock: Clock = clock or system_clock
        self._nodes: dict[str, SessionNode] = {}
        self._leaf: str | None = None

    @classmethod
    def hydrate(
        cls,
        session_id: str,
        nodes: Iterable[SessionNode | Mapping[str, Any]],
        leaf: str | None,
        clock: Clock | None = None,
    ) -> SessionGraph:
        """A graph holding `nodes` with its head at `leaf`.

        Raises:
            UnknownNodeError: `leaf` names a node that is not among `nodes`.
        """
        graph = cls(session_id, clock)
        for node in nodes:
            parsed = node if isinstance(node, SessionNode) else SessionNode.model_validate(node)
            graph._nodes.setdefault(parsed.id, parsed)
        if leaf is not None and leaf not in graph._nodes:
            raise UnknownNodeError(session_id, leaf)
        graph._leaf = leaf
        return graph

    @property
    def leaf(self) -> str | None:
        """The id of the head node, or None for an empty session."""
        return self._leaf

    @property
    def size(self) -> int:
        """How many nodes the session holds, over all branches."""
        return len(self._nodes)

    def get(self, node_id: str) -> SessionNode | None:
        """The node with this id, or None."""
        return self._nodes.get(node_id)

    def all(self) -> list[SessionNode]:
        """Every node, in the order it was added."""
        return list(self._nodes.values())

    def append(self, turn: TurnLike) -> SessionNode:
        """Chain `turn` onto the head and move the head to it.

        When a node with the same content address already exists (same parent, turn and
        time), the head advances to that node and no new node is made.
        """
        return self.add(self.next_node(turn))

    def next_node(self, turn: TurnLike) -> SessionNode:
        """The node `append(turn)` would add now, without adding it (reads the clock once)."""
        parsed = parse_turn(turn)
        created_at = self._clock()
        node_id = hash_node(self._leaf, parsed, created_at)
        existing = self._nodes.get(node_id)
        if existing is not None:
            return existing
        return SessionNode(id=node_id, parent=self._leaf, turn=parsed, created_at=created_at)

    def add(self, node: SessionNode) -> SessionNode:
        """Insert a node made elsewhere (by `next_node`, or read from a store); move the head.

        A node whose id the graph holds already is not replaced: the head moves to it.
        """
        existing = self._nodes.setdefault(node.id, node)
        self._leaf = existing.id
        return existing

    def branch_from(self, node_id: str) -> SessionNode:
        """Move the head to `node_id`, so that the next append forks from there.

        Raises:
            UnknownNodeError: the session has no such node.
        """
        node = self._require(node_id)
        self._leaf = node_id
        return node

    def path_nodes(self, leaf: str) -> list[SessionNode]:
        """The nodes from the root to `leaf`, in order.

        Raises:
            UnknownNodeError: the session has no node `leaf`.
            BrokenLineageError: a parent link on the way names a node the session lacks.
        """
        node = self._require(leaf)
        path = [node]
        while node.parent is not None:
            parent = self._nodes.get(node.parent)
            if parent is None:
                raise BrokenLineageError(self.session_id, node.id, node.parent)
            if len(path) >= len(self._nodes):
                raise BrokenLineageError(self.session_id, node.id, node.parent, cycle=True)
            node = parent
            path.append(node)
        path.reverse()
        return path

    def path_to(self, leaf: str) -> list[Turn]:
        """The turns from the root to `leaf`: the linear context of that branch."""
        return [node.turn for node in self.path_nodes(leaf)]

    def resume(self, leaf: str) -> list[Turn]:
        """Move the head to `leaf` and return its path (`branch_from` + `path_to`)."""
        self.branch_from(leaf)
        return self.path_to(leaf)

    def _require(self, node_id: str) -> SessionNode:
        node = self._nodes.get(node_id)
        if node is None:
            raise UnknownNodeError(self.session_id, node_id)
        return node
