"""A whole path is read flat when its session is one chain: the same turns, in the same order, as
the SQL walk finds, on SQLite and PostgreSQL, sync and async (see conftest's `store`)."""

from __future__ import annotations

import itertools

import pytest
import sqlalchemy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import SessionNode, ToolCallBlock, ToolResultBlock, Turn, UnknownNodeError
from memstore.errors import InvalidArgumentError, InvalidNodeIdError
from memstore.store import SessionStore, create_store_engine, plans
from memstore.store.operation import Program, Run
from memstore.store.plans import paths

from .test_store import append_all, call, graph, result, say

_session_ids = (f"s{n}" for n in itertools.count())


def walked(store: SessionStore, session_id: str, leaf: str) -> list[SessionNode]:
    """The path to `leaf` as the SQL walk finds it (how every whole path was read before)."""

    def walk() -> Program[list[SessionNode]]:
        walking = paths._walked_rows(store.backend, session_id, leaf, paths._NO_LIMIT)
        rows = yield from Run(walking, "walking a path")
        return plans.nodes_from_rows(rows)

    return store._complete(walk())


def assert_loads_as_walked(store: SessionStore, session_id: str, leaf: str | None = None) -> None:
    """`load_path` and `load_path_nodes` give what the walk gives: the same nodes and turns, in
    the same order, with the same JSON texts."""
    expected = walked(store, session_id, leaf or store.head(session_id) or "")
    nodes = store.load_path_nodes(session_id, leaf)
    turns = store.load_path(session_id, leaf)
    assert [node.id for node in nodes] == [node.id for node in expected]
    assert nodes == expected
    assert turns == [node.turn for node in expected]
    assert [turn.json_text() for turn in turns] == [node.turn.json_text() for node in expected]
    assert all(type(turn) is Turn for turn in turns)


def write_sql(store: SessionStore, statement: str) -> None:
    """Run `statement` on the store's database, outside the store."""
    url = store.engine.url
    engine = create_store_engine(url.set(drivername=url.get_backend_name()))
    try:
        with engine.begin() as connection:
            connection.execute(sqlalchemy.text(statement))
    finally:
        engine.dispose()


def test_a_linear_session_loads_as_walked(store: SessionStore) -> None:
    g = graph()
    ids = append_all(store, g, [say("q"), call(1), result(1), say("a", "assistant")] * 5)
    assert_loads_as_walked(store, "s")
    assert store.load_path("s") == g.path_to(ids[-1])
    assert [node.id for node in store.load_path_nodes("s")] == ids


def test_an_inner_leaf_and_a_head_moved_back_load_as_walked(store: SessionStore) -> None:
    g = graph()
    ids = append_all(store, g, [say(str(n)) for n in range(8)])
    assert_loads_as_walked(store, "s", ids[3])
    assert [node.id for node in store.load_path_nodes("s", ids[3])] == ids[:4]
    store.append_node("s", g.get(ids[5]))  # type: ignore[arg-type]  # the head moves back
    assert store.head("s") == ids[5]
    assert_loads_as_walked(store, "s")
    assert [node.id for node in store.load_path_nodes("s")] == ids[:6]
    assert store.load_path("s", ids[0]) == g.path_to(ids[0])


def test_branches_load_as_walked(store: SessionStore) -> None:
    g = graph()
    trunk = append_all(store, g, [say(str(n)) for n in range(6)])
    tips = [trunk[-1]]
    for fork in (trunk[1], trunk[3], trunk[3]):
        g.branch_from(fork)
        tips.append(append_all(store, g, [say(f"from {fork}"), say("more", "assistant")])[-1])
    for tip in tips:
        assert_loads_as_walked(store, "s", tip)
        assert store.load_path("s", tip) == g.path_to(tip)
    assert store.head("s") == tips[-1]
    assert_loads_as_walked(store, "s")
    assert store.load_path("s", trunk[2]) == g.path_to(trunk[2])


def test_a_chain_stored_out_of_order_is_walked(store: SessionStore) -> None:
    """One chain whose root was stored last: rows in stored order are no path (the reader
    checks), so it is walked."""
    g = graph()
    ids = append_all(store, g, [say(str(n)) for n in range(5)])
    write_sql(store, f"UPDATE nodes SET pk = pk + 1000 WHERE session_id = 's' AND id = '{ids[0]}'")
    assert_loads_as_walked(store, "s")
    assert [node.id for node in store.load_path_nodes("s")] == ids
    assert store.load_path("s", ids[2]) == g.path_to(ids[2])


