"""Shared test helpers: the fixture files written by the original JavaScript, and databases."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from hypothesis import settings
from sqlalchemy.engine import make_url

from memstore.store import SessionStore
from tests.templates import Templates

# Tests assert behaviour, never speed (benchmarks/ measures that): no per-example deadline, which
# a busy machine would turn into a spurious failure.
settings.register_profile("memstore", deadline=None)
settings.load_profile("memstore")

FIXTURES = Path(__file__).parent / "fixtures"
VECTORS = FIXTURES / "vectors"
LEGACY = FIXTURES / "legacy-jsonl"
LEGACY_FILES = sorted(LEGACY.glob("*.jsonl"))


def read_vectors(name: str) -> list[dict[str, Any]]:
    """The records of one vector file (plain `json` is fine here: vectors use no exotic values)."""
    lines = (VECTORS / name).read_text(encoding="utf-8").split("\n")
    return [json.loads(line) for line in lines if line]


def expected_for(path: Path) -> dict[str, Any]:
    """The expected results the original implementation computed for a legacy file."""
    result: dict[str, Any] = json.loads((LEGACY / "expected" / f"{path.stem}.json").read_text())
    return result


# --- databases ----------------------------------------------------------------------------------

POSTGRES_URL_VARIABLE = "MEMSTORE_TEST_POSTGRES_URL"


def postgres_server_url() -> str:
    """The PostgreSQL server the tests use; skips without one, but fails in CI."""
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{POSTGRES_URL_VARIABLE} is not set: CI must run the PostgreSQL tests")
        pytest.skip(f"set {POSTGRES_URL_VARIABLE} to run the PostgreSQL tests")
    return url


@pytest.fixture
def postgres_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A URL whose connections see a fresh, empty schema of their own, dropped afterwards.

    `$MEMSTORE_READ_URL` names a login of its own that can only read that schema's tables (the
    docs' recipe (docs/sql.md)), so that read-only queries run as it, as memstore requires."""
    server = make_url(postgres_server_url()).set(drivername="postgresql+psycopg")
    schema = f"memstore_test_{uuid.uuid4().hex[:16]}"
    reader = f"{schema}_reader"
    admin = sqlalchemy.create_engine(server)
    with admin.begin() as connection:
        for statement in reader_recipe(schema, reader):
            connection.execute(sqlalchemy.text(statement))
    try:
        url = server.update_query_dict({"options": f"-csearch_path={schema}"})
        reader_url = url.set(username=reader, password=None)
        monkeypatch.setenv("MEMSTORE_READ_URL", reader_url.render_as_string(hide_password=False))
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as connection:
            connection.execute(sqlalchemy.text(f'DROP SCHEMA "{schema}" CASCADE'))
            connection.execute(sqlalchemy.text(f'DROP OWNED BY "{reader}"'))
            connection.execute(sqlalchemy.text(f'DROP ROLE "{reader}"'))
        admin.dispose()


def reader_recipe(schema: str, reader: str) -> list[str]:
    """The docs' recipe (docs/sql.md) for a login that reads only memstore's tables in `schema`."""
    return [
        f'CREATE SCHEMA "{schema}"',
        f'CREATE ROLE "{reader}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION',
        f'GRANT USAGE ON SCHEMA "{schema}" TO "{reader}"',
        f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{reader}"',
        f'ALTER DEFAULT PRIVILEGES IN SCHEMA "{schema}" GRANT SELECT ON TABLES TO "{reader}"',
        f"ALTER ROLE \"{reader}\" SET temp_file_limit = '1GB'",
    ]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A URL of a fresh SQLite file."""
    return f"sqlite:///{tmp_path / 'memstore.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str:
    """Each test that asks for it runs once on SQLite and once on PostgreSQL."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


class Blocking:
    """Runs an async object's coroutine methods to completion, so one test body covers both."""

    def __init__(self, target: Any, runner: asyncio.Runner) -> None:
        self._target = target
        self._runner = runner

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attribute(*args, **kwargs)
            if inspect.isawaitable(result):
                result = self._runner.run(_awaited(result))
            if type(result).__name__ == "AsyncSessionHandle":
                return Blocking(result, self._runner)
            return result

        return call


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


@pytest.fixture(scope="session")
def migrated_templates(tmp_path_factory: pytest.TempPathFactory) -> Templates:
    """The migrated databases the tests' fresh databases are copied from (tests/templates.py):
    made once per run on first use, read only."""
    return Templates(tmp_path_factory.mktemp("migrated-templates"))


_MIGRATION_OPTIONS = frozenset({"read_only", "schema", "auto_migrate", "migrators"})
"""Store options under which a first open does not simply migrate the test's database to the
head: such an open meets the database as the test left it (see `open_store`)."""


@pytest.fixture(params=["sync", "async"])
def open_store(
    request: pytest.FixtureRequest, database_url: str, migrated_templates: Templates
) -> Iterator[Callable[..., Any]]:
    """Opens stores on this test's database: a SessionStore, or an AsyncSessionStore driven
    through `Blocking` (typed as SessionStore, since it answers the same calls).

    The first plain open of a database nothing has touched yet finds it already migrated: a
    copy of the run's migrated template (tests/templates.py), which is what migrating it would
    make, at a fraction of the cost."""
    opened: list[Any] = []
    runner = asyncio.Runner()
    filled: list[bool] = []

    def open_(**kwargs: Any) -> SessionStore:
        if not filled and not _MIGRATION_OPTIONS & kwargs.keys():
            filled.append(migrated_templates.fill_if_untouched(database_url))
        if request.param == "sync":
            store: Any = SessionStore(database_url, **kwargs)
        else:
            from memstore.store.aio import AsyncSessionStore

            store = Blocking(AsyncSessionStore(database_url, **kwargs), runner)
            store.open()
        opened.append(store)
        return store  # type: ignore[no-any-return]

    yield open_
    for store in opened:
        store.close()
    runner.close()


@pytest.fixture
def store(open_store: Callable[..., SessionStore]) -> SessionStore:
    """A store on a fresh database, sync or async, SQLite or PostgreSQL."""
    return open_store()
