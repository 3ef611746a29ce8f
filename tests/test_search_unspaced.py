"""Search inside text written without spaces (Chinese, Japanese, Thai, Korean), on both
backends: found inside words, through an index, kept current by every write, and migrated."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from alembic.script import ScriptDirectory

from memstore import SessionGraph, SessionStore
from memstore.jsonl import JsonlSessionStore
from memstore.store.migrate import alembic_config
from memstore.store.policy import backend_of
from memstore.store.rows import search_chars
from memstore.store.search import _phrase_search, text_snippet
from memstore.store.tables import TENANT_KEY

from .test_query import check_fts, explain

TEXTS = [
    "漢字かなカナ",
    "我们使用全文检索来查找会话。",
    "日本語の文章を検索する upload",
    "Python入門書を読んだ",
    "ภาษาไทยง่ายมาก",
    "한국어를 배웁니다",
    "the flaky uploader fails",
]


def say(text: str) -> dict[str, Any]:
    return {"role": "user", "blocks": [{"kind": "text", "text": text}]}


def chain(session_id: str, texts: list[str]) -> SessionGraph:
    clock = itertools.count(1_767_225_600_000, 1000)
    graph = SessionGraph(session_id, clock=clock.__next__)
    for text in texts:
        graph.append(say(text))
    return graph


def found(store: SessionStore, query: str, **options: Any) -> list[str]:
    """The texts of the turns `query` finds, best first."""
    texts = {
        node.id: node.turn.to_json()["blocks"][0]["text"] for node in store.load_session("s").all()
    }
    return [texts[hit.node_id] for hit in store.search(query, **options)]


@pytest.fixture
def filled(store: SessionStore) -> SessionStore:
    for node in chain("s", TEXTS).all():
        store.append_node("s", node)
    return store


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("漢字", ["漢字かなカナ"]),  # the example: a word at the start of a longer one
        ("かなカ", ["漢字かなカナ"]),  # and in the middle, across scripts
        ("漢字かなカナ", ["漢字かなカナ"]),  # the whole word still finds itself
        ("检索", ["我们使用全文检索来查找会话。"]),
        ("全文 会话", ["我们使用全文检索来查找会话。"]),  # every word required, in any order
        ("文章を検索", ["日本語の文章を検索する upload"]),
        ("ภาษาไทย", ["ภาษาไทยง่ายมาก"]),
        ("한국어", ["한국어를 배웁니다"]),
        ("Python入門", ["Python入門書を読んだ"]),  # letters joined to the characters: whole
        ("検索 upload", ["日本語の文章を検索する upload"]),  # mixed: the word stays a word
        ("字漢", []),  # characters in another order
        ("漢字 nothere", []),
        ("検索 uploa", []),  # an unspaced word does not make the other words substrings
        ("thon入門", []),  # letters next to the characters match as a whole word only
    ],
)
def test_words_are_found_inside_text_without_spaces(
    filled: SessionStore, query: str, expected: list[str]
) -> None:
    assert found(filled, query) == expected


def test_word_queries_keep_matching_whole_words(filled: SessionStore) -> None:
    assert found(filled, "upload") == ["日本語の文章を検索する upload"]  # not "uploader"
    assert found(filled, "uploader flaky") == ["the flaky uploader fails"]
    assert found(filled, "ploa") == []


def test_hits_have_snippets_ranks_and_limits(filled: SessionStore) -> None:
    for node in chain("t", ["漢字と漢字", "漢字"]).all():
        filled.append_node("t", node)
    hits = filled.search("漢字")
    assert len(hits) == 3
    assert [hit.rank for hit in hits] == sorted((hit.rank for hit in hits), reverse=True)
    assert {hit.snippet for hit in hits} >= {"[漢字]かなカナ", "[漢字]"}
    assert len(filled.search("漢字", limit=2)) == 2
    assert len(filled.search("漢字", session_id="t")) == 2
    (hit,) = filled.search("検索 upload")
    assert hit.snippet == "日本語の文章を[検索]する [upload]"


def test_a_snippet_is_cut_around_the_first_match() -> None:
    text = "あ" * 100 + "漢字" + "い" * 100
    cut = text_snippet(text, ["漢字"])
    assert cut.startswith("…あ")
    assert cut.endswith("い…")
    assert "[漢字]" in cut
    assert len(cut) < 80
    assert text_snippet("no match here", ["漢字"]) == "no match here"


def test_search_chars_splits_only_unspaced_words() -> None:
    assert search_chars("plain ascii text") == ""
    assert search_chars("café naïve") == ""
    assert search_chars("see 漢字かな, and Python入門 ok") == "漢 字 か な , Python 入 門"


def assert_index_whole(database_url: str, store: SessionStore, counts: dict[str, int]) -> None:
    for query, count in counts.items():
        assert len(store.search(query, limit=50)) == count, query
    check_fts(database_url, "nodes_fts_chars")


def test_the_index_follows_every_kind_of_write(
    database_url: str, store: SessionStore, tmp_path: Path
) -> None:
    first = chain("a", ["東京タワー", "大阪城", "plain words"])
    for node in first.all():
        store.append_node("a", node)
    assert_index_whole(database_url, store, {"東京": 1, "阪城": 1, "京都": 0})

    files = JsonlSessionStore(tmp_path)
    for node in chain("b", ["京都の寺", "東京駅", "more plain words"] * 5).all():
        files.append_node("b", node)
    store.import_jsonl(tmp_path / "b.jsonl")
    assert_index_whole(database_url, store, {"東京": 6, "京都": 5})

    store.fork_session("a", first.all()[1].id, "fork")
    assert_index_whole(database_url, store, {"東京": 7, "阪城": 2})

    store.delete_session("a")
    store.delete_session("b")
    assert_index_whole(database_url, store, {"東京": 1, "阪城": 1, "京都": 0})


def _plan(store: SessionStore, dialect: str) -> str:
    """The search's plan; on PostgreSQL, as it runs, the search function's included."""
    statement = _phrase_search(backend_of(dialect), [], ["検索"], None, 20)
    if dialect == "postgresql":
        return explain(store, statement)
    with store.engine.connect() as connection:
        compiled = statement.compile(connection)
        names = compiled.positiontup
        given = compiled.construct_params({TENANT_KEY: store.tenant})  # as a store binds it
        params = tuple(given[n] for n in names) if names else given
        rows = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + str(compiled), params).all()
    return "\n".join(str(row[-1]) for row in rows)


def test_the_search_uses_an_index(database_url: str) -> None:
    store = SessionStore(database_url)
    try:
        for node in chain("s", TEXTS).all():
            store.append_node("s", node)
        dialect = store.engine.dialect.name
        plan = _plan(store, dialect)
        if dialect == "postgresql":
            assert "ix_nodes_search_chars" in plan, plan
        else:
            assert "SCAN nodes_fts_chars VIRTUAL TABLE INDEX" in plan, plan
    finally:
        store.close()


def _revision() -> Any:
    """The revision that added the index (found by its file, so renumbering does not matter)."""
    revisions = ScriptDirectory.from_config(alembic_config()).walk_revisions()
    return next(r for r in revisions if r.path.endswith("_search_without_spaces.py"))


def test_the_migration_indexes_nodes_stored_before_it(database_url: str) -> None:
    revision = _revision()
    store = SessionStore(database_url, auto_migrate=False)
    try:
        store.upgrade_schema(revision.down_revision)
        with store.engine.begin() as connection:
            connection.execute(
                sqlalchemy.text(
                    "INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', 1, 1)"
                )
            )
            connection.execute(
                sqlalchemy.text(
                    "INSERT INTO nodes (session_id, id, role, created_at, turn_json, search_text) "
                    "VALUES ('s', :id, 'user', 1, :turn, :text)"
                ),
                [
                    {"id": "n1", "turn": json.dumps(say("漢字かなカナ")), "text": "漢字かなカナ"},
                    {"id": "n2", "turn": json.dumps(say("english")), "text": "english"},
                ],
            )
            if connection.dialect.name == "sqlite":  # the store indexes what it inserts
                index = (
                    "INSERT INTO nodes_fts(rowid, search_text) SELECT pk, search_text FROM nodes"
                )
                connection.execute(sqlalchemy.text(index))
        store.upgrade_schema(revision.revision)
        store.upgrade_schema()  # the store searches the newest schema
        assert [hit.node_id for hit in store.search("かな")] == ["n1"]
        assert [hit.node_id for hit in store.search("english")] == ["n2"]
        store.downgrade_schema(revision.down_revision)
        store.upgrade_schema()
        assert [hit.node_id for hit in store.search("english")] == ["n2"]
        assert [hit.node_id for hit in store.search("カナ")] == ["n1"]
    finally:
        store.close()


def test_the_cli_finds_japanese_words(tmp_path: Path) -> None:
    graph = chain("jp", ["今日は漢字かなカナの練習をしました"])
    JsonlSessionStore(tmp_path).append_node("jp", graph.all()[0])
    base = [sys.executable, "-m", "memstore.cli", "--db", f"sqlite:///{tmp_path / 'cli.db'}"]
    for command in (["import", str(tmp_path / "jp.jsonl")], ["search", "漢字", "--json"]):
        done = subprocess.run([*base, *command], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    (hit,) = json.loads(done.stdout)
    assert hit["sessionId"] == "jp"
    assert "[漢字]" in hit["snippet"]
