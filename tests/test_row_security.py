"""PostgreSQL enforces the tenant (migration 0031): as a login that is neither a superuser nor
has BYPASSRLS, and owns memstore's tables, raw SQL through a tenant's store sees, counts and
infers nothing of another tenant's rows; `memstore sql` over the reading login neither; and a
plan that lost its tenant filter still gets nothing of another tenant's."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy
from sqlalchemy import event, make_url
from typer.testing import CliRunner

from memstore import (
    AsyncSessionStore,
    InvalidArgumentError,
    MigrationError,
    SessionStore,
    StoreError,
)
from memstore.cli import app
from memstore.store import create_store_engine
from memstore.store.aio import create_async_store_engine
from memstore.store.migrate import HEAD_REVISION

from .conftest import LEGACY, postgres_server_url
from .test_standalone import CALL, WARM, RoundTrips

ACME, GLOBEX = "acme", "globex"


def turn(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "blocks": [{"kind": "text", "text": text}]}


@dataclass
class Logins:
    """A fresh schema owned by `app` (a plain login: no superuser, no BYPASSRLS, no CREATE on
    the database, as docs/tenants.md makes it), which `reader` may read; `admin` is the test
    server's superuser."""

    admin: sqlalchemy.Engine
    schema: str
    app: str
    reader: str
    superuser: str


@pytest.fixture
def logins() -> Iterator[Logins]:
    server = make_url(postgres_server_url()).set(drivername="postgresql+psycopg")
    name = f"memstore_rls_{uuid.uuid4().hex[:12]}"
    app, reader = f"{name}_app", f"{name}_reader"
    admin = sqlalchemy.create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        for statement in (
            f'CREATE ROLE "{app}" LOGIN NOSUPERUSER NOBYPASSRLS',
            f'CREATE ROLE "{reader}" LOGIN NOSUPERUSER NOBYPASSRLS',
            f'CREATE SCHEMA "{name}" AUTHORIZATION "{app}"',
            f'GRANT USAGE ON SCHEMA "{name}" TO "{reader}"',
        ):
            connection.exec_driver_sql(statement)
    url = server.update_query_dict({"options": f"-csearch_path={name}"})
    shown = {"hide_password": False}
    try:
        yield Logins(
            admin=admin,
            schema=name,
            app=url.set(username=app, password=None).render_as_string(**shown),
            reader=url.set(username=reader, password=None).render_as_string(**shown),
            superuser=url.render_as_string(**shown),
        )
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP SCHEMA "{name}" CASCADE')
            for role in (app, reader):
                connection.exec_driver_sql(f'DROP OWNED BY "{role}"')
                connection.exec_driver_sql(f'DROP ROLE "{role}"')
        admin.dispose()


def fill(url: str) -> None:
    """Both tenants hold session `s1` with the same first turn (the same node id); globex's
    alone has a turn saying 'zebra', a session `gx` and a usage line."""
    for tenant in (ACME, GLOBEX):
        with SessionStore(url, tenant=tenant) as store:
            store.append("s1", turn("user", "hello shared words"), created_at=1_000)
    with SessionStore(url, tenant=GLOBEX) as globex:
        globex.append("s1", turn("assistant", "only globex knows zebra"))
        globex.append_keyed("gx", [turn("user", "q")], ["k1"], usage={"inputTokens": 3})
        globex.update_session("gx", tags=["secret"])


def grant_reading(logins: Logins) -> None:
    """The reading login's grants (docs/sql.md), once the tables exist."""
    reader = make_url(logins.reader).username
    with logins.admin.connect() as connection:
        connection.exec_driver_sql(
            f'GRANT SELECT ON ALL TABLES IN SCHEMA "{logins.schema}" TO "{reader}"'
        )


# Each probe is (SQL, what it gives when it sees only acme's rows).
PROBES = [
    ("SELECT DISTINCT tenant FROM nodes", [(ACME,)]),
    ("SELECT count(*) FROM nodes", [(1,)]),
    ("SELECT count(*) FROM records WHERE session_id = 'gx'", [(0,)]),
    ("SELECT EXISTS (SELECT 1 FROM sessions WHERE id = 'gx')", [(False,)]),
    ("SELECT EXISTS (SELECT 1 FROM sessions WHERE tenant = 'globex')", [(False,)]),
    ("SELECT count(*) FROM session_tags", [(0,)]),
    ("SELECT count(*) FROM node_keys", [(0,)]),
    ("SELECT count(*) FROM node_usage", [(0,)]),
    ("SELECT count(*) FROM node_blocks WHERE tenant <> 'acme'", [(0,)]),
    ("SELECT DISTINCT tenant, session_id FROM turns", [(ACME, "s1")]),
    ("SELECT tenant, session_id FROM session_stats", [(ACME, "s1")]),
    ("SELECT count(*) FROM blocks WHERE session_id = 'gx'", [(0,)]),
    ("SELECT count(*) FROM usage", [(0,)]),
    ("SELECT count(*) FROM node_search WHERE session_id = 'gx'", [(0,)]),
    ("SELECT count(*) FROM nodes WHERE search_vector @@ to_tsquery('simple', 'zebra')", [(0,)]),
    (
        "SELECT count(*) FROM ts_stat('SELECT search_vector FROM nodes') WHERE word = 'zebra'",
        [(0,)],
    ),
]


