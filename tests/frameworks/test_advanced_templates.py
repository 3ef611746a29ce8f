"""The advanced-session tests' databases copied from a migrated template (templates.py) are the
databases a migration makes: the same tables, columns, indexes and version, on SQLite and
PostgreSQL; a store opens a copy without migrating it, and a copy is a database of its own."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import sqlalchemy
from sqlalchemy.engine import URL, make_url

from memstore import SessionStore
from memstore.store.names import VERSION_TABLE
from tests.conftest import postgres_server_url
from tests.frameworks.openai_agents.templates import PostgresTemplate, SqliteTemplate, schema_url

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
