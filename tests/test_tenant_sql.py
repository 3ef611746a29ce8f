"""A tenant's read-only SQL on SQLite (`memstore.store.tenant_sql`): every table and view gives
that tenant's rows, and every way around the views to the base tables is refused."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from typer.testing import CliRunner

from memstore import SessionStore
from memstore.cli import app
from memstore.errors import QueryError
from memstore.store.tenant_sql import TENANT_TABLES

from .test_tenants import ACME, GLOBEX, fill, turn

VIEWS = ["turns", "turns_all", "blocks", "blocks_all", "tool_calls", "session_stats", "usage"]
VIEWS += ["session_sources", "node_search"]


@pytest.fixture
def url(sqlite_url: str) -> str:
    """acme and globex hold the same sessions and turns; globex's `s1` also says 'zebra'."""
    with SessionStore(sqlite_url, tenant=ACME) as acme:
        fill(acme)
    with SessionStore(sqlite_url, tenant=GLOBEX) as globex:
        fill(globex)
        globex.append("s1", turn("user", "only globex knows zebra"))
        globex.index_search_backlog()
    return sqlite_url


def rows(url: str, tenant: str, sql: str) -> list[tuple[Any, ...]]:
    with SessionStore(url, tenant=tenant, read_only=True) as store:
        return store.read_only_query(sql).rows


@pytest.mark.parametrize("relation", sorted(TENANT_TABLES) + VIEWS)
def test_every_table_and_view_gives_the_tenants_rows(url: str, relation: str) -> None:
    for tenant in (ACME, GLOBEX):
        assert set(rows(url, tenant, f"SELECT tenant FROM {relation}")) <= {(tenant,)}
    every = rows(url, "", f"SELECT count(*) FROM {relation}")[0][0]
    acme = rows(url, ACME, f"SELECT count(*) FROM {relation}")[0][0]
    globex = rows(url, GLOBEX, f"SELECT count(*) FROM {relation}")[0][0]
    assert acme + globex == every  # the default tenant's store reads every row, as before


def test_a_tenant_reads_its_own_content(url: str) -> None:
    zebra = "SELECT session_id FROM turns WHERE text LIKE '%zebra%'"
    assert rows(url, ACME, zebra) == []
    assert rows(url, GLOBEX, zebra) == [("s1",)]
    assert rows(url, ACME, "SELECT count(*) FROM sessions") == [(4,)]
    assert rows(url, ACME, 'SELECT DISTINCT tenant FROM "NODES" AS n') == [(ACME,)]
    joined = "SELECT count(*) FROM nodes JOIN sessions ON sessions.id = nodes.session_id"
    assert rows(url, ACME, joined)[0][0] + 1 == rows(url, GLOBEX, joined)[0][0]


AROUND_THE_VIEWS = [
    "SELECT * FROM main.nodes",
    "SELECT * FROM main.turns",
    "WITH nodes AS (SELECT * FROM main.nodes) SELECT * FROM nodes",
    "WITH x AS (SELECT * FROM nodes_fts_backlog) SELECT * FROM x",
    "WITH nodes_fts_backlog AS (SELECT * FROM nodes_fts_backlog) SELECT * FROM nodes_fts_backlog",
    "SELECT * FROM (SELECT * FROM nodes_fts_backlog) AS nodes",
    "SELECT * FROM nodes_fts WHERE nodes_fts MATCH 'zebra'",
    "SELECT rowid FROM nodes_fts_chars WHERE nodes_fts_chars MATCH 'zebra'",
    "SELECT * FROM nodes_fts_data",
    "SELECT * FROM nodes_fts_idx",
    "SELECT * FROM memstore_alembic_version",
    "SELECT * FROM sqlite_master",
    "SELECT * FROM sqlite_schema",
    "SELECT * FROM temp.sqlite_master",
    "SELECT * FROM sqlite_temp_master",
    "SELECT * FROM sqlite_sequence",
    "SELECT * FROM dbstat",
    "SELECT * FROM dbstat('main')",
    "SELECT * FROM pragma_database_list",
    "SELECT * FROM pragma_table_list",
    "SELECT * FROM pragma_table_info('nodes', 'main')",
    "PRAGMA database_list",
    "PRAGMA table_list",
    "PRAGMA page_count",
    "ATTACH DATABASE '{path}' AS other",
    "SELECT * FROM temp.nodes WHERE tenant = 'globex'",
]


@pytest.mark.parametrize("sql", AROUND_THE_VIEWS)
def test_the_base_tables_cannot_be_reached(url: str, sql: str) -> None:
    path = url.removeprefix("sqlite:///")
    try:
        found = rows(url, ACME, sql.format(path=path))
    except QueryError:
        return
    assert GLOBEX not in json.dumps(found, default=str)
    assert found == []


def test_the_attached_files_name_is_new_for_each_query(url: str) -> None:
    plan = rows(url, ACME, "EXPLAIN QUERY PLAN SELECT * FROM nodes")
    (hidden,) = set(re.findall(r"memstore_[0-9a-f]{32}", json.dumps(plan)))
    with pytest.raises(QueryError, match="no such table"):
        rows(url, ACME, f"SELECT * FROM {hidden}.nodes")
    with pytest.raises(QueryError) as refused:
        rows(url, ACME, "SELECT * FROM nodes_fts_backlog")
    assert "memstore_" not in str(refused.value)
    assert "tenant's query" in str(refused.value)


def test_memstore_sql_takes_the_tenant(url: str) -> None:
    runner = CliRunner()
    sql = ["sql", "--json", "SELECT tenant, count(*) AS n FROM nodes GROUP BY tenant"]
    result = runner.invoke(app, ["--db", url, *sql, "--tenant", ACME])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [{"tenant": ACME, "n": 17}]
    result = runner.invoke(app, ["--db", url, *sql], env={"MEMSTORE_TENANT": GLOBEX})
    assert json.loads(result.stdout) == [{"tenant": GLOBEX, "n": 18}]
    result = runner.invoke(app, ["--db", url, *sql])
    assert [row["tenant"] for row in json.loads(result.stdout)] == [ACME, GLOBEX]
