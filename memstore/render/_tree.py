"""The shape of a whole session tree, laid out once so that the page can be written in O(nodes).

Nodes are numbered in depth-first preorder, so every path from the root reads in document order
and a node's number is always greater than its parent's. A *segment* is a maximal chain of turns
without a fork: one row of the outline.
"""

from __future__ import annotations

from dataclasses import dataclass

from memstore.graph import SessionGraph, short_ids
from memstore.types import SessionNode

__all__ = ["Layout", "Segment", "lay_out"]


@dataclass(frozen=True, slots=True)
class Segment:
    """A chain of turns from `start` to `end` (preorder numbers) with `forks` forks above it."""

    start: int
    end: int
    forks: int


@dataclass(frozen=True, slots=True)
class Layout:
    """A session tree in preorder: parents, children, depths, segments and default tips."""

    nodes: list[SessionNode]
    parent: list[int]
    children: list[list[int]]
    depth: list[int]
    segment_of: list[int]
    segments: list[Segment]
    default_tip: list[int]
    roots: list[int]
    head: int
    short_ids: dict[str, str]
    """Each node's id as shown: its shortest prefix unique in the session (see `short_ids`)."""

    @property
    def tips(self) -> list[int]:
        """The numbers of the nodes without children: one per branch."""
        return [index for index, kids in enumerate(self.children) if not kids]

    def path(self, index: int) -> list[int]:
        """The numbers from the root to `index`, in order."""
        path = []
        while index >= 0:
            path.append(index)
            index = self.parent[index]
        path.reverse()
        return path

    def sibling_groups(self) -> list[list[int]]:
        """The roots, then every node's children: the groups a reader can switch between."""
        return [self.roots, *self.children]


def _children_by_parent(graph: SessionGraph) -> dict[str | None, list[SessionNode]]:
    """Children in the order they were added; a node whose parent is missing counts as a root."""
    nodes = graph.all()
    known = {node.id for node in nodes}
    children: dict[str | None, list[SessionNode]] = {}
    for node in nodes:
        parent = node.parent if node.parent in known else None
        children.setdefault(parent, []).append(node)
    return children


def _preorder(graph: SessionGraph) -> tuple[list[SessionNode], list[int]]:
    """Every node in preorder with its parent's number; loops cut where they are first seen."""
    children = _children_by_parent(graph)
    order: list[SessionNode] = []
    parent: list[int] = []
    seen: set[str] = set()
    starts = [*children.get(None, []), *graph.all()]  # the rest only matter for loops
    for start in starts:
        stack: list[tuple[SessionNode, int]] = [(start, -1)]
        while stack:
            node, up = stack.pop()
            if node.id in seen:
                continue
            seen.add(node.id)
            order.append(node)
            parent.append(up)
            here = len(order) - 1
            stack.extend((child, here) for child in reversed(children.get(node.id, [])))
    return order, parent


def lay_out(graph: SessionGraph) -> Layout:
    """Number the session's nodes in preorder and find its segments and default tips."""
    nodes, parent = _preorder(graph)
    children: list[list[int]] = [[] for _ in nodes]
    for index, up in enumerate(parent):
        if up >= 0:
            children[up].append(index)
    depth = _depths(parent)
    segment_of, segments = _segments(parent, children)
    index_of = {node.id: index for index, node in enumerate(nodes)}
    head = index_of.get(graph.leaf, -1) if graph.leaf is not None else -1
    tips = _default_tips(nodes, children, head)
    roots = [index for index, up in enumerate(parent) if up < 0]
    short = short_ids(node.id for node in nodes)
    return Layout(nodes, parent, children, depth, segment_of, segments, tips, roots, head, short)


def _depths(parent: list[int]) -> list[int]:
    depth: list[int] = []
    for up in parent:
        depth.append(depth[up] + 1 if up >= 0 else 1)
    return depth


def _segments(parent: list[int], children: list[list[int]]) -> tuple[list[int], list[Segment]]:
    """Which segment each node is in, and the segments in preorder."""
    segment_of: list[int] = []
    starts: list[tuple[int, int]] = []
    for index, up in enumerate(parent):
        if up >= 0 and len(children[up]) == 1:
            segment_of.append(segment_of[up])
            continue
        forks = starts[segment_of[up]][1] + 1 if up >= 0 else 0
        segment_of.append(len(starts))
        starts.append((index, forks))
    ends = [0] * len(starts)
    for index, segment in enumerate(segment_of):
        ends[segment] = index  # chains are contiguous in preorder: the last one seen is the end
    segments = [
        Segment(start, end, forks) for (start, forks), end in zip(starts, ends, strict=True)
    ]
    return segment_of, segments


def _default_tips(nodes: list[SessionNode], children: list[list[int]], head: int) -> list[int]:
    """Per node, where its branch leads: the head if it is below, else the newest tip below."""
    tip = list(range(len(nodes)))
    holds_head = [index == head for index in range(len(nodes))]
    for index in reversed(range(len(nodes))):  # children come after their parent in preorder
        kids = children[index]
        if holds_head[index] or not kids:
            continue
        with_head = [kid for kid in kids if holds_head[kid]]
        if with_head:
            holds_head[index] = True
            tip[index] = head
        else:
            tip[index] = max((tip[kid] for kid in kids), key=lambda t: (nodes[t].created_at, t))
    return tip
