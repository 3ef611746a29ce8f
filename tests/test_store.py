"""The store's contract, run against SQLite and PostgreSQL, sync and async (see conftest)."""

from __future__ import annotations

import itertools
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy

from memstore import (
    InvalidSessionIdError,
    SessionGraph,
    SessionNode,
    Turn,
    UnknownNodeError,
)
from memstore.errors import (
    DatabaseError,
    HeadMovedError,
    InvalidArgumentError,
    NodeConflictError,
    SessionExistsError,
    StoreError,
    UnknownSessionError,
)
from memstore.store import SessionStore, create_store_engine

from .conftest import LEGACY_FILES, expected_for
from .legacy import read_legacy_session


def say(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "blocks": [{"kind": "text", "text": text}]}


def say_turn(text: str, role: str = "user") -> Turn:
    return Turn.model_validate(say(text, role))


def call(n: int) -> dict[str, Any]:
    block = {"kind": "tool_call", "id": f"c{n}", "name": "ls", "input": {"n": n}}
    return {"role": "assistant", "blocks": [block]}


def result(n: int) -> dict[str, Any]:
    return {"role": "user", "blocks": [{"kind": "tool_result", "callId": f"c{n}", "output": n}]}


def graph(session_id: str = "s") -> SessionGraph:
    clock = itertools.count(1_767_225_600_000, 1000)
    return SessionGraph(session_id, clock=lambda: next(clock))


def append_all(store: SessionStore, g: SessionGraph, turns: list[dict[str, Any]]) -> list[str]:
    ids = []
    for turn in turns:
        node = g.next_node(turn)
        store.append_node(g.session_id, node)
        ids.append(g.add(node).id)
    return ids


def record_log(store: SessionStore, session_id: str) -> list[tuple[str, str | None]]:
    """The append log, read with plain SQL."""
    url = store.engine.url
    engine = create_store_engine(url.set(drivername=url.get_backend_name()))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sqlalchemy.text(
                    "SELECT kind, node_id FROM records WHERE session_id = :s ORDER BY pk"
                ),
                {"s": session_id},
            )
            return [(row.kind, row.node_id) for row in rows]
    finally:
        engine.dispose()


def test_an_empty_store(store: SessionStore) -> None:
    assert store.list_sessions() == []
    assert store.sessions() == []
    assert store.head("nope") is None
    assert store.load_path("nope") == []
    empty = store.load_session("nope")
    assert (empty.session_id, empty.size, empty.leaf) == ("nope", 0, None)


def test_appended_nodes_load_back_as_the_same_graph(store: SessionStore) -> None:
    g = graph()
    ids = append_all(store, g, [say("q"), call(1), result(1), say("a", "assistant")])
    loaded = store.load_session("s")
    assert loaded.leaf == g.leaf == ids[-1]
    assert loaded.all() == g.all()
    assert store.load_path("s") == g.path_to(ids[-1])
    assert store.head("s") == ids[-1]
    assert store.list_sessions() == ["s"]


def test_turns_keep_unknown_keys_key_order_and_exotic_numbers(store: SessionStore) -> None:
    turn = {
        "blocks": [{"kind": "x-vendor", "9": 1, "a": [1.5, 1e21, 2**60]}],
        "traceId": "t",
        "role": "assistant",
    }
    g = graph()
    append_all(store, g, [turn])
    (loaded,) = store.load_path("s")
    assert list(loaded.to_json()) == ["blocks", "traceId", "role"]
    # 2**60 is beyond JavaScript's safe integers: stored as JSON.stringify writes its double.
    assert loaded.to_json()["blocks"][0]["a"] == [1.5, 1e21, 1152921504606847000]


def test_every_append_logs_one_append_record(store: SessionStore) -> None:
    g = graph()
    first, second = append_all(store, g, [say("1"), say("2")])
    store.append_node("s", g.get(first))  # type: ignore[arg-type]
    assert record_log(store, "s") == [("append", first), ("append", second), ("append", first)]


def test_appending_a_stored_node_again_is_idempotent_and_moves_the_head(
    store: SessionStore,
) -> None:
    g = graph()
    first, _ = append_all(store, g, [say("1"), say("2")])
    store.append_node("s", g.get(first))  # type: ignore[arg-type]
    assert store.head("s") == first
    assert store.load_session("s").size == 2


