"""Appends through PostgreSQL's `memstore_append` (migration 0025) refuse what the statements
refused, with the same errors and nothing written: a moved head, an unknown parent, another
content under a stored id, a session being imported; node ids hashed from a head the function
cannot write as JSON itself; usage lines; two connections appending at once. Each runs on every
store variant (SQLite takes its statements: the same behaviour is the point)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
import sqlalchemy

from memstore import SessionNode
from memstore.errors import HeadMovedError, NodeConflictError, UnknownNodeError
from memstore.hashing import hash_node
from memstore.store import SessionStore, create_store_engine
from memstore.store.migrate import HEAD_REVISION
from memstore.usage import NodeUsage, usage_record

from .test_append import T0, assert_one_chain, say, table_counts, turn_of

ODD_ID = 'a "quoted" \\ id\twith\x01controls, é and 字'


def test_a_moved_head_is_refused_and_writes_nothing(store: SessionStore, database_url: str) -> None:
    first = store.append("s", say("one"))
    store.append("s", say("two"))
    before = table_counts(database_url)
    with pytest.raises(HeadMovedError):
        store.append("s", say("late"), expected_head=first.id)
    with pytest.raises(HeadMovedError):
        store.append_node(
            "s",
            SessionNode(id="x", parent=first.id, turn=turn_of("x"), created_at=1),
            expected_head=first.id,
        )
    with pytest.raises(HeadMovedError):
        store.append("new", say("late"), expected_head=first.id)  # no session: head None
    assert table_counts(database_url) == before


def test_an_unknown_parent_is_refused_and_writes_nothing(
    store: SessionStore, database_url: str
) -> None:
    store.append("s", say("one"))
    before = table_counts(database_url)
    orphan = SessionNode(id="orphan", parent="nowhere", turn=turn_of("x"), created_at=T0)
    with pytest.raises(UnknownNodeError):
        store.append_node("s", orphan)
    with pytest.raises(UnknownNodeError):
        store.append_many("s", [say("a"), say("b")], parent="nowhere")
    assert table_counts(database_url) == before


def test_another_content_under_a_stored_id_is_refused(
    store: SessionStore, database_url: str
) -> None:
    root = SessionNode(id="root", parent=None, turn=turn_of("one"), created_at=T0)
    store.append_node("s", root)
    store.append_node(
        "s", SessionNode(id="child", parent="root", turn=turn_of("two"), created_at=T0)
    )
    before = table_counts(database_url)
    for other in (
        SessionNode(id="root", parent=None, turn=turn_of("other"), created_at=T0),
        SessionNode(id="root", parent=None, turn=turn_of("one"), created_at=T0 + 1),
        SessionNode(id="child", parent=None, turn=turn_of("two"), created_at=T0),
    ):
        with pytest.raises(NodeConflictError, match="different content"):
            store.append_node("s", other)
    assert table_counts(database_url) == before
    store.append_node("s", root)  # the same content again: the head moves back, one more record
    assert store.head("s") == "root"
    assert table_counts(database_url) == {**before, "records": before["records"] + 1}


def test_ids_hang_from_a_head_json_escapes(store: SessionStore) -> None:
    """The function hashes plain ids itself; for a head with quotes, backslashes or control
    characters the store hashes (one more call), so ids are `hash_node`'s either way."""
    odd = SessionNode(id=ODD_ID, parent=None, turn=turn_of("odd"), created_at=T0)
    store.append_node("s", odd)
    node = store.append("s", say("after the odd one, ünïcode 🙂"), created_at=T0 + 1)
    assert node.parent == ODD_ID
    assert node.id == hash_node(ODD_ID, turn_of("after the odd one, ünïcode 🙂"), T0 + 1)
    more = store.append_many("s", [say("é"), say("字", "assistant")], created_at=T0 + 2)
    assert [n.parent for n in more] == [node.id, more[0].id]
    assert more[1].id == hash_node(more[0].id, turn_of("字", "assistant"), T0 + 2)
    assert [n.id for n in assert_one_chain(store, "s", 4)] == [ODD_ID, node.id] + [
        n.id for n in more
    ]


def test_usage_lines_name_their_nodes_as_json_writes_them(
    store: SessionStore, database_url: str
) -> None:
    usage = NodeUsage(provider="p", model="m", input_tokens=3, cost_usd=0.5)
    odd = SessionNode(id=ODD_ID, parent=None, turn=turn_of("odd"), created_at=T0)
    store.append_node("s", odd)
    nodes = store.append_many("s", [say("a"), say("b")], usage=[usage, None])
    store.record_usage("s", usage, node_id=ODD_ID)
    engine = create_store_engine(database_url)
    if True:
        with engine.connect() as connection:
            raws = connection.execute(
                sqlalchemy.text("SELECT raw FROM records WHERE raw IS NOT NULL ORDER BY pk")
            ).scalars()
            assert list(raws) == [
                usage_record(nodes[0].id, usage) + "\n",
                usage_record(ODD_ID, usage) + "\n",
            ]
    with engine.connect() as connection:
        kept = connection.execute(sqlalchemy.text("SELECT node_id, input_tokens FROM node_usage"))
        assert sorted(kept) == sorted([(nodes[0].id, 3), (ODD_ID, 3)])
    engine.dispose()


