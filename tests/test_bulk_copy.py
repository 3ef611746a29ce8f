"""Imports write their rows in bulk (PostgreSQL: `COPY ... FROM STDIN`, `memstore.store.copying`):
every value survives byte for byte, the rows are those an append writes, and a refusal in the
middle of a copy leaves the database as it was. On every store variant."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import SessionStore, jsjson
from memstore.errors import DatabaseError
from memstore.hashing import hash_node_text
from memstore.jsonl import head_line, node_line
from memstore.store import import_batch

CREATED_AT = 1_767_225_600_000
HARD = ["\t", "\n", "\r", "\\", "\\.", "\\N", "\x00", "\ud800", "\udfff"]
HARD += ["é", "😀", "\u2028", "漢字"]
hard_texts = st.lists(st.sampled_from(HARD) | st.text(max_size=6), max_size=6).map("".join)
"""Text with what COPY's text format escapes (tab, newline, CR, backslash, its end marker and
NULL marker), what PostgreSQL cannot store (NUL, lone surrogates), and other scripts."""
TABLES = ("sessions", "nodes", "node_blocks", "records", "node_usage")


def turn_of(text: str) -> dict[str, Any]:
    """A turn with `text` in every column a block fills: text, tool name, call id, input, output."""
    return {
        "role": "assistant",
        "blocks": [
            {"kind": "text", "text": text},
            {"kind": "tool_call", "id": text, "name": text, "input": {text: [text]}},
            {"kind": "tool_result", "callId": text, "output": text, "isError": True},
        ],
    }


def write_file(path: Path, texts: list[str], note: str) -> list[str]:
    """A legacy file of one turn per text (a chain, all made at CREATED_AT), with a line of an
    unknown type (kept verbatim) holding `note` after the first; the node ids in order."""
    parent: str | None = None
    ids = []
    with path.open("w", encoding="utf-8", newline="") as out:
        for number, text in enumerate(texts):
            turn_json = jsjson.dumps(turn_of(text))
            node_id = hash_node_text(parent, turn_json.encode(), CREATED_AT)
            out.write(node_line(node_id, parent, turn_json, CREATED_AT) + head_line(node_id))
            if number == 0:
                out.write('{"type":"note",\t"text":' + jsjson.dumps(note) + "}  \n")
            ids.append(node_id)
            parent = node_id
    return ids


def rows(url: str, query: str, **params: Any) -> list[tuple[Any, ...]]:
    engine = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(sqlalchemy.text(query), params)]
    finally:
        engine.dispose()


def stored(url: str, session_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """A session's nodes and blocks as the database holds them, every column but the keys and
    the session's id (PostgreSQL's search vectors as their text)."""
    vectors = ", search_vector::text, search_chars_vector::text" if "postgres" in url else ""
    query = f"SELECT n.*{vectors} FROM nodes n WHERE session_id = :s ORDER BY pk"
    nodes = [row[2:] for row in rows(url, query, s=session_id)]  # no pk, no session_id
    blocks = "SELECT * FROM node_blocks WHERE session_id = :s ORDER BY node_id, position"
    return {"nodes": nodes, "blocks": [row[1:] for row in rows(url, blocks, s=session_id)]}


@pytest.fixture
def opened(open_store: Callable[..., SessionStore]) -> SessionStore:
    return open_store()


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(hard_texts, min_size=1, max_size=4), note=hard_texts)
def test_an_import_keeps_every_character_and_stores_the_rows_an_append_does(
    opened: SessionStore, database_url: str, tmp_path: Path, texts: list[str], note: str
) -> None:
    store = opened
    imported, appended = f"i{uuid.uuid4().hex}", f"a{uuid.uuid4().hex}"
    source = tmp_path / f"{imported}.jsonl"
    ids = write_file(source, texts, note.replace("\x00", "").encode("utf-8", "replace").decode())
    store.import_jsonl(source)
    target = tmp_path / "export.jsonl"
    store.export_jsonl(imported, target)
    assert target.read_bytes() == source.read_bytes()
    order = "SELECT id FROM nodes WHERE session_id = :s ORDER BY pk"
    assert [row[0] for row in rows(database_url, order, s=imported)] == ids  # stored in order
    store.append_many(appended, [turn_of(text) for text in texts], created_at=CREATED_AT)
    assert stored(database_url, imported) == stored(database_url, appended)


def refusing_in(database_url: str, table: str, column: str) -> str:
    """The database at `database_url`, made to refuse, as it stores it, a row of `table` whose
    `column` says `refuse-me`."""
    engine = sqlalchemy.create_engine(
        database_url.replace("postgresql://", "postgresql+psycopg://")
    )
    if engine.dialect.name == "sqlite":
        statements = [
            f"CREATE TRIGGER refuse BEFORE INSERT ON {table} "
            f"WHEN NEW.{column} LIKE '%refuse-me%' "
            "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
        ]
    else:
        statements = [
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF NEW.{column} LIKE '%refuse-me%' THEN RAISE EXCEPTION 'refused by the test'; "
            "END IF; RETURN NEW; END $$",
            f"CREATE TRIGGER refuse BEFORE INSERT ON {table} FOR EACH ROW "
            "EXECUTE FUNCTION refuse()",
        ]
    SessionStore(database_url).close()  # the schema first
    with engine.begin() as connection:
        for statement in statements:
            connection.execute(sqlalchemy.text(statement))
    engine.dispose()
    return database_url


@pytest.fixture
def refusing(database_url: str) -> str:
    """A database that refuses, as it stores it, a log record whose text says `refuse-me`."""
    return refusing_in(database_url, "records", "raw")


@pytest.fixture
def refusing_turns(database_url: str) -> str:
    """A database that refuses, as it stores it, a turn that says `refuse-me` (on PostgreSQL,
    as a batch's staged nodes are moved: `copying`)."""
    return refusing_in(database_url, "nodes", "turn_json")


def contents(url: str) -> dict[str, list[tuple[Any, ...]]]:
    return {table: sorted(rows(url, f"SELECT * FROM {table}"), key=repr) for table in TABLES}


def started(store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SessionStore:
    """`store` with a session "s" of two turns, importing in batches of 50 records (many batches
    before a refusal)."""
    monkeypatch.setattr(import_batch, "BATCH_ROWS", 50)
    earlier = tmp_path / "earlier.jsonl"
    write_file(earlier, ["one", "two"], "kept")
    store.import_jsonl(earlier, session_id="s")
    return store


def assert_refused(store: SessionStore, source: Path) -> None:
    """Importing `source` is refused by the test's trigger, into "s" and into a new session."""
    with pytest.raises(DatabaseError, match="refused by the test"):
        store.import_jsonl(source, session_id="s")  # adds to "s": one transaction
    with pytest.raises(DatabaseError, match="refused by the test"):
        store.import_jsonl(source, session_id="new")


def test_a_refusal_in_the_middle_of_a_bulk_write_leaves_the_database_as_it_was(
    open_store: Callable[..., SessionStore],
    refusing: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = started(open_store(), tmp_path, monkeypatch)
    store.append("other", {"role": "user", "blocks": [{"kind": "text", "text": "hi"}]})
    before = contents(refusing)
    source = tmp_path / "big.jsonl"
    write_file(source, ["one", "two", *(f"turn {n}" for n in range(400))], "kept")
    lines = source.read_bytes().split(b"\n")
    lines.insert(len(lines) * 3 // 4, b'{"type":"note","text":"refuse-me"}')
    source.write_bytes(b"\n".join(lines))
    assert_refused(store, source)
    assert contents(refusing) == before


def test_a_turn_refused_as_its_batch_is_moved_leaves_the_database_as_it_was(
    open_store: Callable[..., SessionStore],
    refusing_turns: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = started(open_store(), tmp_path, monkeypatch)
    before = contents(refusing_turns)
    texts = ["one", "two", *(f"turn {n}" for n in range(400))]
    source = tmp_path / "big.jsonl"
    write_file(source, [*texts[:300], "refuse-me", *texts[300:]], "kept")
    assert_refused(store, source)
    assert contents(refusing_turns) == before
    accepted = tmp_path / "accepted.jsonl"
    ids = write_file(accepted, texts, "kept")  # the connections are usable: it goes in
    store.import_jsonl(accepted, session_id="new")
    assert store.load_session("new").size == len(ids)
    store.export_jsonl("new", tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_bytes() == accepted.read_bytes()
