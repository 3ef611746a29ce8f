"""SQLite's full-text backlog (migration 0019): writes of a few nodes list them instead of indexing
them, the write that fills the backlog indexes it, and every search finds every turn anyway."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest

from memstore import ReadOnlyStoreError, SessionStore
from memstore.store.plans import LONG_TEXT, SEARCH_BACKLOG

from .test_query import check_fts
from .test_reliability_crash import sql


def turn(text: str) -> dict[str, object]:
    return {"role": "user", "blocks": [{"kind": "text", "text": text}]}


def backlog(url: str) -> int:
    return int(sql(url, "SELECT count(*) FROM nodes_fts_backlog")[0][0])


def indexed(url: str) -> int:
    """Documents in `nodes_fts` (one size row each)."""
    return int(sql(url, "SELECT count(*) FROM nodes_fts_docsize")[0][0])


def write(url: str, statement: str, *params: object) -> None:
    connection = sqlite3.connect(url.removeprefix("sqlite:///"))
    with connection:
        connection.execute(statement, params)
    connection.close()


def append_words(store: SessionStore, session_id: str, count: int, word: str = "word") -> None:
    handle = store.session(session_id)
    for n in range(count):
        handle.append(turn(f"{word}{n} common"))


def test_small_writes_wait_in_the_backlog_until_it_is_full(sqlite_url: str) -> None:
    store = SessionStore(sqlite_url)
    try:
        append_words(store, "s", SEARCH_BACKLOG - 1)
        assert (backlog(sqlite_url), indexed(sqlite_url)) == (SEARCH_BACKLOG - 1, 0)
        check_fts(sqlite_url)
        append_words(store, "t", 1)  # the write that fills it indexes all of it
        assert (backlog(sqlite_url), indexed(sqlite_url)) == (0, SEARCH_BACKLOG)
        check_fts(sqlite_url)
    finally:
        store.close()


def test_a_write_of_many_nodes_indexes_them_at_once(sqlite_url: str) -> None:
    store = SessionStore(sqlite_url)
    try:
        store.append_many("s", [turn(f"word{n}") for n in range(SEARCH_BACKLOG)])
        assert (backlog(sqlite_url), indexed(sqlite_url)) == (0, SEARCH_BACKLOG)
        store.append_many("s", [turn("few"), turn("more")])
        assert (backlog(sqlite_url), indexed(sqlite_url)) == (2, SEARCH_BACKLOG)
    finally:
        store.close()


def test_a_search_finds_the_turns_of_the_backlog(
    database_url: str, open_store: Callable[..., SessionStore]
) -> None:
    """Right after an append, on every backend: a store that can write indexes the backlog first
    (ranks come from the index), a read-only one searches it in memory and leaves it."""
    writer = open_store()
    append_words(writer, "s", 3, word="needle")
    append_words(writer, "other", 2, word="needle")
    reader = open_store(read_only=True)
    found = reader.search("needle1 common")
    assert sorted((hit.session_id, hit.node_id) for hit in found) == sorted(
        (session_id, writer.load_path_nodes(session_id)[1].id) for session_id in ("s", "other")
    )
    assert [hit.session_id for hit in reader.search("needle2", session_id="s")] == ["s"]
    assert reader.search("needle2", session_id="other") == []
    assert "[needle0]" in reader.search("needle0", session_id="s")[0].snippet
    if database_url.startswith("sqlite"):
        assert backlog(database_url) == 5  # the reader wrote nothing
    by_writer = writer.search("needle1 common")
    assert {hit.node_id for hit in by_writer} == {hit.node_id for hit in found}
    if database_url.startswith("sqlite"):
        assert (backlog(database_url), indexed(database_url)) == (0, 5)
        check_fts(database_url)


def test_a_read_only_search_merges_the_backlog_with_the_index(sqlite_url: str) -> None:
    store = SessionStore(sqlite_url)
    try:
        append_words(store, "old", SEARCH_BACKLOG, word="shared")  # indexed
        append_words(store, "new", 3, word="shared")  # waiting
        assert backlog(sqlite_url) == 3
        reader = SessionStore(sqlite_url, read_only=True)
        hits = reader.search("common", limit=SEARCH_BACKLOG + 10)
        reader.close()
        assert len(hits) == SEARCH_BACKLOG + 3
        assert [hit.rank for hit in hits] == sorted((hit.rank for hit in hits), reverse=True)
        limited = SessionStore(sqlite_url, read_only=True)
        assert len(limited.search("common", limit=4)) == 4
        limited.close()
    finally:
        store.close()


def test_unspaced_words_with_other_words_find_backlog_turns(sqlite_url: str) -> None:
    store = SessionStore(sqlite_url)
    try:
        handle = store.session("s")
        handle.append(turn("全文検索 works fine"))
        handle.append(turn("全文検索 only"))
        reader = SessionStore(sqlite_url, read_only=True)
        assert len(reader.search("検索 works")) == 1
        assert len(reader.search("検索")) == 2
        reader.close()
        assert backlog(sqlite_url) == 2
        assert len(store.search("検索 works")) == 1  # indexed first, then found by the index
        assert backlog(sqlite_url) == 0
    finally:
        store.close()


def test_a_session_being_imported_stays_hidden_in_the_backlog(sqlite_url: str) -> None:
    store = SessionStore(sqlite_url)
    try:
        append_words(store, "s", 2, word="hidden")
        write(sqlite_url, "UPDATE sessions SET importing = 'x' WHERE id = 's'")
        reader = SessionStore(sqlite_url, read_only=True)
        assert reader.search("hidden0") == []
        reader.close()
    finally:
        store.close()


def test_deletes_and_updates_keep_index_and_backlog_consistent(sqlite_url: str) -> None:
    """Deleting or rewriting a node the index holds removes its terms; one in the backlog only
    leaves the backlog. A deleted node's key may be given to a new node: the backlog must not
    name it any more (else it would be indexed twice)."""
    store = SessionStore(sqlite_url)
    try:
        append_words(store, "indexed", SEARCH_BACKLOG, word="first")
        append_words(store, "waiting", 3, word="second")
        top = sql(sqlite_url, "SELECT max(pk) FROM nodes")[0][0]
        assert store.delete_session("waiting")
        assert backlog(sqlite_url) == 0
        check_fts(sqlite_url)
        store.session("again").append(turn("reused key"))
        assert sql(sqlite_url, "SELECT pk FROM nodes WHERE session_id = 'again'")[0][0] <= top
        check_fts(sqlite_url)
        new_json = '{"role":"user","blocks":[{"kind":"text","text":"rewritten"}]}'
        connection = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
        with connection:  # one node in the backlog, one indexed
            connection.execute(
                "UPDATE nodes SET turn_json = ? WHERE session_id = 'again'", (new_json,)
            )
            connection.execute(
                "UPDATE nodes SET turn_json = ? WHERE pk = (SELECT min(pk) FROM nodes)", (new_json,)
            )
        connection.close()
        check_fts(sqlite_url)
        assert len(store.search("rewritten")) == 2
        assert store.delete_session("indexed")
        check_fts(sqlite_url)
        assert store.search("first1") == []
    finally:
        store.close()


def test_0019_downgrade_indexes_the_backlog(sqlite_url: str) -> None:
    store = SessionStore(sqlite_url)
    try:
        append_words(store, "s", 3)
        store.downgrade_schema("0018")
        assert sql(sqlite_url, "SELECT name FROM sqlite_master WHERE name LIKE '%backlog%'") == []
        check_fts(sqlite_url)
        assert indexed(sqlite_url) == 3
        deleted = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))  # as the store deleted
        with deleted:  # (this memstore's statements name the tenant, which 0018 has not)
            deleted.execute("PRAGMA foreign_keys = ON")
            deleted.execute("UPDATE nodes SET parent_id = NULL WHERE session_id = 's'")
            assert deleted.execute("DELETE FROM sessions WHERE id = 's'").rowcount == 1
        deleted.close()  # the old triggers are back: the index lost what was deleted
        check_fts(sqlite_url)
        store.upgrade_schema()
        append_words(store, "t", 2)
        assert backlog(sqlite_url) == 2
        check_fts(sqlite_url)
    finally:
        store.close()


def test_index_search_backlog_indexes_what_waits(
    database_url: str, open_store: Callable[..., SessionStore]
) -> None:
    store = open_store()
    append_words(store, "s", 3)
    sqlite = database_url.startswith("sqlite")
    assert store.index_search_backlog() == (3 if sqlite else 0)
    assert store.index_search_backlog() == 0
    if sqlite:
        assert (backlog(database_url), indexed(database_url)) == (0, 3)
        check_fts(database_url)
    with pytest.raises(ReadOnlyStoreError):
        open_store(read_only=True).index_search_backlog()


def test_a_long_text_in_the_backlog_is_indexed_by_itself(sqlite_url: str) -> None:
    store = SessionStore(sqlite_url)
    try:
        long_text = "filler " * (LONG_TEXT // 7 + 1) + "farewell"
        store.session("s").append(turn(long_text))
        assert backlog(sqlite_url) == 1
        assert store.index_search_backlog() == 1
        check_fts(sqlite_url)
        assert [hit.session_id for hit in store.search("farewell")] == ["s"]
    finally:
        store.close()
