"""Every search query is words, with one meaning on SQLite and PostgreSQL, and bounded."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import SessionStore
from memstore.errors import InvalidArgumentError
from memstore.store.search import MAX_QUERY_WORDS

TEXTS = ["cats and dogs", "cats or dogs", "foo -bar", "foo baz", "bar", 'say "cats" *now*']


def say(text: str) -> dict[str, Any]:
    return {"role": "user", "blocks": [{"kind": "text", "text": text}]}


def found(store: SessionStore, query: str, session_id: str | None = None) -> set[str]:
    """The texts of the turns a query finds."""
    hits = store.search(query, session_id=session_id, limit=1000)
    by_id = {node.id: node for node in store.load_session(hits[0].session_id).all()} if hits else {}
    return {by_id[hit.node_id].turn.blocks[0].text for hit in hits}  # type: ignore[union-attr]


@pytest.fixture
def texts(store: SessionStore) -> SessionStore:
    store.append_many("s", [say(text) for text in TEXTS])
    return store


def test_operators_are_words_on_both_backends(texts: SessionStore) -> None:
    assert found(texts, "cats or dogs") == {"cats or dogs"}
    assert found(texts, "cats OR dogs") == {"cats or dogs"}
    assert found(texts, "-bar") == {"foo -bar", "bar"}
    assert found(texts, "foo -bar") == {"foo -bar"}
    assert found(texts, '"cats" dogs*') == {"cats and dogs", "cats or dogs"}
    assert found(texts, "(cats) & !now") == {'say "cats" *now*'}
    assert found(texts, "- * ()") == set()


def test_a_repeated_word_counts_once(texts: SessionStore) -> None:
    started = time.monotonic()
    assert found(texts, "cats " * 5000) == found(texts, "cats")
    assert found(texts, "Cats cATS " * 2000 + "dogs") == {"cats and dogs", "cats or dogs"}
    assert time.monotonic() - started < 10  # 5,000 words took minutes


def test_a_query_of_too_many_different_words_is_refused_in_one_line(texts: SessionStore) -> None:
    words = " ".join(f"w{n}" for n in range(MAX_QUERY_WORDS + 1))
    with pytest.raises(InvalidArgumentError) as refused:
        texts.search(words)
    assert str(refused.value) == (
        f"a search query holds at most {MAX_QUERY_WORDS} different words, this one "
        f"{MAX_QUERY_WORDS + 1}: search for fewer"
    )
    assert texts.search(" ".join(f"w{n}" for n in range(MAX_QUERY_WORDS))) == []


# Accented letters too (one accent, two, a combining one, capitals): both ignore accents alike;
# and punctuation that PostgreSQL's parser reads as part of a word (a-b, a.b, a/b, a@b, <a>).
WORDS = st.text(alphabet="abcAB-\"*()|&!:'.@/<>àÀéÉïçệ\u0301", min_size=1, max_size=5)
TEXT = st.lists(WORDS, min_size=1, max_size=8).map(" ".join)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=st.lists(TEXT, min_size=1, max_size=8), query=TEXT)
def test_sqlite_and_postgresql_find_the_same_turns(
    sqlite_url: str, postgres_url: str, corpus: list[str], query: str
) -> None:
    session = uuid.uuid4().hex
    results = []
    for url in (sqlite_url, postgres_url):
        with SessionStore(url) as store:
            store.append_many(session, [say(text) for text in corpus], created_at=1)
            results.append({hit.node_id for hit in store.search(query, session_id=session)})
    assert results[0] == results[1], (corpus, query)
