"""Appends at the head: `append`, `append_many` and light handles, on both backends, sync and
async; threads and tasks sharing one store; append_many against appends one by one."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import InvalidTurnError, SessionNode, Turn
from memstore.errors import HeadMovedError, NodeConflictError, UnknownNodeError
from memstore.hashing import hash_node
from memstore.store import SessionStore, create_store_engine

from .strategies import wire_turns

T0 = 1_767_225_600_000


def say(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "blocks": [{"kind": "text", "text": text}]}


def turn_of(text: str, role: str = "user") -> Turn:
    return Turn.model_validate(say(text, role))


def table_counts(url: str) -> dict[str, int]:
    """Rows per table: what a refused call must leave unchanged."""
    engine = create_store_engine(url)
    try:
        with engine.connect() as connection:
            count = "SELECT count(*) FROM {}".format
            return {
                name: int(connection.execute(sqlalchemy.text(count(name))).scalar_one())
                for name in ("sessions", "nodes", "node_blocks", "records")
            }
    finally:
        engine.dispose()


def assert_one_chain(store: SessionStore, session_id: str, count: int) -> list[SessionNode]:
    """The session holds exactly `count` nodes, all on the head's path: one linear chain."""
    path = store.load_path_nodes(session_id)
    assert len(path) == count
    assert len({node.id for node in path}) == count
    assert all(child.parent == parent.id for parent, child in itertools.pairwise(path))
    assert store.session_info(session_id).node_count == count
    return path


def test_append_chains_onto_the_head_with_content_addresses(store: SessionStore) -> None:
    first = store.append("s", say("q"), created_at=T0)
    second = store.append("s", say("a", "assistant"))
    assert first.id == hash_node(None, turn_of("q"), T0)
    assert first.parent is None
    assert second.parent == first.id
    assert second.id == hash_node(first.id, turn_of("a", "assistant"), second.created_at)
    assert store.head("s") == second.id
    assert store.load_path_nodes("s") == [first, second]


def test_append_with_expected_head_is_a_compare_and_set(store: SessionStore) -> None:
    first = store.append("s", say("q"), expected_head=None)
    with pytest.raises(HeadMovedError) as raised:
        store.append("s", say("late"), expected_head=None)
    assert (raised.value.expected, raised.value.actual) == (None, first.id)
    second = store.append("s", say("a"), expected_head=first.id)
    assert store.head("s") == second.id
    assert store.session_info("s").node_count == 2


def test_append_many_writes_what_appending_one_by_one_writes(
    store: SessionStore, tmp_path: Path
) -> None:
    turns = [say("q"), say("a", "assistant"), say("more")]
    batch = store.append_many("batch", turns, created_at=T0)
    single = [store.append("single", turn, created_at=T0) for turn in turns]
    assert batch == single
    assert [node.parent for node in batch] == [None, batch[0].id, batch[1].id]
    store.export_jsonl("batch", tmp_path / "batch.jsonl")
    store.export_jsonl("single", tmp_path / "single.jsonl")
    assert (tmp_path / "batch.jsonl").read_bytes() == (tmp_path / "single.jsonl").read_bytes()
    assert store.append_many("batch", []) == []
    assert store.head("batch") == batch[-1].id


def test_a_bad_turn_in_a_batch_writes_nothing(store: SessionStore, database_url: str) -> None:
    store.append("s", say("q"))
    before = table_counts(database_url)
    with pytest.raises(InvalidTurnError):
        store.append_many("s", [say("fine"), {"role": "user", "blocks": [{"kind": "image"}]}])
    assert table_counts(database_url) == before


def test_a_batch_refused_halfway_by_the_database_writes_nothing(
    store: SessionStore, database_url: str
) -> None:
    root = store.append("s", say("root"), created_at=T0)
    first_id = hash_node(root.id, turn_of("one"), T0 + 1)
    second_id = hash_node(first_id, turn_of("two"), T0 + 1)
    # The session already holds the batch's second id, with other content (as an import with
    # mismatched ids may leave it): the batch must fail there and leave no trace of its first.
    impostor = SessionNode(id=second_id, parent=root.id, turn=turn_of("other"), created_at=1)
    store.append_node("s", impostor)
    store.append_node("s", root)  # the head back at the root
    before = table_counts(database_url)
    with pytest.raises(NodeConflictError):
        store.append_many("s", [say("one"), say("two")], created_at=T0 + 1)
    assert table_counts(database_url) == before
    assert store.head("s") == root.id