def test_last_n_of_a_chain_and_of_a_branch(store: SessionStore) -> None:
    g = graph()
    ids = append_all(store, g, [say("q"), call(1), result(1), say("x", "assistant")])
    g.branch_from(ids[1])
    (other,) = append_all(store, g, [result(1)])
    assert [node.id for node in store.load_path_nodes("s", ids[-1], last=1)] == ids[3:]
    # the newest two start on a tool result: moved back to its call
    assert [node.id for node in store.load_path_nodes("s", ids[-1], last=2)] == ids[1:]
    assert [node.id for node in store.load_path_nodes("s", last=1)] == [ids[1], other]
    assert store.load_path("s", ids[-1], last=100) == g.path_to(ids[-1])
    assert store.load_path("s", last=0) == []


def test_last_n_keeps_the_calls_of_parallel_results(store: SessionStore) -> None:
    """Parallel calls stored one per turn (Claude Code's files): the newest turns started on
    the second call, and kept the first call's result without the call."""
    turns = [say("q"), call(1), call(2), call(3), result(1), result(2), result(3), say("x")]
    store.append_many("s", [say("orphan"), result(9), *turns * 300])  # 2,402 turns
    path = store.load_path("s")
    for last in range(1, 9):
        newest = store.load_path("s", last=last)
        calls = {b.id for t in newest for b in t.blocks if isinstance(b, ToolCallBlock)}
        answered = {b.call_id for t in newest for b in t.blocks if isinstance(b, ToolResultBlock)}
        assert answered <= calls, last
        assert newest == path[-len(newest) :]
        assert len(newest) == (1 if last == 1 else max(last, 7))  # from the first call on
    # a result whose call the session never held moves the start back off it, no further
    assert [
        t.blocks[0].kind for t in store.load_path("s", store.load_path_nodes("s")[1].id, last=1)
    ] == ["text", "tool_result"]


def test_unknown_leaves_and_empty_or_missing_sessions(store: SessionStore) -> None:
    append_all(store, graph(), [say("1"), say("2")])
    for leaf in ("no-such-node", "", "nul\x00"):
        with pytest.raises(UnknownNodeError):
            store.load_path("s", leaf)
        with pytest.raises(UnknownNodeError):
            store.load_path_nodes("s", leaf)
    with pytest.raises(UnknownNodeError):
        store.load_path("missing", "no-such-node")
    assert store.load_path("missing") == store.load_path_nodes("missing") == []
    store.update_session("empty", title="nothing yet")
    assert store.load_path("empty") == store.load_path_nodes("empty") == []
    with pytest.raises(UnknownNodeError):
        store.load_path("empty", "no-such-node")
    with pytest.raises(InvalidNodeIdError):
        store.load_path("s", 5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        store.load_path("s", last=-1)


def test_a_session_being_imported_is_invisible(store: SessionStore) -> None:
    ids = append_all(store, graph(), [say("1"), say("2")])
    write_sql(store, "UPDATE sessions SET importing = 'another process' WHERE id = 's'")
    assert store.load_path("s") == store.load_path_nodes("s") == []
    with pytest.raises(UnknownNodeError):
        store.load_path("s", ids[-1])
    with pytest.raises(UnknownNodeError):
        store.load_path_nodes("s", ids[0])
    write_sql(store, "UPDATE sessions SET importing = NULL WHERE id = 's'")
    assert [node.id for node in store.load_path_nodes("s")] == ids


# A random DAG: each new node is a child of an earlier one (index into the nodes so far; None
# starts another root), then the head is moved to one of them.
_dags = st.lists(st.integers(min_value=-1, max_value=30), min_size=1, max_size=25)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parents=_dags, head=st.integers(min_value=0), data=st.data())
def test_random_dags_load_as_walked(
    store: SessionStore, parents: list[int], head: int, data: st.DataObject
) -> None:
    session_id = next(_session_ids)
    g = graph(session_id)
    ids: list[str] = []
    for n, parent in enumerate(parents):
        if ids and parent >= 0:
            g.branch_from(ids[parent % len(ids)])
        elif ids:
            g._leaf = None  # the next node is another root
        turn = data.draw(st.sampled_from([say(f"turn {n}"), call(n), result(n)]))
        ids.extend(append_all(store, g, [turn]))
    store.append_node(session_id, g.get(ids[head % len(ids)]))  # type: ignore[arg-type]
    assert_loads_as_walked(store, session_id)
    for leaf in {ids[0], ids[-1], ids[len(ids) // 2]}:
        assert_loads_as_walked(store, session_id, leaf)
        assert store.load_path(session_id, leaf) == g.path_to(leaf)
