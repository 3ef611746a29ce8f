"""Alembic revisions: they match the models, keep data, run from every entry point, and ship."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import pty
import sqlite3
import subprocess
import sys
import zipfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import SearchHit, SessionGraph, jsjson
from memstore.errors import MigrationError
from memstore.store import SessionStore, create_store_engine
from memstore.store.migrate import (
    alembic_config,
    head_revision,
    include_name,
    include_object_on,
    migrations_dir,
)
from memstore.store.revision_scripts import revision_module
from memstore.store.rows import block_rows, derived_text, search_text
from memstore.store.tables import metadata

from .conftest import LEGACY
from .strategies import wire_turns
from .test_jsonl import export
from .test_query import check_fts

pytestmark = pytest.mark.slow  # alembic upgrades and downgrades, processes and a wheel

ROOT = Path(__file__).resolve().parent.parent


def table_names(url: str) -> set[str]:
    engine = create_store_engine(url)
    try:
        return set(sqlalchemy.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_the_models_and_the_migrations_agree(database_url: str) -> None:
    store = SessionStore(database_url)
    try:
        with store.engine.connect() as connection:
            options = {
                "compare_type": True,
                "include_name": include_name,
                "include_object": include_object_on(connection.dialect.name),
            }
            context = MigrationContext.configure(connection, opts=options)
            assert compare_metadata(context, metadata) == []
    finally:
        store.close()


def test_the_models_and_the_migrations_agree_on_sqlite_partial_indexes(sqlite_url: str) -> None:
    """Alembic's comparison leaves out an index's WHERE: each partial index SQLite's migrated
    schema holds is the model's, predicate and all (and no other index is partial)."""
    SessionStore(sqlite_url).close()
    stored = "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql LIKE '% WHERE %'"
    migrated = {name: str(sql).split(" WHERE ", 1)[1] for name, sql in _rows(sqlite_url, stored)}
    modelled = {
        index.name: str(index.dialect_options["sqlite"]["where"])
        for table in metadata.tables.values()
        for index in table.indexes
        if index.dialect_options["sqlite"]["where"] is not None
    }
    assert migrated == modelled


def test_upgrade_and_downgrade_base_round_trip(database_url: str) -> None:
    store = SessionStore(database_url, auto_migrate=False)
    try:
        assert store.schema_revision() is None
        store.upgrade_schema()
        assert store.schema_revision() == head_revision()
        assert {"sessions", "nodes", "records", "session_tags"} <= table_names(database_url)
        store.downgrade_schema("base")
        assert store.schema_revision() is None
        assert table_names(database_url) == set()  # the version table goes too
    finally:
        store.close()


def test_every_upgrade_step_keeps_existing_rows(database_url: str) -> None:
    revisions = list(reversed(list(ScriptDirectory.from_config(alembic_config()).walk_revisions())))
    store = SessionStore(database_url, auto_migrate=False)
    try:
        store.upgrade_schema(revisions[0].revision)
        with store.engine.begin() as connection:
            connection.execute(
                sqlalchemy.text(
                    "INSERT INTO sessions (id, head, created_at, updated_at) "
                    "VALUES ('kept', NULL, 1, 2)"
                )
            )
        for revision in revisions[1:]:
            store.upgrade_schema(revision.revision)
        assert store.schema_revision() == head_revision()
        assert store.list_sessions() == ["kept"]
    finally:
        store.close()


def _turn_json(word: str) -> str:
    """The JSON text of a user turn saying `word` (whose search text is `word`)."""
    return json.dumps({"role": "user", "blocks": [{"kind": "text", "text": word}]})


def _insert_by_hand(url: str, node_id: str, word: str) -> None:
    """A node (in session 'kept') inserted with SQL alone, as memstore 0003 did: the insert
    trigger of that schema indexed its text."""
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.execute(
            "INSERT OR IGNORE INTO sessions (id, created_at, updated_at) VALUES ('kept', 1, 1)"
        )
        connection.execute(
            "INSERT INTO nodes (session_id, id, role, created_at, turn_json, search_text) "
            "VALUES ('kept', ?, 'user', 1, ?, ?)",
            (node_id, _turn_json(word), word),
        )
    connection.close()


def _fts_matches(url: str, word: str) -> list[str]:
    """The ids of the nodes SQLite's full-text index finds `word` in."""
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        query = "SELECT n.id FROM nodes_fts JOIN nodes AS n ON n.pk = nodes_fts.rowid "
        found = connection.execute(query + "WHERE nodes_fts MATCH ?", (word,)).fetchall()
    connection.close()
    return [node_id for (node_id,) in found]