def test_a_repeated_batch_with_expected_head_writes_nothing(
    store: SessionStore, database_url: str
) -> None:
    root = store.append("s", say("root"))
    turns = [say("one"), say("two", "assistant")]
    first = store.append_many("s", turns, expected_head=root.id, created_at=T0)
    other = store.append("s", say("another writer"))
    before = table_counts(database_url)
    again = store.append_many("s", turns, expected_head=root.id, created_at=T0)
    assert again == first
    assert table_counts(database_url) == before
    assert store.head("s") == other.id  # the head stays where the other writer left it
    with pytest.raises(HeadMovedError):  # other turns, or another time: no repeat
        store.append_many("s", turns, expected_head=root.id, created_at=T0 + 1)


def test_without_expected_head_a_call_is_never_a_repeat(store: SessionStore) -> None:
    store.append("s", say("root"))
    turns = [say("one"), say("two", "assistant")]
    first = store.append_many("s", turns, created_at=T0)
    again = store.append_many("s", turns, created_at=T0)  # as appending them one by one would
    assert again[0].parent == first[-1].id
    assert store.append("s", say("two", "assistant"), created_at=T0).parent == again[-1].id
    assert_one_chain(store, "s", 6)


def test_a_handle_reads_its_history_through_load_path(store: SessionStore) -> None:
    writer = store.session("long")
    writer.append_many([say(f"turn {n}") for n in range(30)])
    reader = store.session("long")
    assert reader.head == writer.head
    assert reader.path(last=20) == [turn_of(f"turn {n}") for n in range(10, 30)]
    assert len(reader.path()) == 30
    assert reader.load_graph().size == 30
    assert store.session("empty").path() == []