def test_the_same_id_with_other_content_is_refused(store: SessionStore) -> None:
    g = graph()
    (first,) = append_all(store, g, [say("1")])
    forged = SessionNode(id=first, parent=None, turn=Turn.model_validate(say("x")), created_at=1)
    with pytest.raises(NodeConflictError, match=first):
        store.append_node("s", forged)
    assert store.load_path("s") == [Turn.model_validate(say("1"))]
    assert len(record_log(store, "s")) == 1


def test_a_node_whose_parent_is_missing_is_refused_and_nothing_is_written(
    store: SessionStore,
) -> None:
    orphan = SessionNode(
        id="n1", parent="missing", turn=Turn.model_validate(say("x")), created_at=1
    )
    with pytest.raises(UnknownNodeError, match="missing"):
        store.append_node("s", orphan)
    assert store.list_sessions() == []


def test_compare_and_set_append(store: SessionStore) -> None:
    g = graph()
    first = g.next_node(say("1"))
    store.append_node("s", first, expected_head=None)
    g.add(first)
    second = g.next_node(say("2"))
    with pytest.raises(HeadMovedError) as info:
        store.append_node("s", second, expected_head="stale")
    assert (info.value.expected, info.value.actual) == ("stale", first.id)
    assert "stale" in str(info.value)
    assert first.id in str(info.value)
    assert store.head("s") == first.id
    store.append_node("s", second, expected_head=first.id)
    assert store.head("s") == second.id
    with pytest.raises(HeadMovedError):
        store.append_node("s", g.next_node(say("3")), expected_head=None)


def test_load_path_of_a_branch_and_of_an_unknown_leaf(store: SessionStore) -> None:
    g = graph()
    root, a = append_all(store, g, [say("q"), say("A", "assistant")])
    g.branch_from(root)
    (b,) = append_all(store, g, [say("B", "assistant")])
    assert store.head("s") == b
    assert store.load_path("s", a) == g.path_to(a)
    assert store.load_path("s", b) == g.path_to(b)
    with pytest.raises(UnknownNodeError):
        store.load_path("s", "no-such-node")


def test_load_path_last_n_never_starts_on_an_orphaned_tool_result(store: SessionStore) -> None:
    g = graph()
    turns = [say("q"), call(1), result(1), say("x", "assistant"), call(2), result(2)]
    ids = append_all(store, g, turns)
    nodes = store.load_path_nodes("s", last=3)
    assert [n.id for n in nodes] == ids[3:]
    nodes = store.load_path_nodes("s", last=1)  # would start on result(2): moved back
    assert [n.id for n in nodes] == ids[4:]
    assert store.load_path("s", last=0) == []
    assert len(store.load_path("s", last=100)) == 6
    assert [n.id for n in store.load_path_nodes("s", ids[2], last=1)] == ids[1:3]
    with pytest.raises(ValueError, match="last"):
        store.load_path("s", last=-1)


def test_sessions_report_metadata_and_filter(store: SessionStore) -> None:
    append_all(store, graph("a"), [say("1"), say("2")])
    append_all(store, graph("b"), [say("1")])
    store.update_session(
        "a",
        title="Fix the parser",
        tags=["bug", "parser"],
        metadata={"project": "p", "priority": 2, "open": True},
    )
    store.update_session("empty", title="Just metadata")
    infos = {info.id: info for info in store.sessions()}
    assert set(infos) == {"a", "b", "empty"}
    a = infos["a"]
    assert (a.node_count, a.title, a.tags) == (2, "Fix the parser", ("bug", "parser"))
    assert a.metadata == {"project": "p", "priority": 2, "open": True}
    assert a.head == store.head("a")
    assert a.created_at <= a.updated_at
    assert infos["empty"].node_count == 0
    assert infos["empty"].head is None
    assert [i.id for i in store.sessions(tag="bug")] == ["a"]
    assert [i.id for i in store.sessions(tag="nope")] == []
    assert [i.id for i in store.sessions(title_contains="parser")] == ["a"]
    assert [i.id for i in store.sessions(title_contains="%")] == []
    assert [i.id for i in store.sessions(metadata={"project": "p"})] == ["a"]
    assert [i.id for i in store.sessions(metadata={"priority": 2, "open": True})] == ["a"]
    assert [i.id for i in store.sessions(metadata={"priority": 3})] == []
    assert len(store.sessions(limit=2)) == 2
    store.update_session("a", tags=[])
    assert store.session_info("a").tags == ()
    with pytest.raises(UnknownSessionError):
        store.session_info("zzz")


