from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from memstore import (
    BrokenLineageError,
    MemstoreError,
    SessionGraph,
    Turn,
    UnknownNodeError,
    hash_node,
)

from .conftest import LEGACY_FILES, expected_for
from .legacy import read_legacy_session


def ticking(start: int = 1_000) -> Any:
    counter = itertools.count(start)
    return lambda: next(counter)


def say(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "blocks": [{"kind": "text", "text": text}]}


def test_an_empty_graph() -> None:
    graph = SessionGraph("s")
    assert (graph.leaf, graph.size, graph.all(), graph.get("x")) == (None, 0, [], None)


def test_append_chains_content_addressed_nodes_and_moves_the_head() -> None:
    graph = SessionGraph("s", clock=ticking())
    first = graph.append(say("hi"))
    second = graph.append(say("hello", "assistant"))
    assert first.parent is None
    assert second.parent == first.id
    assert first.id == hash_node(None, say("hi"), 1000)
    assert second.id == hash_node(first.id, say("hello", "assistant"), 1001)
    assert graph.leaf == second.id
    assert graph.size == 2
    assert [n.id for n in graph.all()] == [first.id, second.id]
    assert graph.path_to(second.id) == [
        Turn.model_validate(say("hi")),
        Turn.model_validate(say("hello", "assistant")),
    ]


def test_a_content_hash_collision_advances_to_the_existing_node() -> None:
    graph = SessionGraph("s", clock=lambda: 7)
    root = graph.append(say("hi"))
    graph.append(say("more"))
    graph.branch_from(root.id)
    again = graph.append(say("more"))
    assert graph.size == 2
    assert graph.leaf == again.id
    assert graph.get(again.id) is again


def test_branch_from_forks_the_next_append() -> None:
    graph = SessionGraph("s", clock=ticking())
    root = graph.append(say("q"))
    a = graph.append(say("answer A", "assistant"))
    assert graph.branch_from(root.id) == root
    b = graph.append(say("answer B", "assistant"))
    assert a.parent == b.parent == root.id
    assert graph.leaf == b.id
    assert graph.resume(a.id)[-1].to_json() == say("answer A", "assistant")
    assert graph.leaf == a.id


def test_unknown_nodes_raise_from_the_one_hierarchy() -> None:
    graph = SessionGraph("s")
    with pytest.raises(UnknownNodeError, match="session 's' has no node 'nope'") as info:
        graph.branch_from("nope")
    assert isinstance(info.value, MemstoreError)
    assert isinstance(info.value, KeyError)
    with pytest.raises(UnknownNodeError):
        graph.path_to("nope")
    with pytest.raises(UnknownNodeError):
        graph.resume("nope")
    assert graph.leaf is None


def node(node_id: str, parent: str | None) -> dict[str, Any]:
    return {"id": node_id, "parent": parent, "turn": say(node_id), "createdAt": 1}


def test_a_broken_lineage_names_the_missing_parent() -> None:
    graph = SessionGraph.hydrate("s", [node("a", None), node("c", "b")], "c")
    with pytest.raises(BrokenLineageError, match="'c' names parent 'b'"):
        graph.path_to("c")


def test_a_cycle_is_a_broken_lineage_not_a_hang() -> None:
    graph = SessionGraph.hydrate("s", [node("a", "b"), node("b", "a")], "a")
    with pytest.raises(BrokenLineageError, match="leads back"):
        graph.path_to("a")


def test_hydrate_refuses_a_leaf_it_does_not_hold() -> None:
    with pytest.raises(UnknownNodeError):
        SessionGraph.hydrate("s", [node("a", None)], "zzz")


def test_hydrate_keeps_the_clock_for_later_appends() -> None:
    graph = SessionGraph.hydrate("s", [node("a", None)], "a", clock=lambda: 42)
    appended = graph.append(say("next"))
    assert (appended.parent, appended.created_at) == ("a", 42)


@pytest.mark.parametrize("path", LEGACY_FILES, ids=lambda p: p.stem)
def test_legacy_sessions_replay_to_the_expected_leaf_path_and_tips(path: Path) -> None:
    expected = expected_for(path)
    graph = read_legacy_session(path)
    assert graph.size == expected["nodeCount"]
    assert graph.leaf == expected["leaf"]
    assert [n.id for n in graph.path_nodes(expected["leaf"])] == expected["pathIds"]
    parents = {n.parent for n in graph.all()}
    tips = [n.id for n in graph.all() if n.id not in parents]
    assert sorted(tips) == sorted(expected["branchTips"])


@pytest.mark.parametrize("path", LEGACY_FILES, ids=lambda p: p.stem)
def test_legacy_node_ids_are_their_content_hashes(path: Path) -> None:
    for stored in read_legacy_session(path).all():
        assert hash_node(stored.parent, stored.turn, stored.created_at) == stored.id