def test_opening_and_refreshing_a_handle_read_the_head_only(sqlite_url: str) -> None:
    """One statement each (as SQLite's own trace sees every statement, prepared ones included),
    and none reads the nodes: the cost does not grow with the session."""
    with SessionStore(sqlite_url) as store:
        store.append_many("big", [say(f"turn {n}") for n in range(300)])
        statements: list[str] = []

        def trace(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
            dbapi_connection.set_trace_callback(statements.append)

        sqlalchemy.event.listen(store.engine, "checkout", trace)
        handle = store.session("big")
        opened = [sql for sql in statements if not sql.startswith(("BEGIN", "COMMIT"))]
        store.append("big", say("from elsewhere"))
        statements.clear()
        assert handle.refresh() == store.head("big")
        refreshed = [sql for sql in statements if not sql.startswith(("BEGIN", "COMMIT"))]
    assert len(opened) == 1
    assert len(refreshed) == 2  # the refresh, and the check above
    assert not any("nodes" in sql for sql in opened + refreshed)


def test_a_forked_append_through_a_handle_hangs_from_the_chosen_node(store: SessionStore) -> None:
    handle = store.session("s")
    first = handle.append(say("q"))
    handle.append(say("a"))
    handle.branch_from(first.id)
    assert handle.leaf == first.id
    fork = handle.append(say("b"))
    assert fork.parent == first.id
    assert store.head("s") == fork.id
    after = handle.append(say("c"))  # the fork is done: back to appending at the head
    assert after.parent == fork.id
    handle.branch_from(first.id)
    second_fork = handle.append_many([say("d"), say("e")])
    assert [node.parent for node in second_fork] == [first.id, second_fork[0].id]
    assert handle.head == store.head("s") == second_fork[-1].id


def test_append_many_with_a_parent_forks_or_writes_nothing(
    store: SessionStore, database_url: str
) -> None:
    root = store.append("s", say("q"))
    store.append("s", say("a"))
    fork = store.append_many("s", [say("b"), say("c")], parent=root.id)
    assert fork[0].parent == root.id
    assert store.head("s") == fork[-1].id
    before = table_counts(database_url)
    with pytest.raises(UnknownNodeError):
        store.append_many("s", [say("x"), say("y"), say("z")], parent="no-such-node")
    assert table_counts(database_url) == before


# --- sharing one store ------------------------------------------------------------------------

THREADS = 8
THREAD_APPENDS = 25


def test_threads_sharing_one_store_append_exact_counts_and_linear_chains(
    database_url: str,
) -> None:
    """8 threads share one SessionStore; each appends to a private session and to a shared one
    (half through `append`, half through a handle of its own), with no retry code."""
    store = SessionStore(database_url)
    failures: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            handle = store.session("shared")
            for n in range(THREAD_APPENDS):
                store.append(f"private-{worker}", say(f"{worker}:{n}"))
                if n % 2:
                    handle.append(say(f"shared {worker}:{n}"))
                else:
                    store.append("shared", say(f"shared {worker}:{n}"))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert failures == []
        for worker in range(THREADS):
            assert_one_chain(store, f"private-{worker}", THREAD_APPENDS)
        assert_one_chain(store, "shared", THREADS * THREAD_APPENDS)
    finally:
        store.close()


TASKS = 50
TASK_APPENDS = 4


def test_tasks_sharing_one_async_store_append_exact_counts_and_linear_chains(
    database_url: str,
) -> None:
    """50 tasks share one AsyncSessionStore; each appends to a private session and to a shared
    one (through `append`, a handle and `append_many`), with no retry code."""
    from memstore.store.aio import AsyncSessionStore

    async def work(store: AsyncSessionStore, worker: int) -> None:
        handle = await store.session("shared")
        for n in range(TASK_APPENDS):
            await store.append(f"private-{worker}", say(f"{worker}:{n}"))
            if n == 0:
                await store.append_many("shared", [say(f"shared {worker}:0"), say("and more")])
            elif n % 2:
                await handle.append(say(f"shared {worker}:{n}"))
            else:
                await store.append("shared", say(f"shared {worker}:{n}"))

    async def main() -> None:
        async with AsyncSessionStore(database_url) as store:
            await asyncio.gather(*(work(store, worker) for worker in range(TASKS)))

    asyncio.run(main())
    with SessionStore(database_url) as store:
        for worker in range(TASKS):
            assert_one_chain(store, f"private-{worker}", TASK_APPENDS)
        assert_one_chain(store, "shared", TASKS * (TASK_APPENDS + 1))


# --- append_many against appends one by one ----------------------------------------------------

_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def test_append_many_exports_as_the_same_appends_one_by_one(
    open_store: Callable[..., SessionStore], tmp_path: Path
) -> None:
    """For any turns, any split into batches, and any times: the two sessions' exports are the
    same bytes (and so are the records and heads)."""
    store = open_store()
    sessions = itertools.count()

    @_SETTINGS
    @given(
        batches=st.lists(
            st.tuples(st.lists(wire_turns, min_size=1, max_size=4), st.integers(0, 2**53)),
            min_size=1,
            max_size=4,
        )
    )
    def same_export(batches: list[tuple[list[dict[str, Any]], int]]) -> None:
        number = next(sessions)
        many, single = f"many-{number}", f"single-{number}"
        for turns, created_at in batches:
            try:
                store.append_many(many, turns, created_at=created_at)
            except InvalidTurnError:
                continue  # one invalid turn refuses its whole batch: skip it in both
            for turn in turns:
                store.append(single, turn, created_at=created_at)
        assert store.head(many) == store.head(single)
        if store.head(many) is None:
            return
        store.export_jsonl(many, tmp_path / "many.jsonl")
        store.export_jsonl(single, tmp_path / "single.jsonl")
        assert (tmp_path / "many.jsonl").read_bytes() == (tmp_path / "single.jsonl").read_bytes()

    same_export()