def test_delete_session_removes_only_that_session(store: SessionStore) -> None:
    append_all(store, graph("a"), [say("1"), say("2")])
    append_all(store, graph("b"), [say("1")])
    store.update_session("a", tags=["t"])
    assert store.delete_session("a") is True
    assert store.delete_session("a") is False
    assert store.list_sessions() == ["b"]
    assert store.load_session("a").size == 0
    assert record_log(store, "a") == []
    assert store.load_session("b").size == 1


def test_a_metadata_filter_key_names_exactly_that_top_level_key(store: SessionStore) -> None:
    """Any string is a key, quotes and dots included: never a path into nested metadata."""
    store.update_session("nested", metadata={"team": {"sub": "v"}, "a.b": "dotted"})
    store.update_session("weird", metadata={'we"ird': "w", "team": "t", "x.y": 1})
    assert store.sessions(metadata={'team"."sub': "v"}) == []
    assert store.sessions(metadata={"team.sub": "v"}) == []
    assert [info.id for info in store.sessions(metadata={'we"ird': "w"})] == ["weird"]
    assert [info.id for info in store.sessions(metadata={"a.b": "dotted"})] == ["nested"]
    assert [info.id for info in store.sessions(metadata={"x.y": 1})] == ["weird"]
    assert [info.id for info in store.sessions(metadata={"team": "t"})] == ["weird"]
    assert store.sessions(metadata={"$": "t"}) == []


def test_fork_session_copies_one_path(store: SessionStore) -> None:
    g = graph("src")
    root, a = append_all(store, g, [say("q"), say("A", "assistant")])
    g.branch_from(root)
    (b,) = append_all(store, g, [say("B", "assistant")])
    assert store.fork_session("src", a, "copy") == a
    copy = store.load_session("copy")
    assert copy.size == 2
    assert copy.leaf == a
    assert copy.path_to(a) == g.path_to(a)
    assert record_log(store, "copy") == [("append", root), ("append", a)]
    assert store.fork_session("src", None, "head-copy") == b
    with pytest.raises(SessionExistsError):
        store.fork_session("src", a, "copy")
    with pytest.raises(UnknownSessionError):
        store.fork_session("nope", None, "x")
    with pytest.raises(UnknownNodeError):
        store.fork_session("src", "no-node", "y")
    assert "y" not in store.list_sessions()


def test_a_handle_appends_and_persists_in_one_step(store: SessionStore) -> None:
    handle = store.session("h")
    first = handle.append(say("hello"))
    second = handle.append(say("hi", "assistant"))
    assert store.head("h") == second.id == handle.leaf
    assert store.load_path("h") == handle.path()
    handle.branch_from(first.id)
    third = handle.append(say("hey", "assistant"))
    assert third.parent == first.id
    assert store.head("h") == third.id
    assert store.load_session("h").size == 3


def test_two_handles_append_one_linear_chain_without_retrying(store: SessionStore) -> None:
    one = store.session("h")
    two = store.session("h")
    first = one.append(say("from one"))
    second = two.append(say("from two"))  # at the store's head, though `two` never saw `first`
    assert second.parent == first.id
    assert store.load_path("h") == [say_turn("from one"), say_turn("from two")]
    assert one.head == first.id  # a handle knows the head it last saw ...
    assert one.refresh() == second.id == one.head  # ... and reads the store's in one query
    assert one.path(last=1) == [say_turn("from two")]


def test_a_handle_detects_interleaving_with_expected_head(store: SessionStore) -> None:
    one = store.session("h")
    two = store.session("h")
    one.append(say("from one"))
    with pytest.raises(HeadMovedError):
        two.append(say("from two"), expected_head=two.head)
    assert two.head is None  # a refused append leaves the handle as it was
    assert store.load_session("h").size == 1
    two.refresh()
    appended = two.append(say("from two"), expected_head=two.head)
    assert store.head("h") == appended.id
    assert appended.parent == one.leaf
    assert two.load_graph().size == 2


@pytest.mark.parametrize("bad", ["", "..", "a/b", "a\\b", "nul\x00", "x" * 256])
def test_unsafe_session_ids_are_refused(store: SessionStore, bad: str) -> None:
    node = SessionNode(id="n", parent=None, turn=Turn.model_validate(say("x")), created_at=1)
    with pytest.raises(InvalidSessionIdError):
        store.append_node(bad, node)
    assert store.list_sessions() == []


