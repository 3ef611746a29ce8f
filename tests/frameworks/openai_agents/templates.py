"""Fresh databases already migrated, for the adopted advanced-session tests, which open one or
more new databases in each of their 179 cases x 4 variants: copying a migrated database is much
cheaper than migrating a new one, above all a PostgreSQL schema.

Each test still gets a database of its own: a copy of a template migrated once per test run
(SQLite: the file; PostgreSQL: the schema's `pg_dump`, replayed into a new schema). Without
`pg_dump`, a PostgreSQL schema is migrated as before. tests/frameworks/test_advanced_templates.py
checks that a copy is the database a migration makes."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy
from sqlalchemy.engine import URL

from memstore import SessionStore

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
            return cls(name, _dumped(server, name))
        finally:
            with engine.begin() as connection:
                connection.execute(sqlalchemy.text(f'DROP SCHEMA "{name}" CASCADE'))
            engine.dispose()

    def create(self, connection: sqlalchemy.Connection, schema: str) -> None:
        """Create `schema`, migrated when the template has its SQL."""
        connection.execute(sqlalchemy.text(f'CREATE SCHEMA "{schema}"'))
        if self.sql is not None:
            connection.exec_driver_sql(self.sql.replace(f'"{self.name}"', f'"{schema}"'))


def schema_url(server: URL, schema: str) -> str:
    """The server's URL whose connections see `schema` first."""
    url = server.update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


def _dumped(server: URL, schema: str) -> str | None:
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
