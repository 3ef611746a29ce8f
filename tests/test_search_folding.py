"""Search ignores accents alike on SQLite and PostgreSQL (`memstore.store.folding`)."""

from __future__ import annotations

import json
import re
import runpy
import sqlite3
import string
import subprocess
import sys
from contextlib import closing
from typing import Any

import pytest
import sqlalchemy

from memstore import SessionStore
from memstore.store import folding
from memstore.store.migrate import migrations_dir

TEXTS = ["a naïve plan", "a naive plan", "NAÏVE CAPITALS", "nai\u0308ve, decomposed", "tiếng Việt"]


def say(text: str) -> dict[str, Any]:
    return {"role": "user", "blocks": [{"kind": "text", "text": text}]}


def found(store: SessionStore, query: str) -> set[str]:
    """The texts of the turns a query finds."""
    hits = store.search(query, limit=100)
    by_id = {node.id: node for node in store.load_session("s").all()}
    return {by_id[hit.node_id].turn.blocks[0].text for hit in hits}  # type: ignore[union-attr]


@pytest.fixture
def texts(store: SessionStore) -> SessionStore:
    store.append_many("s", [say(text) for text in TEXTS])
    return store


NAIVE = {"a naïve plan", "a naive plan", "NAÏVE CAPITALS", "nai\u0308ve, decomposed"}


@pytest.mark.parametrize("query", ["naive", "naïve", "NAÏVE", "Naïve", "nai\u0308ve"])
def test_a_word_finds_itself_with_and_without_accents(texts: SessionStore, query: str) -> None:
    assert found(texts, query) == NAIVE


def test_a_letter_with_two_accents_keeps_them_on_both_backends(texts: SessionStore) -> None:
    """FTS5's `remove_diacritics 1` folds a Latin letter with one accent only: both agree."""
    assert found(texts, "tiếng việt") == {"tiếng Việt"}
    assert found(texts, "tieng") == set()


PUNCTUATED = ["see example.com", "1.5 times", "x a-b y", "/usr/bin/env", "<b>bold</b>", "a@b.org"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("example", {"see example.com"}),
        ("example.com", {"see example.com"}),
        ("5", {"1.5 times"}),
        ("x a-b y", {"x a-b y"}),
        ("a b", {"x a-b y", "a@b.org"}),
        ("bin", {"/usr/bin/env"}),
        ("bold", {"<b>bold</b>"}),
        ("b", {"<b>bold</b>", "x a-b y", "a@b.org"}),
        ("org", {"a@b.org"}),
    ],
)
def test_words_joined_by_punctuation_are_words_on_both_backends(
    store: SessionStore, query: str, expected: set[str]
) -> None:
    """PostgreSQL's parser reads these as single words (or drops tags); FTS5 sees the parts."""
    store.append_many("s", [say(text) for text in PUNCTUATED])
    assert found(store, query) == expected


def test_a_snippet_marks_the_accented_word_a_plain_query_found(texts: SessionStore) -> None:
    snippets = {hit.snippet for hit in texts.search("naive plan")}
    assert any("[naïve]" in snippet for snippet in snippets), snippets
    assert any("[naive]" in snippet for snippet in snippets), snippets


def test_the_snippet_of_a_folded_match_keeps_the_text_as_written() -> None:
    from memstore.store.search import text_snippet

    assert text_snippet("Ça et là, un café naïf", ["cafe", "NAIF"]) == "Ça et là, un [café] [naïf]"


def test_fold_is_what_sqlite_fts5_does() -> None:
    """Every character of the table is folded by the running SQLite's FTS5 as the table says,
    and a few it leaves out are left alone by both."""
    with closing(sqlite3.connect(":memory:")) as memory:
        memory.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        memory.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        chars = folding.FOLDED + folding.DROPPED + "øłйάße"
        rows = [(number, f"q{char}q") for number, char in enumerate(chars)]
        memory.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", rows)
        terms = dict(memory.execute("SELECT doc, term FROM v").fetchall())
    for number, char in enumerate(chars):
        assert terms[number] == "q" + folding.fold(char).lower() + "q", (hex(ord(char)), char)


def test_the_migration_holds_the_same_table() -> None:
    path = next((migrations_dir() / "versions").glob("*_postgresql_search_reads_words_*.py"))
    revision = runpy.run_path(str(path))
    for name in ("FOLDED", "FOLDED_TO", "DROPPED", "SPACED", "ACCENTED"):
        assert revision[name] == getattr(folding, name), name
    assert len(folding.FOLDED) == len(folding.FOLDED_TO)
    accented = re.compile(folding.ACCENTED)
    assert all(accented.match(char) for char in folding.FOLDED + folding.DROPPED)


def test_postgresql_folds_as_python_does(postgres_url: str) -> None:
    text = folding.FOLDED + folding.DROPPED + string.printable + " naïve Ça, don't 漢字"
    statement = sqlalchemy.text(f"SELECT lower({folding.SQL_FOLD}(:text))")
    with SessionStore(postgres_url) as store, store.engine.connect() as connection:
        for each in (text, string.printable, "漢字 a-b"):  # the fast paths too
            folded = connection.execute(statement, {"text": each}).scalar_one()
            assert folded == folding.sql_fold(each).lower()


def test_the_migration_folds_turns_stored_before_it_and_its_downgrade_undoes_it(
    database_url: str,
) -> None:
    with SessionStore(database_url) as store:
        store.append_many("s", [say(text) for text in TEXTS])
        store.downgrade_schema("0019")
        if store.engine.dialect.name == "postgresql":
            with store.engine.connect() as connection:
                exists = f"SELECT to_regprocedure('{folding.SQL_FOLD}(text)') IS NOT NULL"
                assert connection.execute(sqlalchemy.text(exists)).scalar_one() is False
        store.upgrade_schema()
        assert found(store, "naive") == NAIVE


def test_the_cli_finds_an_accented_word(sqlite_url: str) -> None:
    with SessionStore(sqlite_url) as store:
        store.append_many("s", [say("crème brûlée")])
    base = [sys.executable, "-m", "memstore.cli", "--db", sqlite_url]
    done = subprocess.run(
        [*base, "search", "creme brulee", "--json"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    (hit,) = json.loads(done.stdout)
    assert hit["snippet"] == "[crème] [brûlée]"