def test_two_connections_appending_at_once_make_one_chain(database_url: str) -> None:
    stores = [SessionStore(database_url), SessionStore(database_url)]
    errors: list[BaseException] = []

    def write(store: SessionStore, name: str) -> None:
        try:
            for index in range(25):
                store.append("shared", say(f"{name} {index}"))
                store.append_many("shared", [say(f"{name} {index} a"), say(f"{name} {index} b")])
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [
        threading.Thread(target=write, args=(store, name))
        for store, name in zip(stores, "ab", strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        assert_one_chain(stores[0], "shared", 150)
    finally:
        for store in stores:
            store.close()


def test_two_async_stores_appending_at_once_make_one_chain(database_url: str) -> None:
    from memstore.store.aio import AsyncSessionStore

    async def write(store: AsyncSessionStore, name: str) -> None:
        for index in range(25):
            await store.append("shared", say(f"{name} {index}"))
            await store.append_many("shared", [say(f"{name} {index} a"), say(f"{name} {index} b")])

    async def main() -> None:
        stores = [AsyncSessionStore(database_url), AsyncSessionStore(database_url)]
        try:
            await asyncio.gather(
                *(write(store, name) for store, name in zip(stores, "ab", strict=True))
            )
        finally:
            for store in stores:
                await store.close()

    asyncio.run(main())
    with SessionStore(database_url) as store:
        assert_one_chain(store, "shared", 150)


def test_the_migration_installs_and_drops_the_function(postgres_url: str) -> None:
    exists = sqlalchemy.text(  # in this test's schema: other tests' schemas hold theirs
        "SELECT count(*) FROM pg_proc WHERE proname = 'memstore_append'"
        " AND pronamespace = current_schema()::regnamespace"
    )
    store = SessionStore(postgres_url)
    engine = create_store_engine(postgres_url)
    try:
        store.append("s", say("kept"))
        with engine.connect() as connection:
            assert connection.execute(exists).scalar_one() == 1
        store.downgrade_schema("0024")
        with engine.connect() as connection:
            assert connection.execute(exists).scalar_one() == 0
        store.upgrade_schema(HEAD_REVISION)
        with engine.connect() as connection:
            assert connection.execute(exists).scalar_one() == 1
        assert [node.turn for node in store.load_path_nodes("s")] == [turn_of("kept")]
    finally:
        engine.dispose()
        store.close()


def _node(text: str, stamp: int = T0) -> dict[str, object]:
    """A node as the client sends it to the function: one text block, no search words."""
    turn_json = json.dumps({"role": "user", "blocks": [{"kind": "text", "text": text}]})
    return {
        "turn_json": turn_json,
        "role": "user",
        "created_at": stamp,
        "created_json": str(stamp),
        "search_chars": "",
        "search_vector": "",
        "search_chars_vector": "",
    }


# Calls of `memstore_append` (session, check, expected, ids, parent, nodes), in order: every
# answer and every refusal, with the ids written out or hashed by the function.
_CALLS: list[tuple[str, bool, str | None, list[str] | None, str | None, list[str]]] = [
    ("a", False, None, None, None, ["one", "two"]),  # a new session, ids hashed
    ("a", True, None, None, None, ["late"]),  # moved: the head is not None
    ("new", True, "x", None, None, ["late"]),  # moved: no session
    ("new", False, None, ["k"], "nowhere", ["x"]),  # unknown parent, no session
    ("b", False, None, ["r", "c"], None, ["one", "two"]),  # ids given
    ("b", False, None, ["r"], None, ["other"]),  # conflict: another content
    ("b", False, None, ["d", "r"], "c", ["three", "one"]),  # conflict after a new node
    ("b", False, None, ["e", "e"], "c", ["four", "four"]),  # conflict within the chain
    ("b", False, None, ["f", "g", "f"], "c", ["5", "6", "5"]),  # ... further down it
    ("b", True, "c", ["r", "c"], None, ["one", "two"]),  # the same nodes again: the head moves
    ("b", False, None, None, None, ["seven"]),  # hashed from a head of 'c'
    ("q", False, None, ['q"uote'], None, ["one"]),  # a head the function cannot write as JSON
    ("q", False, None, None, None, ["two"]),  # rehash
    ("q", False, None, ["z"], "gone", ["two"]),  # unknown parent
    ("i", False, None, None, None, ["one"]),
    ("i", False, None, None, None, ["two"]),  # importing (set below before this call)
]
_IMPORTING_BEFORE = 15


def _run_calls(connection: sqlalchemy.Connection, prefix: str) -> list[tuple[object, ...]]:
    """Make `_CALLS` on sessions named with `prefix`; the function's answers."""
    call = sqlalchemy.text(
        "SELECT outcome, head, importing, ids, detail FROM memstore_append("
        "'', :session, 7, :check, :expected, CAST(:ids AS text[]), :parent, "
        "CAST(:nodes AS jsonb), CAST(:blocks AS jsonb), CAST(:usage AS text[]))"
    )
    answers = []
    for number, (session, check, expected, ids, parent, texts) in enumerate(_CALLS):
        if number == _IMPORTING_BEFORE:
            connection.execute(
                sqlalchemy.text("UPDATE sessions SET importing = 'job' WHERE id = :id"),
                {"id": prefix + session},
            )
        blocks = [
            {"n": n, "position": 0, "kind": "text", "is_error": 0} for n in range(1, len(texts) + 1)
        ]
        row = connection.execute(
            call,
            {
                "session": prefix + session,
                "check": check,
                "expected": expected,
                "ids": ids,
                "parent": parent,
                "nodes": json.dumps([_node(text) for text in texts]),
                "blocks": json.dumps(blocks),
                "usage": [',"input":1}\n'] + [None] * (len(texts) - 1),
            },
        ).one()
        answers.append(tuple(row))
        connection.commit()
    return answers


def _rows(connection: sqlalchemy.Connection, prefix: str) -> list[tuple[object, ...]]:
    """Every row of the sessions `prefix` names, without the prefix or the serial keys."""
    rows: list[tuple[object, ...]] = []
    for query in (
        "SELECT substr(id, :cut), head, importing, created_at, updated_at FROM sessions",
        "SELECT substr(session_id, :cut), id, parent_id, created_at, turn_json FROM nodes",
        "SELECT substr(session_id, :cut), node_id, position, kind FROM node_blocks",
        "SELECT substr(session_id, :cut), kind, node_id, raw FROM records",
    ):
        where = " WHERE starts_with(" + ("id" if "FROM sessions" in query else "session_id")
        found = connection.execute(
            sqlalchemy.text(query + where + ", :prefix) ORDER BY 1, 2, 3, 4"),
            {"cut": len(prefix) + 1, "prefix": prefix},
        )
        rows += [tuple(row) for row in found]
    return rows


def test_the_function_without_a_subtransaction_answers_and_writes_as_0037s(
    postgres_url: str,
) -> None:
    """Migration 0038's function, which checks before it writes, answers every call as 0037's
    (whose refusals undid their writes) and leaves the same rows."""
    store = SessionStore(postgres_url)
    engine = create_store_engine(postgres_url)
    try:
        with engine.connect() as connection:
            new = _run_calls(connection, "new:"), _rows(connection, "new:")
        store.downgrade_schema("0037")
        with engine.connect() as connection:
            old = _run_calls(connection, "old:"), _rows(connection, "old:")
        store.upgrade_schema(HEAD_REVISION)
    finally:
        engine.dispose()
        store.close()
    assert new == old
    assert [answer[0] for answer in new[0]] == [
        *("ok", "moved", "moved", "unknown_parent", "ok", "conflict", "conflict", "conflict"),
        *("conflict", "ok", "ok", "ok", "rehash", "unknown_parent", "ok", "importing"),
    ]


def test_a_call_that_finds_no_session_while_another_makes_it_chains_onto_its_head(
    postgres_url: str,
) -> None:
    """A session another transaction is making (not committed) is not there for a call's read:
    the call's insert of the session waits for that transaction, then the call reads the row
    it made and hangs its chain from its head."""
    SessionStore(postgres_url).close()  # the schema made
    engine = create_store_engine(postgres_url)
    call = sqlalchemy.text(
        "SELECT outcome, head, ids FROM memstore_append('', 'z', 7, false, NULL, NULL, NULL, "
        "CAST(:nodes AS jsonb), '[]', NULL)"
    )
    answers: dict[str, tuple[object, ...]] = {}
    try:
        with engine.connect() as first, engine.connect() as second:
            answers["first"] = tuple(first.execute(call, {"nodes": json.dumps([_node("a")])}).one())

            def later() -> None:
                nodes = json.dumps([_node("b")])
                answers["second"] = tuple(second.execute(call, {"nodes": nodes}).one())
                second.commit()

            waiting = threading.Thread(target=later)
            waiting.start()
            waiting.join(timeout=1)
            assert waiting.is_alive()  # waits for the first transaction's session row
            first.commit()
            waiting.join()
    finally:
        engine.dispose()
    made_ids = answers["first"][2]
    assert isinstance(made_ids, list)
    made = made_ids[0]
    assert answers["first"][:2] == ("ok", None)
    assert answers["second"][:2] == ("ok", made)
    with SessionStore(postgres_url) as store:
        assert [node.parent for node in store.load_path_nodes("z")] == [None, made]
