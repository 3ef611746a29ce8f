"""What the adopted `test_advanced_sqlite_session.py` runs on: `AdvancedSQLiteSession`, the
reference class swapped for memstore's `MemstoreAdvancedSession` on the store of the test's
variant (sync or async store, SQLite or PostgreSQL), with the SDK's constructor. A child
process a test starts opens the database its parent's `db_path` stands for (`URL_SUFFIX`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy.engine import make_url

from memstore import SessionStore
from memstore.integrations.openai_advanced import MemstoreAdvancedSession
from tests.conftest import postgres_server_url
from tests.templates import Templates, schema_url

VARIANTS = ["sync-sqlite", "async-sqlite", "sync-postgres", "async-postgres"]
URL_SUFFIX = ".memstore-url"
"""Beside a test's `db_path`: the URL of the PostgreSQL schema that path stands for, so that
the test's child processes open the parent's database (on SQLite the path is the database)."""


@dataclass
class Databases:
    """The databases of one test: one per `db_path` the test names (each `:memory:` session
    a fresh one, as the SDK's), all of one variant, each a copy of a migrated template
    (tests/templates.py), closed and dropped after the test."""

    flavour: str
    backend: str
    tmp_path: Path
    templates: Templates
    stores: dict[str, Any] = field(default_factory=dict)
    schemas: list[str] = field(default_factory=list)
    server: Any = None

    def store_for(self, db_path: str | Path) -> Any:
        key = str(db_path)
        if key == ":memory:":
            key = f":memory:{uuid.uuid4().hex}"
        if key not in self.stores:
            self.stores[key] = self._open(self._url(key))
        return self.stores[key]

    def _url(self, key: str) -> str:
        if self.backend == "sqlite":
            path = self.tmp_path / f"memory-{key[8:]}.db" if key.startswith(":memory:") else key
            if not Path(path).exists():  # a test's own file stays as the test made it
                self.templates.sqlite_template().copy_to(Path(path))
            return f"sqlite:///{path}"
        if self.server is None:
            self.server = make_url(postgres_server_url()).set(drivername="postgresql+psycopg")
        template = self.templates.postgres_template(self.server)
        schema = f"memstore_adv_{uuid.uuid4().hex[:16]}"
        engine = sqlalchemy.create_engine(self.server)
        with engine.begin() as connection:
            template.create(connection, schema)
        engine.dispose()
        self.schemas.append(schema)
        url = schema_url(self.server, schema)
        if not key.startswith(":memory:"):  # a path a child process may open too
            Path(key + URL_SUFFIX).write_text(url, encoding="utf-8")
        return url

    def _open(self, url: str) -> Any:
        if self.flavour == "sync":
            return SessionStore(url)
        from memstore.store.aio import AsyncSessionStore

        return AsyncSessionStore(url)

    async def aclose(self) -> None:
        """Close the async stores, on the test's event loop."""
        for store in self.stores.values():
            if not isinstance(store, SessionStore):
                await store.close()

    def close(self) -> None:
        for store in self.stores.values():
            if isinstance(store, SessionStore):
                store.close()
        if self.schemas:
            engine = sqlalchemy.create_engine(self.server)
            with engine.begin() as connection:
                for schema in self.schemas:
                    connection.execute(sqlalchemy.text(f'DROP SCHEMA "{schema}" CASCADE'))
            engine.dispose()


_CURRENT: list[Databases] = []


@pytest.fixture(params=VARIANTS, autouse=True)
def advanced_databases(
    request: pytest.FixtureRequest, tmp_path: Path, migrated_templates: Templates
) -> Iterator[Databases]:
    """Every adopted test runs on each store variant."""
    flavour, backend = request.param.split("-")
    if backend == "postgres":
        postgres_server_url()  # skips without a server (fails in CI)
    databases = Databases(flavour, backend, tmp_path, migrated_templates)
    _CURRENT.append(databases)
    try:
        yield databases
    finally:
        _CURRENT.remove(databases)
        databases.close()


class AdvancedSQLiteSession(MemstoreAdvancedSession):
    """The SDK's constructor, on the store of the running test's variant for `db_path`."""

    def __init__(
        self,
        *,
        session_id: str,
        db_path: str | Path = ":memory:",
        create_tables: bool = False,
        **kwargs: Any,
    ) -> None:
        if not _CURRENT:  # a child process of a test: a store of its own on the parent's database
            pointer = Path(str(db_path) + URL_SUFFIX)
            url = pointer.read_text(encoding="utf-8") if pointer.exists() else db_path
            super().__init__(session_id, db_path=url, create_tables=create_tables, **kwargs)
            self.db_path = db_path
            return
        store = _CURRENT[-1].store_for(db_path)
        super().__init__(session_id, store, create_tables=create_tables, **kwargs)
        self.db_path = db_path