def test_0004_moves_search_indexing_from_the_trigger_to_the_store(sqlite_url: str) -> None:
    store = SessionStore(sqlite_url, auto_migrate=False)
    try:
        store.upgrade_schema("0003")
        _insert_by_hand(sqlite_url, "old", "indexedbytrigger")
        store.upgrade_schema("0004")
        assert _fts_matches(sqlite_url, "indexedbytrigger") == ["old"]  # (the store reads 0018)
        store.upgrade_schema()  # the store writes the newest schema's rows
        store.append_node("new", SessionGraph("new").append({"role": "user", "blocks": [
            {"kind": "text", "text": "indexedbystore"},
        ]}))  # fmt: skip
        check_fts(sqlite_url)  # each node indexed exactly once
        assert [hit.node_id for hit in store.search("indexedbytrigger")] == ["old"]
        assert len(store.search("indexedbystore")) == 1
        store.downgrade_schema("0003")
        _insert_by_hand(sqlite_url, "older", "indexedbytriggeragain")
        check_fts(sqlite_url)
    finally:
        store.close()


def _open_store(url: str) -> None:
    SessionStore(url).close()


def test_many_processes_opening_a_fresh_database_migrate_once(database_url: str) -> None:
    context = multiprocessing.get_context("spawn")
    with context.Pool(6) as pool:
        pool.map(_open_store, [database_url] * 6)
    store = SessionStore(database_url, auto_migrate=False)
    try:
        assert store.schema_revision() == head_revision()
    finally:
        store.close()


