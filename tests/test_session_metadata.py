"""`append_merging_metadata` and `session_metadata` (store/metadata.py): merges into several
sessions' metadata with an append, all or nothing, on both stores and backends."""

from __future__ import annotations

import pytest

from memstore import NodeUsage, SessionStore
from memstore.errors import (
    HeadMovedError,
    InvalidArgumentError,
    InvalidTurnError,
    SessionExistsError,
    UnknownNodeError,
    UnknownSessionError,
)

HELLO = {"role": "user", "blocks": [{"kind": "text", "text": "hello"}]}


def test_merges_set_mapping_items_replace_other_values_and_create_sessions(
    store: SessionStore,
) -> None:
    store.update_session("a", metadata={"state": {"x": 1, "y": 2}, "n": 1, "keep": True})
    nodes = store.append_merging_metadata(
        "a", [HELLO], {"a": {"state": {"y": 3, "z": None}, "n": 2}, "b": {"state": {"k": "v"}}}
    )
    assert [node.turn.to_json() for node in nodes] == [HELLO]
    found = store.session_metadata(["a", "b", "missing"])
    assert set(found) == {"a", "b"}
    assert found["a"].metadata == {"state": {"x": 1, "y": 3, "z": None}, "n": 2, "keep": True}
    assert found["a"].head == nodes[0].id
    assert found["b"].metadata == {"state": {"k": "v"}}
    assert found["b"].head is None
    assert store.session_metadata([]) == {}


def test_a_refused_call_writes_nothing(store: SessionStore) -> None:
    head = store.append("a", HELLO).id
    merges = {"a": {"state": {"x": 1}}, "b": {"state": {"y": 1}}}
    with pytest.raises(HeadMovedError):
        store.append_merging_metadata("a", [HELLO], merges, expected_head="0" * 64)
    with pytest.raises(InvalidTurnError):
        store.append_merging_metadata("a", [{"role": "robot", "blocks": []}], merges)
    with pytest.raises(SessionExistsError):
        store.append_merging_metadata("a", [], merges, exists=False)
    with pytest.raises(UnknownSessionError):
        store.append_merging_metadata("c", [], {"c": {"state": {}}}, exists=True)
    with pytest.raises(InvalidArgumentError, match="session 'b'"):
        store.append_merging_metadata("a", [], {"b": {1: 2}})  # type: ignore[dict-item]
    assert store.session_metadata(["a", "b", "c"]).keys() == {"a"}
    assert store.session_metadata(["a"])["a"].metadata == {}
    assert store.head("a") == head
    store.append_merging_metadata("a", [HELLO], merges, expected_head=head, exists=True)
    assert store.session_metadata(["b"])["b"].metadata == {"state": {"y": 1}}


def test_usage_is_recorded_beside_existing_nodes_with_the_merge(store: SessionStore) -> None:
    node = store.append("a", HELLO)
    usage = NodeUsage(input_tokens=40, output_tokens=7, model="m")
    store.append_merging_metadata("a", [], {"a": {"n": 1}}, usage={node.id: usage})
    store.append_merging_metadata("a", [], {"a": {"n": 2}}, usage={node.id: {"inputTokens": 5}})
    info = store.session_info("a")
    assert (info.input_tokens, info.output_tokens, info.metadata) == (5, 0, {"n": 2})  # replaced
    with pytest.raises(UnknownNodeError):
        store.append_merging_metadata("a", [], {"a": {"n": 3}}, usage={"0" * 16: usage})
    with pytest.raises(InvalidArgumentError, match="input_tokens"):
        store.append_merging_metadata(
            "a", [], {"a": {"n": 3}}, usage={node.id: {"inputTokens": -1}}
        )
    assert store.session_info("a").metadata == {"n": 2}  # refused calls wrote nothing


def test_session_counts_of_nodes_and_branches(store: SessionStore) -> None:
    """A session's branches are its tips (nodes no node names as parent): none in a session
    without turns, one in a chain, one more per fork, on every listing that counts them."""
    store.update_session("empty", metadata={"n": 1})
    first = store.append_many("s", [HELLO, HELLO, HELLO])
    assert (store.session_info("s").node_count, store.session_info("s").branch_count) == (3, 1)
    store.append_many("s", [HELLO, HELLO], parent=first[0].id)
    store.append("s", HELLO, parent=first[0].id)
    store.append_many("s", [HELLO], parent=None)  # a second root
    counts = {info.id: (info.node_count, info.branch_count) for info in store.sessions()}
    assert counts == {"empty": (0, 0), "s": (7, 4)}
    assert (store.session_info("empty").branch_count, store.session_info("s").branch_count) == (
        0,
        4,
    )