def test_sql_in_a_session_id_is_plain_data(store: SessionStore) -> None:
    hostile = "x'; DROP TABLE nodes; --"
    append_all(store, graph(hostile), [say("1")])
    assert store.list_sessions() == [hostile]
    assert store.load_session(hostile).size == 1


@pytest.mark.parametrize("path", LEGACY_FILES, ids=lambda p: p.stem)
def test_legacy_sessions_replayed_through_append_node(store: SessionStore, path: Path) -> None:
    if path.stem == "large-session":
        pytest.skip("3,000 single appends: covered by the import tests")
    expected = expected_for(path)
    original = read_legacy_session(path)
    for node in original.all():
        store.append_node(path.stem, node)
    store.append_node(path.stem, original.get(expected["leaf"]))  # type: ignore[arg-type]
    loaded = store.load_session(path.stem)
    assert loaded.all() == original.all()
    assert [n.id for n in store.load_path_nodes(path.stem)] == expected["pathIds"]


def test_bad_urls_are_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="unsupported database 'mysql'"):
        SessionStore("mysql://localhost/db")
    with pytest.raises(StoreError, match="not a database URL"):
        SessionStore("::nonsense::")
    with pytest.raises(StoreError, match="in-memory"):
        SessionStore("sqlite://")
    with pytest.raises(DatabaseError, match="opening the store failed"):
        SessionStore(f"sqlite:///{tmp_path}/no/such/dir/x.db")


def test_an_unreachable_database_is_a_clear_error() -> None:
    with pytest.raises(DatabaseError, match="opening the store failed") as info:
        SessionStore("postgresql://127.0.0.1:1/nothing")
    assert "127.0.0.1" in str(info.value)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_postgresql_server_that_does_not_answer_is_an_error_after_the_connect_timeout(
    monkeypatch: pytest.MonkeyPatch, flavour: str
) -> None:
    """A socket that accepts connections but never speaks: the store gives up, with one error."""
    import asyncio
    import socket

    import memstore.store.engine
    from memstore.errors import StoreError

    monkeypatch.setattr(memstore.store.engine, "CONNECT_TIMEOUT_SECONDS", 1)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"postgresql://127.0.0.1:{silent.getsockname()[1]}/none"
        started = time.monotonic()
        with pytest.raises(StoreError):
            _list_sync(url) if flavour == "sync" else asyncio.run(_list_async(url))
        assert time.monotonic() - started < 30  # not for ever


def _list_sync(url: str) -> None:
    SessionStore(url).list_sessions()


async def _list_async(url: str) -> None:
    from memstore import AsyncSessionStore

    store = AsyncSessionStore(url)
    try:
        await store.list_sessions()
    finally:
        await store.close()