def run(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        args,
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_the_alembic_command_line_upgrades_and_downgrades(sqlite_url: str) -> None:
    alembic = str(Path(sys.executable).parent / "alembic")
    run(alembic, "-x", f"url={sqlite_url}", "upgrade", "head")
    assert "nodes" in table_names(sqlite_url)
    assert head_revision() in run(alembic, "-x", f"url={sqlite_url}", "current")
    run(alembic, "downgrade", "base", env={"MEMSTORE_DB": sqlite_url})
    assert "nodes" not in table_names(sqlite_url)


def test_the_memstore_db_commands(database_url: str) -> None:
    memstore = [sys.executable, "-m", "memstore.cli", "--db", database_url]
    if database_url.startswith("postgresql"):  # a SQLite file is not there yet: nothing to show
        current = subprocess.run([*memstore, "db", "current"], capture_output=True, text=True)
        assert current.returncode == 1  # not up to date
        assert "revision none (no memstore tables): create them with" in current.stdout
    assert head_revision() in run(*memstore, "db", "upgrade")
    assert "up to date" in run(*memstore, "db", "current")
    assert "base" in run(*memstore, "db", "downgrade", "base", "--yes")
    assert "nodes" not in table_names(database_url)


def memstore_cli(
    url: str, *args: str, stdin: int | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    """`memstore --db URL ARGS...` in a fresh process, its input not a terminal by default."""
    command = [sys.executable, "-m", "memstore.cli", "--db", url, *args]
    return subprocess.run(command, stdin=stdin, capture_output=True, text=True, check=False)


def test_downgrade_base_asks_first_and_refuses_when_nobody_can_answer(sqlite_url: str) -> None:
    with SessionStore(sqlite_url) as store:
        store.import_jsonl(LEGACY / "branching.jsonl")
    refused = memstore_cli(sqlite_url, "db", "downgrade", "base")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1
    assert "1 session(s)" in refused.stderr
    assert "--yes" in refused.stderr
    assert "nodes" in table_names(sqlite_url)
    for answer, dropped in ((b"n\n", False), (b"y\n", True)):
        assert _answer_on_a_terminal(sqlite_url, answer) == (1 if not dropped else 0)
        assert ("nodes" not in table_names(sqlite_url)) is dropped


def _answer_on_a_terminal(url: str, answer: bytes) -> int:
    """Run `db downgrade base` with a pseudo-terminal as its input, type `answer`, and return
    the exit status."""
    leader, follower = pty.openpty()
    try:
        command = [sys.executable, "-m", "memstore.cli", "--db", url, "db", "downgrade", "base"]
        process = subprocess.Popen(
            command, stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        os.write(leader, answer)
        process.communicate(timeout=60)
        return process.returncode
    finally:
        os.close(leader)
        os.close(follower)


def test_an_unknown_revision_is_one_line_naming_the_revisions(sqlite_url: str) -> None:
    SessionStore(sqlite_url).close()
    for revision in ("9999", "-99"):
        done = memstore_cli(sqlite_url, "db", "downgrade", revision, "--yes")
        assert done.returncode == 1
        assert done.stderr.count("\n") == 1, done.stderr
        assert repr(revision) in done.stderr
        assert head_revision() in done.stderr
    with SessionStore(sqlite_url, auto_migrate=False) as store:
        assert store.schema_revision() == head_revision()
        with pytest.raises(MigrationError, match="9999"):
            store.upgrade_schema("9999")


def test_a_long_chain_survives_downgrades_and_upgrades(database_url: str, tmp_path: Path) -> None:
    """Rebuilding `nodes` (SQLite batch migrations) with 3,000 turns chained parent to child
    must not cascade through the chain: down to the first revision and back keeps every byte."""
    source = LEGACY / "large-session.jsonl"
    with SessionStore(database_url) as store:
        store.import_jsonl(source)
        for revision in ("0001", "head"):
            (store.downgrade_schema if revision == "0001" else store.upgrade_schema)(revision)
        store.export_jsonl("large-session", tmp_path / "out.jsonl")
        store.downgrade_schema("base")
        assert store.schema_revision() is None
    assert (tmp_path / "out.jsonl").read_bytes() == source.read_bytes()


def test_the_wheel_ships_the_migrations_and_they_work_when_installed(tmp_path: Path) -> None:
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(tmp_path / "dist"),
        str(ROOT),
    )
    (wheel,) = (tmp_path / "dist").glob("memstore_sql-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "memstore/_migrations/env.py" in names
    assert any(n.startswith("memstore/_migrations/versions/0001") for n in names)
    target = tmp_path / "site"
    run(
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "-q",
        "--target",
        str(target),
        str(wheel),
    )
    script = (
        "import memstore, sys; from memstore.store.migrate import migrations_dir; "
        "assert 'site' in memstore.__file__, memstore.__file__; "
        "s = memstore.SessionStore('sqlite:///x.db'); print(migrations_dir(), s.list_sessions())"
    )
    output = run(sys.executable, "-c", script, cwd=tmp_path, env={"PYTHONPATH": str(target)})
    assert "_migrations" in output


def test_migrations_are_found_in_a_checkout() -> None:
    assert migrations_dir() == ROOT / "migrations"


@pytest.mark.parametrize("command", [["db", "current"], ["demo"]])
def test_a_bad_database_url_is_one_clear_line(command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memstore.cli", "--db", "mysql://x/y", *command],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: unsupported database 'mysql' in 'mysql://x/y': memstore supports sqlite:/// "
        "and postgresql:// URLs"
    ]


VIEW_QUERIES = (
    "SELECT * FROM blocks ORDER BY session_id, node_id, position",
    "SELECT * FROM turns ORDER BY seq",
    "SELECT * FROM tool_calls ORDER BY session_id, call_node_id, call_id, result_node_id",
)


def _sqlite_rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.text_factory = derived_text
        rows = connection.execute(sql).fetchall()
    connection.close()
    return rows


def test_0016_stores_a_turn_once_and_keeps_every_view_row(sqlite_url: str) -> None:
    store = SessionStore(sqlite_url)
    try:
        store.import_jsonl(LEGACY)
        views = [_sqlite_rows(sqlite_url, sql) for sql in VIEW_QUERIES]
        hits = [store.search(word) for word in ("crash", "run_tests", "null")]
        store.downgrade_schema("0013")  # the copies come back, derived in Python
        copies = _sqlite_rows(
            sqlite_url,
            "SELECT n.session_id, n.id, n.turn_json, n.search_text FROM nodes AS n ORDER BY n.pk",
        )
        blocks = _sqlite_rows(
            sqlite_url,
            "SELECT session_id, node_id, position, text, input_json, output_json "
            "FROM node_blocks ORDER BY session_id, node_id, position",
        )
        expected = sorted(
            (row["session_id"], row["node_id"], row["position"], row["text"], row["input_json"],
             row["output_json"])
            for session_id, node_id, turn_json, _ in copies
            for row in block_rows(str(session_id), str(node_id), json.loads(str(turn_json)))
        )  # fmt: skip
        assert blocks == expected
        assert [text for *_, text in copies] == [
            search_text(json.loads(str(turn_json))) for _, _, turn_json, _ in copies
        ]
        # the head's views give each row's tenant first (migration 0030), the default one here
        assert {row[0] for row in views[0]} == {""}
        assert _sqlite_rows(sqlite_url, VIEW_QUERIES[0]) == [row[1:] for row in views[0]]
        check_fts(sqlite_url)
        store.upgrade_schema()  # and go again
        assert [_sqlite_rows(sqlite_url, sql) for sql in VIEW_QUERIES] == views
        assert [store.search(word) for word in ("crash", "run_tests", "null")] == hits
        check_fts(sqlite_url)
        derived = _sqlite_rows(sqlite_url, "SELECT search_text FROM node_search ORDER BY pk")
        assert [text for (text,) in derived] == [text for *_, text in copies]
        columns = {row[1] for row in _sqlite_rows(sqlite_url, "PRAGMA table_info(node_blocks)")}
        assert not columns & {"text", "input_json", "output_json"}
        assert store.delete_session("branching")
        check_fts(sqlite_url)  # the delete trigger removed exactly what was indexed
        assert "branching" not in {hit.session_id for hit in store.search("crash", limit=1000)}
    finally:
        store.close()


def test_0016_sql_derives_what_the_store_indexed_for_any_turn(sqlite_url: str) -> None:
    """The store indexes the search text it computes; the view, the snippets and the delete
    trigger derive it in SQL: for any valid turn they must agree, or FTS5's index would break."""
    store = SessionStore(sqlite_url)
    path = sqlite_url.removeprefix("sqlite:///")
    session = itertools.count()

    @settings(max_examples=150, deadline=None)
    @given(st.lists(wire_turns, min_size=1, max_size=3))
    def check(turns: list[dict[str, object]]) -> None:
        session_id = f"s{next(session)}"
        graph = SessionGraph(session_id)
        for turn in turns:
            store.append_node(session_id, graph.append(turn))
        with sqlite3.connect(path) as connection:
            connection.text_factory = derived_text
            rows = connection.execute(
                "SELECT n.id, n.turn_json, s.search_text FROM nodes AS n "
                "JOIN node_search AS s ON s.pk = n.pk WHERE n.session_id = ?",
                (session_id,),
            ).fetchall()
            for node_id, turn_json, derived in rows:
                assert derived == search_text(jsjson.loads(turn_json))
                expected = [
                    (b["position"], b["kind"], b["text"], b["input_json"], b["output_json"])
                    for b in block_rows(session_id, node_id, jsjson.loads(turn_json))
                ]
                blocks = connection.execute(
                    "SELECT position, kind, text, input_json, output_json FROM blocks "
                    "WHERE session_id = ? AND node_id = ? ORDER BY position",
                    (session_id, node_id),
                ).fetchall()
                assert blocks == expected
        connection.close()
        assert store.delete_session(session_id)
        check_fts(sqlite_url)

    try:
        check()
        assert next(session) > 50  # the examples ran
    finally:
        store.close()


FILTERED_VIEWS = ("blocks", "turns", "tool_calls", "session_stats", "session_sources")


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    engine = create_store_engine(url)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(sqlalchemy.text(sql))]
    finally:
        engine.dispose()


def _write(url: str, sql: str) -> None:
    engine = create_store_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sqlalchemy.text(sql))
    finally:
        engine.dispose()


def _view_definitions(url: str) -> list[tuple[object, ...]]:
    if url.startswith("sqlite"):
        return _rows(url, "SELECT name, sql FROM sqlite_master WHERE type = 'view' ORDER BY name")
    query = "SELECT viewname, definition FROM pg_views WHERE schemaname = current_schema()"
    return sorted(_rows(url, query))


def test_0018_views_leave_out_sessions_being_imported_and_the_downgrade_restores_them(
    database_url: str,
) -> None:
    store = SessionStore(database_url, auto_migrate=False)
    try:
        store.upgrade_schema("0017")
        before = _view_definitions(database_url)
        store.upgrade_schema()  # the store writes the newest schema's rows
        store.import_jsonl(LEGACY / "tool-calls.jsonl")
        store.import_jsonl(LEGACY / "branching.jsonl")
        store.downgrade_schema("0018")
        count = "SELECT count(*) FROM {} WHERE session_id = 'tool-calls'"
        shown = {view: _rows(database_url, count.format(view)) for view in FILTERED_VIEWS}
        assert all(rows != [(0,)] for rows in shown.values())
        _write(database_url, "UPDATE sessions SET importing = 'x' WHERE id = 'tool-calls'")
        for view in FILTERED_VIEWS:
            assert _rows(database_url, count.format(view)) == [(0,)]
            assert _rows(database_url, count.format(f"{view}_all")) == shown[view]
        branching = "SELECT count(*) FROM turns WHERE session_id = 'branching'"
        assert _rows(database_url, branching) != [(0,)]
        _write(database_url, "UPDATE sessions SET importing = NULL WHERE id = 'tool-calls'")
        store.downgrade_schema("0017")
        assert _view_definitions(database_url) == before
        assert {view: _rows(database_url, count.format(view)) for view in FILTERED_VIEWS} == shown
        columns = sqlalchemy.inspect(store.engine).get_columns("sessions")
        assert "importing" not in {column["name"] for column in columns}
        store.upgrade_schema()
    finally:
        store.close()


INDEXES_0027 = {
    "records": ("ix_records_session_id_node_id", ["session_id", "node_id"]),
    "node_keys": ("ix_node_keys_session_id_node_id", ["session_id", "node_id"]),
    "node_usage": ("ix_node_usage_node_id_session_id", ["node_id", "session_id"]),
}


def _indexes(url: str, table: str) -> dict[str, list[str]]:
    engine = create_store_engine(url)
    try:
        found = sqlalchemy.inspect(engine).get_indexes(table)
        return {
            str(index["name"]): [str(name) for name in index["column_names"]] for index in found
        }
    finally:
        engine.dispose()


def test_0027_indexes_the_columns_deletes_and_usage_totals_look_up_and_keeps_rows(
    database_url: str,
) -> None:
    store = SessionStore(database_url, auto_migrate=False)
    try:
        store.upgrade_schema("0027")
        for table, (name, columns) in INDEXES_0027.items():
            assert _indexes(database_url, table)[name] == columns
        store.upgrade_schema()  # the same indexes, the tenant first (migration 0030)
        for table, (name, columns) in INDEXES_0027.items():
            keyed = name.replace(f"ix_{table}_", f"ix_{table}_tenant_")
            assert _indexes(database_url, table)[keyed] == ["tenant", *columns]
        user = {"role": "user", "blocks": [{"kind": "text", "text": "q"}]}
        store.append_keyed("s", [user], ["k1"], usage={"inputTokens": 3, "model": "m"})
        store.fork_session("s", None, "t")
        counts = "SELECT (SELECT count(*) FROM records{}), (SELECT count(*) FROM node_keys{}),"
        counts += " (SELECT count(*) FROM node_usage{})"
        of_t = counts.format(*[" WHERE session_id = 't'"] * 3)
        counts = counts.format("", "", "")
        before = _rows(database_url, counts)
        assert all(before[0])
        assert _rows(database_url, of_t)[0][1:] == (1, 1)
        store.downgrade_schema("0026")
        for table, (name, _) in INDEXES_0027.items():
            assert name not in _indexes(database_url, table)
        assert _rows(database_url, counts) == before
        store.upgrade_schema()
        assert [(row.key, row.nodes) for row in store.usage_stats("model")] == [("m", 1)]
        assert store.delete_session("s")
        assert _rows(database_url, counts) == _rows(database_url, of_t)
    finally:
        store.close()


TENANT_TABLES_0028 = list(revision_module("0028").TABLES)  # the tables 0028 knew


def test_0028_puts_every_row_on_the_default_tenant_and_refuses_to_drop_another_tenant(
    database_url: str,
) -> None:
    store = SessionStore(database_url)
    try:
        user = {"role": "user", "blocks": [{"kind": "text", "text": "q"}]}
        store.append_keyed("s", [user], ["k1"], usage={"inputTokens": 3, "model": "m"})
        store.update_session("s", tags=["t"])
        store.set_expiry_default(timedelta(minutes=1))
        store.append("gone", user)
        store.erase(reason="test", session_id="gone", dry_run=False)
        counts = " UNION ALL ".join(f"SELECT count(*) FROM {t}" for t in TENANT_TABLES_0028)
        before = _rows(database_url, counts)
        of_default = counts
        for table in TENANT_TABLES_0028:
            of_default = of_default.replace(f"FROM {table}", f"FROM {table} WHERE tenant = ''")
        assert _rows(database_url, of_default) == before
        store.downgrade_schema("0027")
        assert _rows(database_url, counts) == before
        store.upgrade_schema("0028")
        assert _rows(database_url, of_default) == before
        _write(database_url, "UPDATE session_tags SET tenant = 'acme'")
        with pytest.raises(MigrationError, match=r"session_tags holds rows of tenant 'acme'"):
            store.downgrade_schema("0027")
        assert store.schema_revision() == "0028"
        _write(database_url, "UPDATE session_tags SET tenant = ''")
        store.downgrade_schema("0027")
        store.upgrade_schema()
        assert _rows(database_url, of_default) == before
        assert [(row.key, row.nodes) for row in store.usage_stats("model")] == [("m", 1)]
    finally:
        store.close()


FULL_TEXT_INDEXES = ("ix_nodes_search", "ix_nodes_search_chars")


def _index_options(url: str) -> dict[str, object]:
    """The storage options of PostgreSQL's full-text indexes, by index."""
    names = ", ".join(f"'{name}'" for name in FULL_TEXT_INDEXES)
    sql = (
        "SELECT relname, reloptions FROM pg_class WHERE relname IN "
        f"({names}) AND relnamespace = current_schema()::regnamespace"
    )
    return dict(_rows(url, sql))  # type: ignore[arg-type]


QUOKKAS = "SELECT count(*) FROM nodes WHERE search_vector @@ to_tsquery('simple', 'quokka')"
QUOKKA = """INSERT INTO nodes (session_id, id, role, created_at, turn_json, search_text,
search_chars, search_vector, search_chars_vector)
VALUES ('s', '{id}', 'user', 1, '{{"role":"user","blocks":[{{"kind":"text","text":"{text}"}}]}}',
'{text}', '東 京', to_tsvector('simple', '{text}'), to_tsvector('simple', '東 京'))"""


def test_0029_full_text_indexes_take_words_without_pending_lists(postgres_url: str) -> None:
    store = SessionStore(postgres_url, auto_migrate=False)
    try:
        store.upgrade_schema("0028")
        _write(postgres_url, "INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', 1, 1)")
        _write(postgres_url, QUOKKA.format(id="n1", text="a quokka 東京"))
        assert _index_options(postgres_url) == dict.fromkeys(FULL_TEXT_INDEXES)
        store.upgrade_schema("0029")
        off = {index: ["fastupdate=off"] for index in FULL_TEXT_INDEXES}
        assert _index_options(postgres_url) == off
        _write(postgres_url, QUOKKA.format(id="n2", text="quokka 東京 too"))  # (0029's columns)
        assert _rows(postgres_url, QUOKKAS) == [(2,)]
        store.downgrade_schema("0028")
        assert _index_options(postgres_url) == dict.fromkeys(FULL_TEXT_INDEXES)
        assert _rows(postgres_url, QUOKKAS) == [(2,)]
        store.upgrade_schema()
        assert _index_options(postgres_url) == off
        assert len(store.search("quokka")) == len(store.search("東京")) == 2
    finally:
        store.close()


SEARCH_TEXTS = "SELECT n.pk, n.turn_json, s.search_text FROM nodes n JOIN node_search s USING (pk)"
ODD_TURNS: list[dict[str, Any]] = [
    {"role": "user", "blocks": [{"kind": "text", "text": "nul\x00 lone\ud800 back\\u0000slash"}]},
    {
        "role": "assistant",
        "blocks": [
            {"kind": "thinking", "text": "weigh quokka"},
            {
                "kind": "tool_call",
                "id": "c1",
                "name": "grep\x00",
                "input": {"q": "\x00\\u0000\ud83d", "n": [1, 2.5, 1e21, None]},
            },
            {"kind": "image", "mediaType": "image/png", "dataBase64": "AAAA"},
        ],
    },
    {"role": "user", "blocks": [{"kind": "tool_result", "callId": "c1", "output": None}]},
    {"role": "user", "blocks": [{"kind": "tool_result", "callId": "c1"}]},
    {"role": "user", "blocks": [{"kind": "text", "text": "x" * 260_000 + " quokka beyond"}]},
]
QUERIES = ("crash", "run_tests", "null", "quokka", "beyond", "grep", "東京")
NODE_COLUMNS = (
    "SELECT column_name FROM information_schema.columns "
    "WHERE table_name = 'nodes' AND table_schema = current_schema()"
)


NODE_SEARCH_OPTIONS = "SELECT reloptions FROM pg_class WHERE oid = to_regclass('node_search')"


def _searches(store: SessionStore) -> dict[str, list[SearchHit]]:
    return {query: list(store.search(query)) for query in QUERIES}


def test_0036_postgresql_derives_the_search_text_and_keeps_rows_searches_and_exports(
    postgres_url: str, tmp_path: Path
) -> None:
    """The column goes; `node_search`, the snippets and the search of turns longer than the
    vectors hold derive the text the column held; the downgrade fills it again, every tenant's."""
    store = SessionStore(postgres_url)
    acme = SessionStore(postgres_url, tenant="acme")
    try:
        store.import_jsonl(LEGACY)
        store.append_many("odd", ODD_TURNS)
        acme.append("a", {"role": "user", "blocks": [{"kind": "text", "text": "acme's quokka"}]})
        searches, acme_hits = _searches(store), acme.search("quokka")
        assert [hit.session_id for hit in searches["beyond"]] == ["odd"]  # past the vectors
        assert [hit.session_id for hit in acme_hits] == ["a"]
        derived = _rows(postgres_url, SEARCH_TEXTS + " ORDER BY pk")
        assert [text for _, turn_json, text in derived] == [
            search_text(jsjson.loads(str(turn_json))) for _, turn_json, _ in derived
        ]
        exported = export(store, "odd", tmp_path / "before.jsonl")
        store.downgrade_schema("0035")  # the column filled again, in SQL
        stored = _rows(postgres_url, "SELECT pk, turn_json, search_text FROM nodes ORDER BY pk")
        assert _rows(postgres_url, NODE_SEARCH_OPTIONS) == [(["security_invoker=true"],)]
        assert stored == derived  # (the store's search is 0036's function)
        store.upgrade_schema()
        assert ("search_text",) not in _rows(postgres_url, NODE_COLUMNS)
        assert _rows(postgres_url, NODE_SEARCH_OPTIONS) == [(["security_invoker=true"],)]
        assert _rows(postgres_url, SEARCH_TEXTS + " ORDER BY pk") == derived
        assert _searches(store) == searches
        assert acme.search("quokka") == acme_hits
        assert export(store, "odd", tmp_path / "after.jsonl") == exported
    finally:
        acme.close()
        store.close()


def _for_odd_and_generated_turns(
    postgres_url: str, check: Callable[[sqlalchemy.Connection, dict[str, Any]], None], most: int
) -> None:
    """Run `check` on each of ODD_TURNS and on `most` generated turns, in a migrated schema."""
    store = SessionStore(postgres_url)  # migrates the schema
    engine = create_store_engine(postgres_url)

    def run(turn: dict[str, Any]) -> None:
        with engine.connect() as connection:
            check(connection, turn)

    try:
        for turn in ODD_TURNS:
            run(turn)
        settings(max_examples=most, deadline=None)(given(wire_turns)(run))()
    finally:
        engine.dispose()
        store.close()


def test_0036_sql_derives_the_search_text_python_derives_for_any_turn(postgres_url: str) -> None:
    """`memstore_search_text` gives `rows.search_text` for any valid turn, as stored."""
    derive = sqlalchemy.text("SELECT memstore_search_text(:turn_json)")

    def check(connection: sqlalchemy.Connection, turn: dict[str, Any]) -> None:
        turn_json = jsjson.dumps(turn)
        derived = connection.execute(derive, {"turn_json": turn_json}).scalar_one()
        assert derived == search_text(jsjson.loads(turn_json))

    _for_odd_and_generated_turns(postgres_url, check, 300)


COPIES_0037 = ("text", "input_json", "output_json")
BLOCK_COPIES = (
    "SELECT session_id, node_id, position, text, input_json, output_json FROM node_blocks "
    "ORDER BY session_id, node_id, position"
)
VIEW_OPTIONS = (
    "SELECT relname, reloptions FROM pg_class WHERE relkind = 'v' "
    "AND relnamespace = current_schema()::regnamespace ORDER BY relname"
)


def test_0037_postgresql_derives_the_block_copies_and_keeps_every_view_row(
    postgres_url: str,
) -> None:
    """The copies go from `node_blocks`; the views derive what they held; the downgrade fills
    them again, every tenant's."""
    store = SessionStore(postgres_url)
    acme = SessionStore(postgres_url, tenant="acme")
    try:
        store.import_jsonl(LEGACY)
        store.append_many("odd", ODD_TURNS)
        acme.append_many("a", ODD_TURNS[1:3])
        views = [_rows(postgres_url, sql) for sql in VIEW_QUERIES]
        options = _rows(postgres_url, VIEW_OPTIONS)
        nodes = _rows(postgres_url, "SELECT tenant, session_id, id, turn_json FROM nodes")
        expected = sorted(
            (str(session_id), row["node_id"], row["position"], row["text"], row["input_json"],
             row["output_json"])
            for _, session_id, node_id, turn_json in nodes
            for row in block_rows(str(session_id), str(node_id), jsjson.loads(str(turn_json)))
        )  # fmt: skip
        blocks = _rows(postgres_url, "SELECT * FROM blocks_all")
        assert sorted((b[1], b[2], b[3], b[5], b[9], b[10]) for b in blocks) == expected
        store.downgrade_schema("0036")  # the copies filled again, in SQL
        assert sorted(_rows(postgres_url, BLOCK_COPIES)) == expected
        assert [_rows(postgres_url, sql) for sql in VIEW_QUERIES] == views
        assert _rows(postgres_url, VIEW_OPTIONS) == options
        store.upgrade_schema()
        columns = (
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = 'node_blocks' AND table_schema = current_schema()"
        )
        assert not {name for (name,) in _rows(postgres_url, columns)} & set(COPIES_0037)
        assert [_rows(postgres_url, sql) for sql in VIEW_QUERIES] == views
        assert _rows(postgres_url, VIEW_OPTIONS) == options
    finally:
        acme.close()
        store.close()


def test_0037_sql_derives_the_block_columns_python_derives_for_any_turn(
    postgres_url: str,
) -> None:
    """`memstore_block_text`, `memstore_block_json` and `memstore_turn_text` give the columns
    `rows.block_rows` makes and the text of its text blocks, for any valid turn as stored."""
    derive = sqlalchemy.text(
        "SELECT CASE WHEN :kind IN ('text', 'thinking') THEN memstore_block_text(:turn, :at) END, "
        "CASE WHEN :kind = 'tool_call' THEN memstore_block_json(:turn, :at, 'input') END, "
        "CASE WHEN :kind = 'tool_result' THEN memstore_block_json(:turn, :at, 'output') END"
    )
    turn_text = sqlalchemy.text("SELECT memstore_turn_text(:turn)")

    def check(connection: sqlalchemy.Connection, turn: dict[str, Any]) -> None:
        turn_json = jsjson.dumps(turn)
        rows = block_rows("s", "n", jsjson.loads(turn_json))
        for row in rows:
            values = {"kind": row["kind"], "turn": turn_json, "at": row["position"]}
            derived = tuple(connection.execute(derive, values).one())
            assert derived == (row["text"], row["input_json"], row["output_json"])
        texts = [row["text"] for row in rows if row["kind"] == "text"]
        text = connection.execute(turn_text, {"turn": turn_json}).scalar_one()
        assert text == ("\n".join(texts) if texts else None)

    _for_odd_and_generated_turns(postgres_url, check, 200)


USAGE_ROWS = "SELECT session_id, node_id, day, model, input_tokens, cost_usd FROM usage ORDER BY 3"


def test_0035_keeps_pruned_usage_in_the_usage_view_and_the_downgrade_drops_only_that(
    database_url: str,
) -> None:
    """0035 adds `pruned_usage` (in the `usage` view, with `calls`) and `summary_subjects`;
    every row of the older tables stays both ways, and the view's rows of nodes too."""
    store = SessionStore(database_url, auto_migrate=False)
    try:
        store.upgrade_schema("0034")
        for statement in (
            "INSERT INTO sessions (id, head, created_at, updated_at) VALUES ('s', 'n1', 1, 1)",
            "INSERT INTO nodes (session_id, id, role, created_at, turn_json) "
            """VALUES ('s', 'n1', 'assistant', 86400000, '{"role":"assistant","blocks":[]}')""",
            "INSERT INTO node_usage (session_id, node_id, model, input_tokens, cost_usd) "
            "VALUES ('s', 'n1', 'm', 7, 0.5)",
        ):
            _write(database_url, statement)
        node_row = [("s", "n1", "1970-01-02", "m", 7, 0.5)]
        assert _rows(database_url, USAGE_ROWS) == node_row
        store.upgrade_schema("0035")
        assert _rows(database_url, USAGE_ROWS) == node_row
        _write(
            database_url,
            "INSERT INTO pruned_usage (session_id, day, model, counted, calls, input_tokens, "
            "cost_usd) VALUES ('s', '1970-01-01', 'm', 1, 3, 30, 1.5)",
        )
        _write(
            database_url,
            "INSERT INTO summary_subjects (session_id, node_id, subject_hash) "
            "VALUES ('s', 'n1', 'ab')",
        )
        pruned_row = ("s", None, "1970-01-01", "m", 30, 1.5)
        assert _rows(database_url, USAGE_ROWS) == [pruned_row, *node_row]
        assert _rows(database_url, "SELECT sum(calls) FROM usage") == [(4,)]
        store.downgrade_schema("0034")
        assert _rows(database_url, USAGE_ROWS) == node_row
        assert not {"pruned_usage", "summary_subjects"} & table_names(database_url)
        store.upgrade_schema()
        assert _rows(database_url, USAGE_ROWS) == node_row
        assert [(row.key, row.nodes, row.input_tokens) for row in store.usage_stats("day")] == [
            ("1970-01-02", 1, 7)
        ]
    finally:
        store.close()


CALL_ID_INDEX = "ix_node_blocks_tenant_session_id_call_id"
INDEX_SQL = "SELECT sql FROM sqlite_master WHERE name = '" + CALL_ID_INDEX + "'"
INDEX_ENTRIES = "SELECT count(*) FROM node_blocks INDEXED BY " + CALL_ID_INDEX
CALL_AND_RESULT = [
    {"role": "assistant", "blocks": [{"kind": "tool_call", "id": "c1", "name": "t", "input": {}}]},
    {"role": "user", "blocks": [{"kind": "tool_result", "callId": "c1", "output": "done"}]},
    {"role": "assistant", "blocks": [{"kind": "text", "text": "over"}]},
]


def test_0039_indexes_the_call_ids_of_the_blocks_that_have_one(sqlite_url: str) -> None:
    """SQLite's call-id index holds only blocks with a call id (a text turn writes nothing in
    it); the lookups by call id still read it; the downgrade makes it whole again."""
    store = SessionStore(sqlite_url, auto_migrate=False)
    try:
        store.upgrade_schema("0038")
        store.append_many("s", CALL_AND_RESULT[:2])
        store.upgrade_schema("0039")
        assert "WHERE call_id IS NOT NULL" in str(_rows(sqlite_url, INDEX_SQL)[0][0])
        store.append("s", CALL_AND_RESULT[2])
        assert _rows(sqlite_url, "SELECT count(*) FROM node_blocks") == [(3,)]
        assert _rows(sqlite_url, INDEX_ENTRIES + " WHERE call_id IS NOT NULL") == [(2,)]
        for query in (
            "SELECT call_id, result_node_id IS NOT NULL FROM tool_calls WHERE session_id = 's'",
            "SELECT call_id, kind FROM blocks WHERE tenant = '' AND session_id = 's' "
            "AND call_id = 'c1' ORDER BY kind",
        ):
            plan = " ".join(str(row[3]) for row in _rows(sqlite_url, "EXPLAIN QUERY PLAN " + query))
            assert CALL_ID_INDEX in plan
            assert _rows(sqlite_url, query)
        assert _rows(sqlite_url, "SELECT call_id FROM tool_calls") == [("c1",)]
        store.downgrade_schema("0038")
        assert "WHERE" not in str(_rows(sqlite_url, INDEX_SQL)[0][0])
        assert _rows(sqlite_url, INDEX_ENTRIES) == [(3,)]
        store.upgrade_schema()
        assert _rows(sqlite_url, INDEX_ENTRIES + " WHERE call_id IS NOT NULL") == [(2,)]
        assert _rows(sqlite_url, "SELECT call_id FROM tool_calls") == [("c1",)]
    finally:
        store.close()


KEYS_INDEX = "ix_node_keys_tenant_session_id_node_id"


def _keys_index_definition(url: str) -> str:
    if url.startswith("sqlite"):
        query = f"SELECT sql FROM sqlite_master WHERE name = '{KEYS_INDEX}'"
    else:
        query = (
            f"SELECT indexdef FROM pg_indexes WHERE indexname = '{KEYS_INDEX}'"
            " AND schemaname = current_schema()"
        )
    ((definition,),) = _rows(url, query)
    return str(definition)


def test_0040_makes_the_index_of_a_nodes_keys_partial_and_keeps_them(database_url: str) -> None:
    """`node_keys`' foreign key index holds the rows it held, `WHERE node_id IS NOT NULL` (so
    that a lookup by session and key reads the primary key); the downgrade makes it whole."""
    store = SessionStore(database_url, auto_migrate=False)
    try:
        store.upgrade_schema("0039")
        store.append_keyed("s", CALL_AND_RESULT[:2], ["k1", "k2"])
        assert "WHERE" not in _keys_index_definition(database_url)
        store.upgrade_schema("0040")
        assert "node_id IS NOT NULL" in _keys_index_definition(database_url)
        assert [
            node.turn for node in store.append_keyed("s", CALL_AND_RESULT, ["k1", "k2", "k3"])
        ] == [store.load_path("s")[-1]]
        store.delete_session("s")  # the cascade finds the node's keys through the index
        assert _rows(database_url, "SELECT count(*) FROM node_keys") == [(0,)]
        store.downgrade_schema("0039")
        assert "WHERE" not in _keys_index_definition(database_url)
    finally:
        store.close()
