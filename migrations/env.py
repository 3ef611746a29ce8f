"""Alembic environment for memstore.

The database comes from, in order: a connection handed in by memstore itself, `-x url=...` on
the alembic command line, the `MEMSTORE_DB` environment variable, `sqlalchemy.url` in
alembic.ini, and finally memstore's default (`sqlite:///memstore.db`).
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Connection

from memstore.store.engine import DEFAULT_URL, WRITE, create_store_engine
from memstore.store.migrate import (
    check_foreign_keys,
    include_name,
    include_object_on,
    sqlite_foreign_keys_off,
)
from memstore.store.tables import metadata

config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=include_name,
        include_object=include_object_on(connection.dialect.name),
    )
    with context.begin_transaction():
        context.run_migrations()


def _url() -> str:
    return (
        context.get_x_argument(as_dictionary=True).get("url")
        or os.environ.get("MEMSTORE_DB")
        or config.get_main_option("sqlalchemy.url")
        or DEFAULT_URL
    )


def run_migrations_online() -> None:
    """Migrate through memstore's connection, or open one from the configured URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_store_engine(_url())
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
    context.configure(url=_url(), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