def test_an_append_behind_a_held_lock_fails_after_the_lock_timeout_with_a_clear_error(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memstore.store.engine
    from memstore.errors import DatabaseError

    monkeypatch.setattr(memstore.store.engine, "LOCK_TIMEOUT_SECONDS", 0.5)
    node = SessionGraph("s").append({"role": "user", "blocks": []})
    with SessionStore(postgres_url) as store:
        holder = sqlalchemy.create_engine(store.engine.url)
        try:
            with holder.begin() as connection:  # a long transaction holding the table
                connection.exec_driver_sql("LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE")
                started = time.monotonic()
                held = r"lock timeout \(another connection held a lock"
                with pytest.raises(DatabaseError, match=held):
                    store.append_node("s", node)
                assert time.monotonic() - started < 30
        finally:
            holder.dispose()
        store.append_node("s", node)  # once the lock is gone, appends go through
        assert store.head("s") == node.id


def test_a_session_field_holding_a_nul_is_refused_where_the_database_cannot_store_it(
    store: SessionStore,
) -> None:
    """PostgreSQL cannot store NUL in text or jsonb: an InvalidArgumentError names the field
    (it was a bare DatabaseError); SQLite stores it."""
    fields: list[dict[str, Any]] = [
        {"title": "a\0b"},
        {"tags": ["ok", "a\0b"]},
        {"metadata": {"deep": [{"x": "a\0b"}]}},
        {"metadata": {"a\0b": 1}},
    ]
    named = ["title", "tags[1]", "metadata['deep'][0]['x']", "metadata key 'a\\x00b'"]
    for given, name in zip(fields, named, strict=True):
        if store.backend.text_holds_nul:
            store.update_session("s", **given)
            continue
        with pytest.raises(InvalidArgumentError) as caught:
            store.update_session("s", **given)
        assert str(caught.value) == (
            f"{name} holds a NUL character, which PostgreSQL cannot store: remove it"
        )
    if store.backend.text_holds_nul:
        info = store.session_info("s")
        assert (info.title, info.tags, info.metadata) == ("a\0b", ("a\0b", "ok"), {"a\0b": 1})
    else:
        assert store.list_sessions() == []


def test_a_session_field_holding_a_lone_surrogate_is_refused_by_name_on_every_backend(
    store: SessionStore,
) -> None:
    """A lone surrogate is not text: a tag raised a bare UnicodeEncodeError, metadata a
    DatabaseError on PostgreSQL (SQLite stored it escaped); now one error names the field, and
    nothing is written."""
    store.update_session("s", title="kept", tags=["kept"], metadata={"kept": 1})
    fields: list[dict[str, Any]] = [
        {"title": "a\ud800"},
        {"tags": ["ok", "\udfffb"]},
        {"metadata": {"deep": [{"x": "a\ud800"}]}},
        {"metadata": {"\ud800": 1}},
    ]
    named = ["title", "tags[1]", "metadata['deep'][0]['x']", "metadata key '\\ud800'"]
    for given, name in zip(fields, named, strict=True):
        with pytest.raises(InvalidArgumentError) as caught:
            store.update_session("s", **given)
        assert str(caught.value) == (
            f"{name} holds a lone surrogate, which is not text (no database stores it): remove it"
        )
    info = store.session_info("s")
    assert (info.title, info.tags, info.metadata) == ("kept", ("kept",), {"kept": 1})


def test_a_forks_or_merges_metadata_holding_a_nul_is_refused_where_the_database_cannot_store_it(
    store: SessionStore,
) -> None:
    """Forking with metadata and merging metadata check as `update_session` does (they were a
    bare DatabaseError on PostgreSQL), and write nothing."""
    store.append("s", {"role": "user", "blocks": [{"kind": "text", "text": "hi"}]})
    if store.backend.text_holds_nul:
        store.fork_session("s", None, "f", metadata={"x": "a\0b"})
        store.append_merging_metadata("s", [], {"s": {"x": "a\0b"}})
        assert store.session_info("f").metadata == store.session_info("s").metadata
        return
    with pytest.raises(InvalidArgumentError, match=r"metadata of session 'f'\['x'\] holds a NUL"):
        store.fork_session("s", None, "f", metadata={"x": "a\0b"})
    with pytest.raises(InvalidArgumentError, match=r"merge for session 's'\['x'\] holds a NUL"):
        store.append_merging_metadata("s", [], {"s": {"x": "a\0b"}})
    assert store.list_sessions() == ["s"]
    assert store.session_info("s").metadata == {}


def _closed(dbapi_connection: Any) -> bool:
    """Whether a driver's connection (psycopg's or sqlite3's) is closed."""
    if hasattr(dbapi_connection, "closed"):
        return bool(dbapi_connection.closed)
    try:
        dbapi_connection.cursor()
    except sqlite3.ProgrammingError:
        return True
    return False


def test_a_connection_in_use_when_the_store_closes_is_closed_when_its_call_ends(
    database_url: str,
) -> None:
    """A call still running in another thread when the application closes the store keeps its
    connection until it ends, and then it is closed: it was put back into the discarded pool
    and found open when collected (psycopg's ResourceWarning, in whatever ran next)."""
    store = SessionStore(database_url)
    store.append("s", {"role": "user", "blocks": [{"kind": "text", "text": "hi"}]})
    inside, leave = threading.Event(), threading.Event()
    used: list[Any] = []

    def call() -> None:
        with store.transaction(write=False) as connection:
            used.append(connection.connection.dbapi_connection)
            inside.set()
            leave.wait(10)
            assert connection.exec_driver_sql("SELECT count(*) FROM sessions").scalar() == 1

    worker = threading.Thread(target=call)
    worker.start()
    assert inside.wait(10)
    store.close()
    assert not _closed(used[0])  # the running call keeps it
    leave.set()
    worker.join()
    assert _closed(used[0])
    assert store.list_sessions() == ["s"]  # a closed store opens new connections when used,
    with store.engine.connect() as connection:  # and pools them as before
        pooled = connection.connection.dbapi_connection
    with store.engine.connect() as connection:
        assert connection.connection.dbapi_connection is pooled
    assert not _closed(pooled)
    store.close()
    assert _closed(pooled)
