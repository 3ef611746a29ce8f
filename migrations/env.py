"""Alembic environment for memstore.

The database comes from, in order: a connection handed in by memstore itself, `-x url=...` on
the alembic command line, the `MEMSTORE_DB` environment variable, `sqlalchemy.url` in
alembic.ini, and finally memstore's default (`sqlite:///memstore.db`). A PostgreSQL schema for
memstore comes from memstore's connection, or `-x schema=...`, or `MEMSTORE_SCHEMA`.

The revision is kept in `memstore_alembic_version`, never in the application's `alembic_version`;
an upgrade or downgrade first moves a revision an earlier memstore kept there, and a downgrade to
base removes memstore's version table with the rest.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Connection

from memstore.store import SCHEMA_VARIABLE
from memstore.store.engine import DEFAULT_URL, WRITE, create_store_engine
from memstore.store.migrate import (
    adopt_legacy_version,
    check_foreign_keys,
    drop_empty_version_table,
    include_name,
    include_object_on,
    schema_of,
    sqlite_foreign_keys_off,
)
from memstore.store.names import VERSION_TABLE
from memstore.store.tables import metadata

config = context.config


def _changes_the_database() -> bool:
    """Whether this command migrates or stamps: only those name a destination revision
    (`current`, `check` and autogenerate only look)."""
    try:
        context.get_revision_argument()
    except KeyError:
        return False
    return True


def _run(connection: Connection) -> None:
    changing = _changes_the_database()
    if changing:
        adopt_legacy_version(connection)
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=include_name,
        include_object=include_object_on(connection.dialect.name),
        version_table=VERSION_TABLE,
        version_table_schema=schema_of(connection),
    )
    with context.begin_transaction():
        context.run_migrations()
        if changing:
            drop_empty_version_table(connection)


def _url() -> str:
    return (
        context.get_x_argument(as_dictionary=True).get("url")
        or os.environ.get("MEMSTORE_DB")
        or config.get_main_option("sqlalchemy.url")
        or DEFAULT_URL
    )


def _schema() -> str | None:
    return (
        context.get_x_argument(as_dictionary=True).get("schema")
        or os.environ.get(SCHEMA_VARIABLE)
        or None
    )


def run_migrations_online() -> None:
    """Migrate through memstore's connection, or open one from the configured URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_store_engine(_url(), schema=_schema())
    try:
        with (
            engine.connect().execution_options(**{WRITE: True}) as fresh,
            sqlite_foreign_keys_off(fresh),
        ):
            _run(fresh)
            check_foreign_keys(fresh)
            fresh.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    context.configure(
        url=_url(),
        target_metadata=metadata,
        literal_binds=True,
        version_table=VERSION_TABLE,
        version_table_schema=_schema(),
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
