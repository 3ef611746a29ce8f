"""Fresh databases already migrated, for the tests' stores: the `store` and `open_store`
fixtures (tests/conftest.py), the framework adapters' stores (tests/frameworks/conftest.py,
tests/framework_stores.py) and the adopted advanced-session tests (which open one or more new
databases in each of their 179 cases x 4 variants). Copying a migrated database is much cheaper
than migrating a new one through all of memstore's revisions, above all a PostgreSQL schema on a
busy machine (about 0.2 s against 2 s a schema, measured with the machine shared).

Each test still gets a database of its own: a copy of a template migrated once per test run
(SQLite: the file; PostgreSQL: the schema's `pg_dump`, replayed into a new schema). Without
`pg_dump`, a PostgreSQL schema is migrated as before. Only a database nothing has touched yet
is filled from a template (`fill_if_untouched`): a test that made tables or a file of its own
first, or that opens read-only, meets the real migration. The migration tests
(tests/test_migrations.py) always migrate for real, and tests/test_templates.py checks that a
copy is the database a migration makes, so a stale template cannot hide a migration bug."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy
from sqlalchemy.engine import URL, make_url

from memstore import SessionStore

MIGRATE_EACH_VARIABLE = "MEMSTORE_TEST_MIGRATE_EACH"
"""Set (to anything), no test database is copied from a template: each one migrates."""

_SKIPPED_DUMP_LINES = ("SET ", "SELECT pg_catalog.set_config", "\\", "CREATE SCHEMA ")


@dataclass
class SqliteTemplate:
    """A migrated SQLite file, copied for each new database."""

    path: Path

    @classmethod
    def made_in(cls, directory: Path) -> SqliteTemplate:
        path = directory / "template.db"
        SessionStore(f"sqlite:///{path}").close()  # closing checkpoints the WAL into the file
        return cls(path)

    def copy_to(self, path: Path) -> None:
        shutil.copyfile(self.path, path)


@dataclass
class PostgresTemplate:
    """A migrated schema's DDL and rows (`pg_dump`, schema-qualified), replayed into each new
    schema under that schema's name; `sql` None: no `pg_dump`, each schema migrates."""

    name: str
    sql: str | None

    @classmethod
    def made_on(cls, server: URL) -> PostgresTemplate:
        name = f"memstore_tpl_{uuid.uuid4().hex}"
        engine = sqlalchemy.create_engine(server)
        try:
            with engine.begin() as connection:
                connection.execute(sqlalchemy.text(f'CREATE SCHEMA "{name}"'))
            SessionStore(schema_url(server, name)).close()
            return cls(name, schema_dump(server, name))
        finally:
            with engine.begin() as connection:
                connection.execute(sqlalchemy.text(f'DROP SCHEMA "{name}" CASCADE'))
            engine.dispose()

    def create(self, connection: sqlalchemy.Connection, schema: str) -> None:
        """Create `schema`, migrated when the template has its SQL."""
        connection.execute(sqlalchemy.text(f'CREATE SCHEMA "{schema}"'))
        self.fill(connection, schema)

    def fill(self, connection: sqlalchemy.Connection, schema: str) -> None:
        """Replay the template's objects and rows into the existing `schema`, if it has them."""
        if self.sql is not None:
            connection.exec_driver_sql(self.sql.replace(f'"{self.name}"', f'"{schema}"'))


def schema_url(server: URL, schema: str) -> str:
    """The server's URL whose connections see `schema` first."""
    url = server.update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


def schema_dump(server: URL, schema: str) -> str | None:
    """The schema's objects and rows as SQL naming it (quoted), or None without `pg_dump`."""
    if shutil.which("pg_dump") is None:
        return None
    libpq = server.set(drivername="postgresql").render_as_string(hide_password=False)
    parts = []
    for only in ("--schema-only", "--data-only"):
        command = ["pg_dump", "--no-owner", "--no-privileges", "--inserts", only]
        done = subprocess.run(
            [*command, "--quote-all-identifiers", "-n", schema, libpq],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            return None
        parts.append(done.stdout)
    lines = "\n".join(parts).splitlines()
    return "\n".join(line for line in lines if not line.startswith(_SKIPPED_DUMP_LINES))


@dataclass
class Templates:
    """The migrated databases new ones are copied from, made once per run on first use."""

    directory: Path
    sqlite: SqliteTemplate | None = None
    postgres: PostgresTemplate | None = None

    def sqlite_template(self) -> SqliteTemplate:
        if self.sqlite is None:
            self.sqlite = SqliteTemplate.made_in(self.directory)
        return self.sqlite

    def postgres_template(self, server: Any) -> PostgresTemplate:
        if self.postgres is None:
            self.postgres = PostgresTemplate.made_on(server)
        return self.postgres

    def fill_if_untouched(self, url: str) -> bool:
        """Make the database at `url` (a test's: a SQLite file, or a PostgreSQL schema named by
        the URL's `search_path`) a copy of the migrated template, if nothing has made it or
        anything in it yet; whether it did. A database a test has already touched is left to
        the store's own migration, and so is every database when `$MEMSTORE_TEST_MIGRATE_EACH`
        is set (the suite as it ran before templates: each test's database migrated)."""
        if os.environ.get(MIGRATE_EACH_VARIABLE):
            return False
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite":
            path = Path(parsed.database or "")
            if not parsed.database or parsed.database == ":memory:" or path.exists():
                return False
            if not path.parent.is_dir():
                return False
            self.sqlite_template().copy_to(path)
            return True
        schema = _search_path(parsed)
        if schema is None:
            return False
        server = parsed.set(drivername="postgresql+psycopg", query={})
        template = self.postgres_template(server)
        if template.sql is None:
            return False
        engine = sqlalchemy.create_engine(server)
        try:
            with engine.begin() as connection:
                if _has_objects(connection, schema):
                    return False
                template.fill(connection, schema)
            return True
        finally:
            engine.dispose()


def _search_path(url: URL) -> str | None:
    """The one schema a test URL's `options=-csearch_path=...` names, if it names one."""
    options = url.query.get("options")
    if not isinstance(options, str) or not options.startswith("-csearch_path="):
        return None
    schema = options.removeprefix("-csearch_path=")
    return schema if schema and "," not in schema and " " not in schema else None


def _has_objects(connection: sqlalchemy.Connection, schema: str) -> bool:
    """Whether `schema` is missing or holds any relation, type or function (a schema of the
    tests' `postgres_url` starts empty)."""
    found = connection.execute(
        sqlalchemy.text(
            "SELECT NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = :s)"
            " OR EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = :s)"
            " OR EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = :s)"
            " OR EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"
            " WHERE n.nspname = :s)"
        ),
        {"s": schema},
    ).scalar_one()
    return bool(found)