def probe(connection: sqlalchemy.Connection) -> list[list[tuple[Any, ...]]]:
    return [[tuple(row) for row in connection.exec_driver_sql(sql)] for sql, _ in PROBES]


SEES_ACME_ONLY = [expected for _, expected in PROBES]


def test_raw_sql_through_a_tenant_stores_connections_sees_only_its_tenant(logins: Logins) -> None:
    fill(logins.app)
    with SessionStore(logins.app, tenant=ACME) as acme:
        with acme.engine.connect() as connection:  # the store's own engine, outside any plan
            assert probe(connection) == SEES_ACME_ONLY
        with acme.transaction(write=False) as connection:
            assert probe(connection) == SEES_ACME_ONLY
    operator = SessionStore(logins.superuser, tenant=ACME)  # a superuser: no policy binds it
    with operator, operator.transaction(write=False) as connection:
        tenants = connection.exec_driver_sql("SELECT DISTINCT tenant FROM nodes ORDER BY 1")
        assert tenants.all() == [(ACME,), (GLOBEX,)]


def test_the_docs_login_migrates_its_own_schema_named_by_schema(logins: Logins) -> None:
    """docs/tenants.md's recipe: a plain login owning the schema memstore is told of with
    `--schema`, without CREATE on the database, migrates it (the migration asked for the
    database's CREATE privilege to create the schema that already existed)."""
    plain = make_url(logins.app).difference_update_query(["options"])
    url = plain.render_as_string(hide_password=False)
    result = CliRunner().invoke(app, ["--db", url, "--schema", logins.schema, "db", "upgrade"])
    assert result.exit_code == 0, result.output
    with SessionStore(url, schema=logins.schema, tenant=ACME) as acme:
        acme.append("s1", turn("user", "hello"))
        assert acme.list_sessions() == ["s1"]


def test_an_async_stores_transaction_sees_only_its_tenant(logins: Logins) -> None:
    fill(logins.app)

    async def probes() -> list[list[tuple[Any, ...]]]:
        acme = AsyncSessionStore(logins.app, tenant=ACME)
        async with acme, acme.transaction(write=False) as connection:
            return await connection.run_sync(probe)

    assert asyncio.run(probes()) == SEES_ACME_ONLY


def test_without_the_setting_a_login_sees_nothing(logins: Logins) -> None:
    fill(logins.app)
    engine = sqlalchemy.create_engine(make_url(logins.app).set(drivername="postgresql+psycopg"))
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("SELECT count(*) FROM nodes").scalar() == 0
            connection.exec_driver_sql("SELECT set_config('memstore.tenant', 'globex', true)")
            assert connection.exec_driver_sql("SELECT count(*) FROM nodes").scalar() == 3
            connection.commit()
            # Set once in the session, the setting is '' after its transaction: still no tenant,
            # not the default tenant (whose name is '').
            assert (
                connection.exec_driver_sql("SELECT current_setting('memstore.tenant')").scalar()
                == ""
            )
            assert connection.exec_driver_sql("SELECT count(*) FROM nodes").scalar() == 0
    finally:
        engine.dispose()


def test_insert_on_conflict_infers_nothing_of_another_tenant(logins: Logins) -> None:
    fill(logins.app)
    with SessionStore(logins.app, tenant=ACME) as acme:
        for session in ("gx", "never-there"):  # globex's, and nobody's: the same refusal
            insert = (
                "INSERT INTO sessions (tenant, id, created_at, updated_at) "
                f"VALUES ('globex', '{session}', 1, 1) ON CONFLICT DO NOTHING"
            )
            refused = pytest.raises(sqlalchemy.exc.ProgrammingError, match="row-level security")
            with refused, acme.transaction(write=True) as connection:
                connection.exec_driver_sql(insert)
        with acme.transaction(write=True) as connection:  # acme's own `gx` does not collide
            mine = (
                "INSERT INTO sessions (tenant, id, created_at, updated_at) "
                "VALUES ('acme', 'gx', 1, 1) ON CONFLICT DO NOTHING RETURNING id"
            )
            assert connection.exec_driver_sql(mine).all() == [("gx",)]
            connection.rollback()
        with acme.transaction(write=True) as connection:
            taken = connection.exec_driver_sql(
                "UPDATE sessions SET title = 'mine' WHERE id IN ('s1', 'gx') RETURNING tenant"
            )
            assert taken.all() == [(ACME,)]
            connection.rollback()


