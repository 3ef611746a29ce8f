"""`memstore sql` may describe the schema (issue 18 item 14): SQLite's schema PRAGMAs and
PostgreSQL's information_schema, while every other PRAGMA stays refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memstore.errors import QueryError
from memstore.store import SessionStore

NODE_COLUMNS = {"pk", "session_id", "id", "parent_id", "role", "created_at", "turn_json"}


def discovery(database_url: str) -> list[str]:
    """Queries that list the columns of `nodes` (the second column of each row is a name)."""
    if database_url.startswith("sqlite"):
        return [
            "PRAGMA table_info(nodes)",
            "PRAGMA main.table_xinfo('nodes')",
        ]
    return [
        "SELECT ordinal_position, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = 'nodes'",
        "SELECT attnum, attname FROM pg_attribute "
        "WHERE attrelid = 'nodes'::regclass AND attnum > 0 AND NOT attisdropped",
    ]


def test_the_schema_can_be_discovered_on_both_databases(
    store: SessionStore, database_url: str
) -> None:
    store.session("s").append({"role": "user", "blocks": []})  # the schema exists
    for sql in discovery(database_url):
        names = {row[1] for row in store.read_only_query(sql).rows}
        assert names >= NODE_COLUMNS, sql


def test_indexes_and_foreign_keys_can_be_listed_on_sqlite(sqlite_url: str) -> None:
    with SessionStore(sqlite_url) as store:
        indexes = store.read_only_query("PRAGMA index_list(nodes)").rows
        assert indexes
        (name, *_) = [row[1] for row in indexes]
        assert store.read_only_query(f"PRAGMA index_info('{name}')").rows
        assert store.read_only_query("PRAGMA foreign_key_list(nodes)").rows


@pytest.mark.parametrize(
    "sql",
    [
        "PRAGMA user_version = 5",
        "PRAGMA user_version",
        "PRAGMA journal_mode = DELETE",
        "PRAGMA writable_schema = ON",
        "PRAGMA foreign_keys = OFF",
        "PRAGMA integrity_check",
        "SELECT * FROM pragma_user_version",
    ],
)
def test_every_other_pragma_is_still_refused(sqlite_url: str, sql: str) -> None:
    with SessionStore(sqlite_url) as store, pytest.raises(QueryError, match="only reads"):
        store.read_only_query(sql)


def test_pragma_table_info_in_a_real_process(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    base = [sys.executable, "-m", "memstore.cli", "--db", db]
    assert (
        subprocess.run([*base, "db", "upgrade"], capture_output=True, check=False).returncode == 0
    )
    done = subprocess.run(
        [*base, "sql", "PRAGMA table_info(nodes)", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert {row["name"] for row in json.loads(done.stdout)} >= NODE_COLUMNS
