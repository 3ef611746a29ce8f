"""The tests' databases copied from a migrated template (tests/templates.py) are the databases a
migration makes: the same tables, columns, indexes, triggers, functions, rows and version, on
SQLite and PostgreSQL; a store opens a copy without migrating it, and a copy is a database of its
own. The run's own templates (the `migrated_templates` fixture the store fixtures copy) are
checked against a fresh migration, so a stale or wrong template fails here, not silently in
every other test. Only a database nothing has touched is filled from a template."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import sqlalchemy
from sqlalchemy.engine import URL, make_url

from memstore import SessionStore
from memstore.store.names import VERSION_TABLE
from tests.conftest import postgres_server_url
from tests.templates import (
    MIGRATE_EACH_VARIABLE,
    PostgresTemplate,
    SqliteTemplate,
    Templates,
    schema_dump,
    schema_url,
)

HELLO = {"role": "user", "blocks": [{"kind": "text", "text": "hello"}]}


def layout(url: str) -> list[tuple[str, ...]]:
    """The database's objects: each table's columns and indexes, the migration version."""
    engine = sqlalchemy.create_engine(url)
    try:
        inspector = sqlalchemy.inspect(engine)
        found: list[tuple[str, ...]] = []
        for table in sorted(inspector.get_table_names()):
            found.extend(("column", table, c["name"]) for c in inspector.get_columns(table))
            found.extend(
                ("index", table, str(index["name"])) for index in inspector.get_indexes(table)
            )
        with engine.connect() as connection:
            version = connection.execute(sqlalchemy.text(f"SELECT * FROM {VERSION_TABLE}"))
            found.extend(("version", str(row[0])) for row in version)
        return sorted(found)
    finally:
        engine.dispose()


def functions(server: URL, schema: str) -> list[str]:
    """PostgreSQL: the definitions of the functions in `schema` (its name left out)."""
    engine = sqlalchemy.create_engine(schema_url(server, schema))
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                sqlalchemy.text(
                    "SELECT pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n "
                    "ON n.oid = p.pronamespace WHERE n.nspname = current_schema()"
                )
            )
            return sorted(str(row[0]).replace(schema, "<schema>") for row in rows)
    finally:
        engine.dispose()


def test_a_sqlite_copy_is_the_migrated_database(tmp_path: Path) -> None:
    (tmp_path / "template").mkdir()
    template = SqliteTemplate.made_in(tmp_path / "template")
    template.copy_to(tmp_path / "copy.db")
    migrated = f"sqlite:///{tmp_path / 'migrated.db'}"
    SessionStore(migrated).close()
    assert layout(f"sqlite:///{tmp_path / 'copy.db'}") == layout(migrated)
    store = SessionStore(f"sqlite:///{tmp_path / 'copy.db'}")
    try:
        store.append("s", HELLO)
    finally:
        store.close()
    assert layout(f"sqlite:///{template.path}") == layout(migrated)  # the template is untouched


def test_a_postgres_copy_is_the_migrated_schema() -> None:
    server = make_url(postgres_server_url()).set(drivername="postgresql+psycopg")
    template = PostgresTemplate.made_on(server)
    if template.sql is None:
        pytest.skip("no pg_dump: each schema is migrated (the plain path)")
    admin = sqlalchemy.create_engine(server)
    schemas = [f"memstore_tpl_{name}_{uuid.uuid4().hex[:12]}" for name in ("copy", "migrated")]
    try:
        with admin.begin() as connection:
            template.create(connection, schemas[0])
            connection.execute(sqlalchemy.text(f'CREATE SCHEMA "{schemas[1]}"'))
        SessionStore(schema_url(server, schemas[1])).close()
        copy, migrated = (schema_url(server, schema) for schema in schemas)
        assert layout(copy) == layout(migrated)
        assert functions(server, schemas[0]) == functions(server, schemas[1]) != []
        store = SessionStore(copy)
        try:
            assert store.append("s", HELLO).turn.to_json() == HELLO
        finally:
            store.close()
    finally:
        with admin.begin() as connection:
            for schema in schemas:
                connection.execute(sqlalchemy.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


def sqlite_objects(path: Path) -> list[tuple[str, ...]]:
    """Everything a SQLite file defines (each object's SQL, as written), its version rows and
    the header settings a migration may set."""
    engine = sqlalchemy.create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:
            rows = connection.exec_driver_sql(
                "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master"
            )
            found = [tuple(str(value) for value in row) for row in rows]
            version = connection.exec_driver_sql(f"SELECT * FROM {VERSION_TABLE}")
            found.extend(("version", *map(str, row)) for row in version)
            for pragma in ("user_version", "application_id", "journal_mode", "auto_vacuum"):
                value = connection.exec_driver_sql(f"PRAGMA {pragma}").scalar()
                found.append(("pragma", pragma, str(value)))
        return sorted(found)
    finally:
        engine.dispose()


def test_the_runs_sqlite_template_is_a_fresh_migration(
    tmp_path: Path, migrated_templates: Templates
) -> None:
    migrated = tmp_path / "migrated.db"
    SessionStore(f"sqlite:///{migrated}").close()
    template = migrated_templates.sqlite_template()
    assert sqlite_objects(template.path) == sqlite_objects(migrated)
    assert layout(f"sqlite:///{template.path}") == layout(f"sqlite:///{migrated}")


def test_no_database_is_filled_when_each_must_migrate(
    tmp_path: Path, migrated_templates: Templates, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MIGRATE_EACH_VARIABLE, "1")
    assert not migrated_templates.fill_if_untouched(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert not (tmp_path / "fresh.db").exists()


def test_the_runs_postgres_template_is_a_fresh_migration(migrated_templates: Templates) -> None:
    """The template's SQL is the `pg_dump` of a migrated schema: it must be, object for object
    and row for row, the dump of a schema migrated now. (A copy replayed from it is checked by
    its layout and functions above: a replay writes some check constraints back in another,
    equivalent spelling, so the copy's own dump is not compared as text.)"""
    server = make_url(postgres_server_url()).set(drivername="postgresql+psycopg")
    template = migrated_templates.postgres_template(server)
    if template.sql is None:
        pytest.skip("no pg_dump: each schema is migrated (the plain path)")
    schema = f"memstore_tpl_migrated_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(server)
    try:
        with admin.begin() as connection:
            connection.execute(sqlalchemy.text(f'CREATE SCHEMA "{schema}"'))
        SessionStore(schema_url(server, schema)).close()
        dumped = schema_dump(server, schema)
        assert dumped is not None
        assert "CREATE TABLE" in template.sql
        assert dumped.replace(schema, "<schema>") == template.sql.replace(template.name, "<schema>")
    finally:
        with admin.begin() as connection:
            connection.execute(sqlalchemy.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


def test_only_an_untouched_sqlite_database_is_filled(
    tmp_path: Path, migrated_templates: Templates, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MIGRATE_EACH_VARIABLE, raising=False)
    fresh = tmp_path / "fresh.db"
    assert migrated_templates.fill_if_untouched(f"sqlite:///{fresh}")
    assert sqlite_objects(fresh) == sqlite_objects(migrated_templates.sqlite_template().path)
    own = tmp_path / "own.db"
    engine = sqlalchemy.create_engine(f"sqlite:///{own}")
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE app (x INTEGER)")
    engine.dispose()
    assert not migrated_templates.fill_if_untouched(f"sqlite:///{own}")
    assert not migrated_templates.fill_if_untouched(f"sqlite:///{tmp_path / 'missing' / 'x.db'}")
    engine = sqlalchemy.create_engine(f"sqlite:///{own}")
    with engine.connect() as connection:
        names = connection.exec_driver_sql("SELECT name FROM sqlite_master").scalars().all()
    engine.dispose()
    assert names == ["app"]  # the test's own database, as it made it


def test_only_an_untouched_postgres_schema_is_filled(
    postgres_url: str, migrated_templates: Templates, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MIGRATE_EACH_VARIABLE, raising=False)
    server = make_url(postgres_server_url()).set(drivername="postgresql+psycopg")
    if migrated_templates.postgres_template(server).sql is None:
        pytest.skip("no pg_dump: each schema is migrated (the plain path)")
    assert migrated_templates.fill_if_untouched(postgres_url)
    assert not migrated_templates.fill_if_untouched(postgres_url)  # now it holds memstore's
    store = SessionStore(postgres_url)
    try:
        assert store.append("s", HELLO).turn.to_json() == HELLO
    finally:
        store.close()
    schema = f"memstore_tpl_own_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(server)
    try:
        with admin.begin() as connection:
            connection.execute(sqlalchemy.text(f'CREATE SCHEMA "{schema}"'))
            connection.execute(sqlalchemy.text(f'CREATE TABLE "{schema}".app (x integer)'))
        assert not migrated_templates.fill_if_untouched(schema_url(server, schema))
        with admin.connect() as connection:
            tables = connection.execute(
                sqlalchemy.text("SELECT tablename FROM pg_tables WHERE schemaname = :s"),
                {"s": schema},
            )
            assert [row[0] for row in tables] == ["app"]
    finally:
        with admin.begin() as connection:
            connection.execute(sqlalchemy.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()