def test_memstore_sql_over_the_reading_login_sees_only_the_stores_tenant(logins: Logins) -> None:
    fill(logins.app)
    grant_reading(logins)
    queries = [sql for sql, _ in PROBES if "ts_stat" not in sql]  # ts_stat: see above
    with SessionStore(logins.app, tenant=ACME) as acme:
        for sql in queries:
            rows = acme.read_only_query(sql, read_url=logins.reader).rows
            assert [tuple(row) for row in rows] == dict(PROBES)[sql], sql
        assert acme.read_only_query("SELECT id FROM sessions", read_url=logins.reader).rows == [
            ("s1",)
        ]
    with SessionStore(logins.app) as default:  # the default tenant holds nothing here
        counted = default.read_only_query("SELECT count(*) FROM nodes", read_url=logins.reader)
        assert counted.rows == [(0,)]


class _Unfiltered(psycopg.Cursor[Any]):
    """A cursor that drops every `tenant = <the store's tenant>` from the SQL it runs: a store
    whose every plan forgot its tenant filter (its inserts still name the tenant)."""

    FILTER = re.compile(r"(\b\w+\.)?tenant = %\(the_tenant\)s(::VARCHAR)?")

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if isinstance(query, str):
            query = self.FILTER.sub("TRUE", query)
        return super().execute(query, params, **kwargs)


