"""PostgreSQL's search reads stored vectors, folded in Python as turns are written (migration
0022, `memstore.store.tables.SearchVector`): the same vectors migration 0020's index expressions
computed in SQL, so the same turns are found."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import sqlalchemy
from alembic.script import ScriptDirectory

from memstore import SessionStore
from memstore.store import folding
from memstore.store.migrate import alembic_config
from memstore.store.search import _postgres_hits, derived_search_text
from memstore.store.tables import PG_INDEXED_CHARS

from .test_query import explain

# Accents, combining marks, punctuation, unspaced scripts, case, and texts longer than the
# vectors hold, with an accent and a word right at the cut.
TEXTS = [
    "a naïve plan",
    "NAÏVE CAPITALS, example.com a-b 1.5 /usr/bin a@b.c <tag>",
    "nai\u0308ve tiếng Việt \u00b5 \u212b \u1fbe",
    "東京の検索エンジン and english",
    "x" * (PG_INDEXED_CHARS - 3) + " é cut here, beyond",
    ("é word " * (PG_INDEXED_CHARS // 7 + 10)) + " 漢字",
    "",
]
# The vectors as migration 0020's index expressions computed them, in SQL (of the search text
# derived from the turn since migration 0036).
_MISMATCHES = """SELECT count(*) FROM (SELECT *, memstore_search_text(turn_json) AS search_text
FROM nodes) AS nodes WHERE search_vector IS DISTINCT FROM CASE
WHEN search_text <> '' THEN
to_tsvector('simple', memstore_search_fold(left(search_text, {limit}))) END
OR search_chars_vector IS DISTINCT FROM CASE WHEN search_chars <> '' THEN
to_tsvector('simple', memstore_search_fold(left(search_chars, {limit}))) END"""
MISMATCHES = sqlalchemy.text(_MISMATCHES.format(limit=PG_INDEXED_CHARS))
FILLED = sqlalchemy.text(
    "SELECT count(*), count(search_vector), count(search_chars_vector) FROM nodes"
)


def _before_vectors() -> str:
    """The revision before the one that added the vectors (by its file: renumbering is fine)."""
    revisions = ScriptDirectory.from_config(alembic_config()).walk_revisions()
    found = next(r for r in revisions if r.path.endswith("_search_vectors_folded_in_python.py"))
    assert isinstance(found.down_revision, str)
    return found.down_revision


def say(text: str) -> dict[str, Any]:
    return {"role": "user", "blocks": [{"kind": "text", "text": text}]}


def call(name: str, arguments: object) -> dict[str, Any]:
    block = {"kind": "tool_call", "id": "c1", "name": name, "input": arguments}
    return {"role": "assistant", "blocks": [block]}


def _scalars(store: SessionStore, statement: sqlalchemy.TextClause) -> tuple[Any, ...]:
    with store.engine.connect() as connection:
        return tuple(connection.execute(statement).one())


def _fill(store: SessionStore, tmp_path: Path) -> None:
    """Turns written every way the store writes nodes: one, many, a fork, an import."""
    store.append_many("s", [say(text) for text in TEXTS])
    store.append_many("t", [say("São Paulo façade")])
    store.append_many("t", [call("grép", {"path": "/tmp/naïve.txt"})])
    store.fork_session("t", store.load_session("t").all()[0].id, "fork")
    store.export_jsonl("s", tmp_path / "s.jsonl")
    store.delete_session("s")
    store.import_jsonl(tmp_path / "s.jsonl")


def test_stored_vectors_are_what_sql_folding_makes(postgres_url: str, tmp_path: Path) -> None:
    with SessionStore(postgres_url) as store:
        _fill(store, tmp_path)
        assert _scalars(store, MISMATCHES) == (0,)
        nodes, vectors, chars = _scalars(store, FILLED)
        assert (vectors, chars) == (nodes - 1, 2)  # the empty text has none; two unspaced
        assert {hit.node_id for hit in store.search("naive")} != set()
        assert len(store.search("facade")) == 2  # the turn and its fork
        assert len(store.search("grep naive")) == 1  # the fork ends before it
        assert len(store.search("beyond")) == 1  # past the vectors' end: found by substring


def test_the_migration_fills_the_vectors_of_turns_stored_before_it(
    postgres_url: str, tmp_path: Path
) -> None:
    with SessionStore(postgres_url) as store:
        _fill(store, tmp_path)
        before = {query: store.search(query) for query in ("naive", "検索", "example", "cut")}
        store.downgrade_schema(_before_vectors())
        with store.engine.connect() as connection:
            columns = (
                "SELECT count(*) FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND column_name = :name"
            )
            for name in ("search_vector", "search_chars_vector"):
                assert connection.execute(sqlalchemy.text(columns), {"name": name}).scalar() == 0
        store.upgrade_schema()
        assert _scalars(store, MISMATCHES) == (0,)
        assert _scalars(store, FILLED)[1] > 0
        assert {query: store.search(query) for query in before} == before


def test_the_search_matches_and_ranks_the_stored_vectors(postgres_url: str) -> None:
    with SessionStore(postgres_url) as store:
        store.append_many("s", [say(text) for text in TEXTS[:4]])
        statement = _postgres_hits(["naive"], [], None, 20, derived_search_text())
        sql = str(statement.compile(store.engine))
        assert "memstore_search_keys(" in sql, sql
        assert folding.SQL_FOLD not in sql, sql  # nothing folded per row in the statement
        plan = explain(store, statement)
    assert re.search(r"ts_rank\(\w+\.search_vector", plan), plan
    assert re.search(r"Index Scan on ix_nodes_search\b", plan), plan
    # folding in SQL is left to the turns longer than the vectors hold (a partial index)
    assert re.search(r"Filter: .*memstore_search_fold", plan), plan


def test_a_long_word_with_an_accent_is_stored_at_once(sqlite_url: str) -> None:
    """`search_chars` once took minutes on one long word of non-ASCII text (its regular
    expression backtracked quadratically); both backends store it."""
    from memstore.store.rows import search_chars

    assert search_chars("x" * 1_000_000 + "é") == ""
    assert search_chars("ab漢字cd x" + "y" * 100_000 + "é") == "ab 漢 字 cd"