def _forgetful(store: SessionStore) -> SessionStore:
    """`store`, its plans without their tenant filters from its next connection on."""
    store.engine.dispose()

    @event.listens_for(store.engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.cursor_factory = _Unfiltered

    return store


def test_plans_that_forgot_the_tenant_filter_still_get_nothing_of_another_tenant(
    logins: Logins,
) -> None:
    fill(logins.app)
    # As a superuser no policy binds, so the forgetful plans show globex's rows: the double
    # does remove the filters. (Not the search's: the search function keeps its tenant in the
    # database, migration 0034.)
    with _forgetful(SessionStore(logins.superuser, tenant=ACME)) as leaky:
        assert "gx" in leaky.list_sessions()
        assert leaky.search("zebra") == []
    with _forgetful(SessionStore(logins.app, tenant=ACME)) as acme:
        assert acme.list_sessions() == ["s1"]
        assert acme.search("zebra") == []
        assert [t.blocks[0].text for t in acme.load_path("s1")] == ["hello shared words"]  # type: ignore[union-attr]
        assert acme.stats().sessions == 1


def test_one_engine_shared_by_two_tenants_stores_keeps_each_to_its_own(logins: Logins) -> None:
    fill(logins.app)
    engine = create_store_engine(logins.app, pool_size=1, max_overflow=0)  # one connection
    try:
        acme, globex = SessionStore(engine, tenant=ACME), SessionStore(engine, tenant=GLOBEX)
        for _ in range(2):  # the one connection goes back and forth
            assert acme.list_sessions() == ["s1"]
            assert globex.list_sessions() == ["gx", "s1"]
            with acme.transaction(write=False) as connection:
                assert probe(connection) == SEES_ACME_ONLY
        with engine.connect() as connection:  # the application's own query: no tenant
            assert connection.exec_driver_sql("SELECT count(*) FROM nodes").scalar() == 0
        acme.append("s1", turn("user", "acme again"))
        assert len(acme.load_path("s1")) == 2
        assert len(globex.load_path("s1")) == 2
    finally:
        engine.dispose()


IMPORTED = ("branching.jsonl", "images.jsonl", "thinking.jsonl", "key-order.jsonl")


def _counts(logins: Logins) -> list[tuple[Any, ...]]:
    """Every table's rows by tenant, as the superuser sees them (no policy binds it)."""
    tables = ("sessions", "nodes", "node_blocks", "records", "node_usage", "node_keys")
    counts = " UNION ALL ".join(
        f"SELECT '{table}', tenant, count(*) FROM {table} GROUP BY tenant" for table in tables
    )
    with logins.admin.connect() as connection:
        connection.exec_driver_sql(f'SET search_path TO "{logins.schema}"')
        return sorted(tuple(row) for row in connection.exec_driver_sql(counts))


def test_imports_exports_and_the_migration_keep_every_row_and_byte(
    logins: Logins, tmp_path: Path
) -> None:
    """As the plain login that owns the tables: imports go in (PostgreSQL refuses COPY where
    policies bind, so their rows go in by INSERT), and down to 0030 and up again keeps every
    row, and each tenant's exports byte for byte."""
    stores = [SessionStore(logins.app, tenant=tenant) for tenant in (ACME, GLOBEX)]
    try:
        for store in stores:
            for name in IMPORTED:
                store.import_jsonl(LEGACY / name)
        before = _counts(logins)
        assert {tenant for _, tenant, _ in before} == {ACME, GLOBEX}
        stores[0].downgrade_schema("0030")
        assert _counts(logins) == before
        with stores[0].transaction(write=False) as connection:  # no policies: every row
            assert (
                connection.exec_driver_sql("SELECT count(DISTINCT tenant) FROM nodes").scalar() == 2
            )
        stores[0].upgrade_schema()
        assert _counts(logins) == before
        for store in stores:
            assert len(store.list_sessions()) == len(IMPORTED)
            for name in IMPORTED:
                out = tmp_path / f"{store.tenant}-{name}"
                store.export_jsonl(Path(name).stem, out)
                assert out.read_bytes() == (LEGACY / name).read_bytes(), (store.tenant, name)
    finally:
        for store in stores:
            store.close()


def test_an_async_engine_shared_by_two_tenants_stores_keeps_each_to_its_own(
    logins: Logins,
) -> None:
    fill(logins.app)

    async def listings() -> list[list[str]]:
        engine = create_async_store_engine(logins.app, pool_size=1, max_overflow=0)
        acme = AsyncSessionStore(engine, tenant=ACME)
        globex = AsyncSessionStore(engine, tenant=GLOBEX)
        try:
            seen = []
            for _ in range(2):  # the one connection goes back and forth
                seen += [await acme.list_sessions(), await globex.list_sessions()]
            async with engine.connect() as connection:  # the application's own: no tenant
                counted = await connection.exec_driver_sql("SELECT count(*) FROM nodes")
                seen.append([str(counted.scalar())])
            return seen
        finally:
            await engine.dispose()

    s1, gx = ["s1"], ["gx", "s1"]
    assert asyncio.run(listings()) == [s1, gx, s1, gx, ["0"]]


@pytest.fixture
def bound_reader(logins: Logins) -> Iterator[str]:
    """A login bound to acme by its name (`.../acme`, migration 0032); its URL."""
    reader = f"{logins.schema}_reader/{ACME}"
    with logins.admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE ROLE "{reader}" LOGIN NOSUPERUSER NOBYPASSRLS')
        connection.exec_driver_sql(f'GRANT USAGE ON SCHEMA "{logins.schema}" TO "{reader}"')
    try:
        yield make_url(logins.reader).set(username=reader).render_as_string(hide_password=False)
    finally:
        with logins.admin.connect() as connection:
            connection.exec_driver_sql(f'DROP OWNED BY "{reader}"')
            connection.exec_driver_sql(f'DROP ROLE "{reader}"')


CROSSING = [  # SQL written to cross tenants: it sets the setting before it reads
    "SELECT (SELECT set_config('memstore.tenant', 'globex', true)), (SELECT count(*) FROM nodes)",
    "WITH s AS MATERIALIZED (SELECT set_config('memstore.tenant', 'globex', true)) "
    "SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM nodes)",
]


def test_a_login_bound_to_a_tenant_cannot_set_its_way_to_another(
    logins: Logins, bound_reader: str
) -> None:
    """The setting is the policies' key for a login that serves several tenants, so SQL that
    sets it crosses (what docs/tenants.md says it does not stop); a login bound to a tenant by
    its name sees that tenant's rows whatever the setting says, through raw SQL and through
    `memstore sql`."""
    fill(logins.app)
    grant_reading(logins)
    reader = make_url(bound_reader).username
    with logins.admin.connect() as connection:
        connection.exec_driver_sql(
            f'GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA "{logins.schema}" TO "{reader}"'
        )
    with SessionStore(logins.app, tenant=ACME) as acme:
        crossed = [acme.read_only_query(sql, read_url=logins.reader).rows for sql in CROSSING]
        assert crossed == [[("globex", 3)], [(1, 3)]]  # globex's 3 nodes: the login crossed
        held = [acme.read_only_query(sql, read_url=bound_reader).rows for sql in CROSSING]
        assert held == [[("globex", 1)], [(1, 1)]]  # acme's one node, whatever the setting
    engine = sqlalchemy.create_engine(make_url(bound_reader).set(drivername="postgresql+psycopg"))
    try:
        with engine.connect() as connection:  # no setting, then another tenant's
            assert probe(connection) == SEES_ACME_ONLY
            connection.exec_driver_sql("SELECT set_config('memstore.tenant', 'globex', false)")
            assert probe(connection) == SEES_ACME_ONLY
            refused = "INSERT INTO sessions (tenant, id, created_at, updated_at) "
            with pytest.raises(sqlalchemy.exc.ProgrammingError, match="row-level security"):
                connection.exec_driver_sql(refused + "VALUES ('globex', 'new', 1, 1)")
    finally:
        engine.dispose()


def test_a_store_of_another_tenant_over_a_bound_login_is_refused_when_it_opens(
    logins: Logins, bound_reader: str
) -> None:
    """It would see none of its rows and have each row it writes refused: one clear error
    instead, and the bound tenant's own store works."""
    fill(logins.app)
    reader = make_url(bound_reader).username
    with logins.admin.connect() as connection:
        connection.exec_driver_sql(
            f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{logins.schema}" '
            f'TO "{reader}"'
        )
        connection.exec_driver_sql(
            f'GRANT USAGE ON ALL SEQUENCES IN SCHEMA "{logins.schema}" TO "{reader}"'
        )
    for tenant in (GLOBEX, ""):
        with pytest.raises(InvalidArgumentError, match=f"bound to tenant 'acme'.*{tenant!r}"):
            SessionStore(bound_reader, tenant=tenant, auto_migrate=False)
    with SessionStore(bound_reader, tenant=ACME, auto_migrate=False) as acme:
        acme.append("s1", turn("assistant", "bound and writing"))
        assert acme.list_sessions() == ["s1"]
        assert len(acme.load_path("s1")) == 2


def test_memstore_sql_over_a_reading_login_bound_to_another_tenant_is_refused(
    logins: Logins, bound_reader: str
) -> None:
    """`memstore sql --tenant globex` over acme's bound reading login read acme's rows as if
    they were globex's; it is refused, naming the login's tenant, and acme's own query runs."""
    fill(logins.app)
    reader = make_url(bound_reader).username
    with logins.admin.connect() as connection:
        connection.exec_driver_sql(
            f'GRANT SELECT ON ALL TABLES IN SCHEMA "{logins.schema}" TO "{reader}"'
        )
    count = "SELECT count(*) FROM nodes"
    for tenant in (GLOBEX, ""):
        result = CliRunner().invoke(
            app, ["--db", logins.app, "sql", "--tenant", tenant, "--read-url", bound_reader, count]
        )
        assert result.exit_code == 2, result.stdout
        assert "bound to tenant 'acme'" in result.stderr
        refused = pytest.raises(InvalidArgumentError, match="bound to tenant 'acme'")
        with SessionStore(logins.app, tenant=tenant) as store, refused:
            store.read_only_query(count, read_url=bound_reader)
    with SessionStore(logins.app, tenant=ACME) as acme:
        assert acme.read_only_query(count, read_url=bound_reader).rows == [(1,)]


def test_listing_tenants_over_a_login_the_policies_bind_is_refused(logins: Logins) -> None:
    """`memstore tenants` over the application's login listed nothing (the default tenant's
    sessions, of which there are none) while two tenants hold sessions: it is refused, and
    the operator's login (a superuser) lists both."""
    fill(logins.app)
    for tenant in ("", ACME):
        with (
            SessionStore(logins.app, tenant=tenant) as store,
            pytest.raises(
                StoreError, match="listing tenants needs a login that row-level security does not"
            ),
        ):
            store.tenants()
    result = CliRunner().invoke(app, ["--db", logins.app, "tenants"])
    assert result.exit_code == 1
    assert "BYPASSRLS" in result.stderr
    with SessionStore(logins.superuser) as operator:
        assert [(t.tenant, t.sessions) for t in operator.tenants()] == [(ACME, 1), (GLOBEX, 2)]


def hand_search_to_a_role(logins: Logins) -> str:
    """Hand the schema's search to a role of this test's own (`memstore db search-role`, as
    the operator: a superuser); the role's name."""
    role = f"{logins.schema}_search"
    with SessionStore(logins.superuser, auto_migrate=False) as operator:
        statements = operator.hand_search_to_role(role)
    assert any("SECURITY DEFINER" in statement for statement in statements)
    return role


def drop_role(logins: Logins, role: str) -> None:
    with logins.admin.connect() as connection:
        connection.exec_driver_sql(f'DROP OWNED BY "{role}"')  # the function, the grants
        connection.exec_driver_sql(f'DROP ROLE "{role}"')


def explained_searches(logins: Logins, login: str, query: str) -> tuple[list[str], list[Any]]:
    """The tables and indexes the search statements of acme's store over `login` read, and the
    hits: PostgreSQL's auto_explain reports every plan, nested ones (inside the search
    function) included, as the role's own settings say (set by the superuser)."""
    role = make_url(login).username
    with logins.admin.connect() as connection:
        for setting in (
            "session_preload_libraries = 'auto_explain'",
            "auto_explain.log_min_duration = 0",
            "auto_explain.log_nested_statements = on",
            "auto_explain.log_format = json",
            "auto_explain.log_level = notice",
            "enable_seqscan = off",  # a few turns: an index, when the plan may use one
        ):
            connection.exec_driver_sql(f'ALTER ROLE "{role}" SET {setting}')
    seen: list[dict[str, Any]] = []

    def _on_notice(diagnostic: Any) -> None:
        message = diagnostic.message_primary or ""
        if "{" in message:
            seen.append(json.loads(message[message.index("{") :]))

    engine = create_store_engine(login)
    event.listen(engine, "connect", lambda connection, _: connection.add_notice_handler(_on_notice))
    try:
        with SessionStore(engine, tenant=ACME) as acme:
            hits = acme.search(query)
    finally:
        engine.dispose()
        with logins.admin.connect() as connection:
            connection.exec_driver_sql(f'ALTER ROLE "{role}" RESET ALL')
    searches = [plan["Plan"] for plan in seen if "ts_rank" in plan["Query Text"]]
    assert searches, "no search statement was explained"
    read = [
        node.get("Index Name") or node.get("Relation Name") or ""
        for plan in searches
        for node in _plan_nodes(plan)
    ]
    return read, hits


def _plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _plan_nodes(child)


def test_a_search_as_a_login_the_policies_bind_reads_the_full_text_index(logins: Logins) -> None:
    """PostgreSQL applies `@@` after the policies' condition, so not through an index, for a
    login they bind: once the search is handed to a role with BYPASSRLS, the search function
    reads the index as that role, and returns the store's tenant's hits only."""
    fill(logins.app)
    with SessionStore(logins.app, tenant=GLOBEX) as globex:
        for n in range(30):
            globex.append("many", turn("user", f"shared words, zebra {n}"))
    read, hits = explained_searches(logins, logins.app, "shared")
    assert "ix_nodes_search" not in read  # held to the policies: the tenant's turns, read all
    assert [(hit.session_id, hit.snippet) for hit in hits] == [("s1", "hello [shared] words")]

    role = hand_search_to_a_role(logins)
    try:
        read, hits = explained_searches(logins, logins.app, "shared")
        assert "ix_nodes_search" in read
        assert [(hit.session_id, hit.snippet) for hit in hits] == [("s1", "hello [shared] words")]
        _, hits = explained_searches(logins, logins.app, "zebra")
        assert hits == []
    finally:
        drop_role(logins, role)


SEARCH = "SELECT count(*) FROM memstore_search_keys(to_tsquery('simple', %s), NULL, %s, NULL, 50)"


def test_a_login_bound_to_a_tenant_gets_only_its_tenants_matches_from_the_search_function(
    logins: Logins, bound_reader: str
) -> None:
    """The search function, handed to a role that no policy binds, keeps the calling session's
    tenant itself: a login bound to acme by its name gets acme's matches only, whatever the
    setting says; a login that may not read the nodes gets an error, not their matches."""
    fill(logins.app)
    reader = make_url(bound_reader).username
    role = hand_search_to_a_role(logins)
    try:
        libpq = make_url(bound_reader).set(drivername="postgresql")
        refused = pytest.raises(psycopg.errors.InsufficientPrivilege, match="table nodes")
        with psycopg.connect(libpq.render_as_string(hide_password=False)) as connection, refused:
            connection.execute(SEARCH, ("zebra", ["zebra"]))
        with logins.admin.connect() as connection:
            connection.exec_driver_sql(
                f'GRANT SELECT ON ALL TABLES IN SCHEMA "{logins.schema}" TO "{reader}"'
            )
        with psycopg.connect(libpq.render_as_string(hide_password=False)) as connection:
            counts = []
            for tenant in ("", ACME, GLOBEX):
                connection.execute("SELECT set_config('memstore.tenant', %s, false)", (tenant,))
                for word in ("zebra", "shared"):
                    counts.append(connection.execute(SEARCH, (word, [word])).fetchone())
        assert counts == [(0,), (1,)] * 3  # acme's: no zebra, its one 'shared' turn
    finally:
        drop_role(logins, role)


OWNER = (
    "SELECT pg_get_userbyid(proowner), prosecdef FROM pg_proc "
    "WHERE oid = to_regprocedure('{schema}.memstore_search_keys("
    "tsquery, tsquery, text[], text, integer)')"
)


@contextmanager
def prepared_search_role(logins: Logins) -> Iterator[None]:
    """The role `memstore_search` as an operator prepares it for migration 0034 (BYPASSRLS,
    USAGE on the schema); what it was given dropped at the end, and the role if made here."""
    with logins.admin.connect() as connection:
        made = not connection.exec_driver_sql(
            "SELECT FROM pg_roles WHERE rolname = 'memstore_search'"
        ).first()
        if made:
            connection.exec_driver_sql("CREATE ROLE memstore_search NOLOGIN BYPASSRLS")
        connection.exec_driver_sql(f'GRANT USAGE ON SCHEMA "{logins.schema}" TO memstore_search')
    try:
        yield
    finally:
        with logins.admin.connect() as connection:
            connection.exec_driver_sql("DROP OWNED BY memstore_search")
            if made:
                connection.exec_driver_sql("DROP ROLE memstore_search")


def test_the_migration_hands_the_search_to_the_role_an_operator_prepared(logins: Logins) -> None:
    """Migration 0034 hands the search function to `memstore_search` when that role exists,
    has BYPASSRLS and may use the schema, and the migrating login may give it (a superuser
    here), and 0036 hands its successor to the same role; a downgrade by a login that may not
    drop it is refused, naming the role."""
    with SessionStore(logins.app, auto_migrate=False) as app:
        app.upgrade_schema("0032")
    owner = OWNER.format(schema=logins.schema)
    with prepared_search_role(logins):
        with SessionStore(logins.superuser) as operator:  # migrates to the head
            assert operator.schema_revision() == HEAD_REVISION
        fill(logins.app)
        with logins.admin.connect() as connection:
            assert connection.exec_driver_sql(owner).one() == ("memstore_search", True)
        with SessionStore(logins.app, tenant=GLOBEX) as globex:
            assert [hit.session_id for hit in globex.search("zebra")] == ["s1"]
            with pytest.raises(MigrationError, match="belongs to the role 'memstore_search'"):
                globex.downgrade_schema("0032")
        with SessionStore(logins.superuser, auto_migrate=False) as operator:
            operator.downgrade_schema("0032")
        with logins.admin.connect() as connection:  # the reading only the function used: gone
            reads = (
                f"SELECT has_table_privilege('memstore_search', '{logins.schema}.nodes', 'SELECT')"
            )
            assert connection.exec_driver_sql(reads).scalar() is False
        with SessionStore(logins.app, auto_migrate=False) as app:
            app.upgrade_schema()  # a login that may not hand it over: it runs as its caller
        with logins.admin.connect() as connection:
            assert connection.exec_driver_sql(owner).one() == (make_url(logins.app).username, False)


def test_the_search_role_command_prints_the_operators_sql_and_refuses_sqlite(
    logins: Logins, tmp_path: Path
) -> None:
    """`memstore db search-role --print` prints the SQL for an operator and runs none of it
    (any login may ask); SQLite has no row-level security, so nothing to hand over."""
    fill(logins.app)
    result = CliRunner().invoke(app, ["--db", logins.app, "db", "search-role", "--print"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == (
        f'ALTER FUNCTION "{logins.schema}".memstore_search_keys(tsquery, tsquery, text[], '
        f'text, integer) SECURITY DEFINER SET search_path = "{logins.schema}", pg_temp;'
    )
    with logins.admin.connect() as connection:
        owner = connection.exec_driver_sql(OWNER.format(schema=logins.schema)).one()
    assert owner == (make_url(logins.app).username, False)  # nothing ran
    sqlite = f"sqlite:///{tmp_path / 'x.db'}"
    result = CliRunner().invoke(app, ["--db", sqlite, "db", "search-role"])
    assert result.exit_code == 2
    assert "SQLite has none" in result.stderr


def _added(before: list[tuple[Any, ...]], after: list[tuple[Any, ...]]) -> dict[Any, int]:
    """Rows added per (table, tenant) between two `_counts`."""
    counted = {(table, tenant): count for table, tenant, count in before}
    return {
        (table, tenant): count - counted.get((table, tenant), 0)
        for table, tenant, count in after
        if count != counted.get((table, tenant), 0)
    }


def test_an_append_alone_over_an_engine_handed_in_writes_its_tenants_rows_only(
    logins: Logins,
) -> None:
    """One round trip (no transaction to set the tenant in: the call sets it, migration 0033),
    held by the policies to the store's tenant, leaving no tenant on the pooled connection."""
    fill(logins.app)
    engine = create_store_engine(logins.app, pool_size=1, max_overflow=0)  # one connection
    acme, globex = SessionStore(engine, tenant=ACME), SessionStore(engine, tenant=GLOBEX)
    trips = RoundTrips(engine)
    try:
        for _ in range(WARM):
            globex.append("gx", turn("user", "warm"))
        before = _counts(logins)
        trips.take()
        acme.append("s1", turn("user", "acme alone"))
        assert trips.take() == [CALL]
        globex.append("s1", turn("user", "globex alone"))
        assert trips.take() == [CALL]
        assert _added(before, _counts(logins)) == {
            (table, tenant): 1
            for table in ("nodes", "node_blocks", "records")
            for tenant in (ACME, GLOBEX)
        }
        assert [t.blocks[0].text for t in acme.load_path("s1")] == [  # type: ignore[union-attr]
            "hello shared words",
            "acme alone",
        ]
        with engine.connect() as connection:  # the application's own query: no tenant
            assert connection.exec_driver_sql("SELECT count(*) FROM nodes").scalar() == 0
    finally:
        trips.close()
        engine.dispose()


@pytest.fixture
def another_owners_schema(logins: Logins) -> Iterator[str]:
    """A second schema, migrated, owned by another plain login than the fixture's; its URL
    as the superuser."""
    owner, schema = f"{logins.schema}_other", f"{logins.schema}_other"
    server = make_url(logins.superuser)
    with logins.admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE ROLE "{owner}" LOGIN NOSUPERUSER NOBYPASSRLS')
        connection.exec_driver_sql(f'CREATE SCHEMA "{schema}" AUTHORIZATION "{owner}"')
    url = server.update_query_dict({"options": f"-csearch_path={schema}"})
    with SessionStore(url.set(username=owner).render_as_string(False), tenant=GLOBEX) as store:
        store.append("theirs", turn("user", "the other owner's zebra"))
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with logins.admin.connect() as connection:
            connection.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
            connection.exec_driver_sql(f'DROP OWNED BY "{owner}"')
            connection.exec_driver_sql(f'DROP ROLE "{owner}"')


def test_a_search_role_serves_the_schemas_of_one_owner_only(
    logins: Logins, another_owners_schema: str
) -> None:
    """The search function runs its schema owner's code as the role (`memstore_tenant()`,
    which that owner may replace): a role handed the search of two owners' schemas would let
    each owner read the other's rows through it. The second hand-over is refused, naming the
    table and its owner; a role of its own is handed over."""
    fill(logins.app)
    role = hand_search_to_a_role(logins)
    try:
        with SessionStore(another_owners_schema, auto_migrate=False) as operator:
            with pytest.raises(
                InvalidArgumentError, match=r"may already read .*\.(nodes|sessions), which"
            ):
                operator.hand_search_to_role(role)
            result = CliRunner().invoke(
                app, ["--db", another_owners_schema, "db", "search-role", "--role", role]
            )
            assert result.exit_code == 2
            assert "a role of their own" in result.stderr
            owner = OWNER.format(schema=f"{logins.schema}_other")
            with logins.admin.connect() as connection:
                assert connection.exec_driver_sql(owner).one()[1] is False  # not handed over
            operator.hand_search_to_role(f"{role}_2")
        drop_role(logins, f"{role}_2")
    finally:
        drop_role(logins, role)


def test_the_migration_hands_no_search_to_a_role_of_another_owners_schema(
    logins: Logins, another_owners_schema: str
) -> None:
    """Migration 0034 hands the search over only to a `memstore_search` that reads no other
    owner's schema: one that does is left alone, and the function runs as its caller."""
    with SessionStore(logins.app, auto_migrate=False) as app_store:
        app_store.upgrade_schema("0033")
    with prepared_search_role(logins):
        with SessionStore(another_owners_schema, auto_migrate=False) as other:
            other.hand_search_to_role("memstore_search")
        with SessionStore(logins.superuser) as operator:  # migrates to the head
            assert operator.schema_revision() == HEAD_REVISION
        with logins.admin.connect() as connection:
            owner = connection.exec_driver_sql(OWNER.format(schema=logins.schema)).one()
        assert owner[0] != "memstore_search"  # the migrating superuser's, as its caller
        assert owner[1] is False
