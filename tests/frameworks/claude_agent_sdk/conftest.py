"""The Claude Agent SDK's own tests on memstore: `store_class` stands where the tests built the
SDK's reference `InMemorySessionStore` (swap.py), and the SDK's `anyio_backend` runs them under
asyncio and trio. Four variants cover each pair of the three choices (store flavour, database,
event loop) once: a SessionStore on SQLite under asyncio, an AsyncSessionStore on PostgreSQL
under asyncio, a SessionStore on PostgreSQL under trio, an AsyncSessionStore on SQLite under trio
(under trio an AsyncSessionStore runs on an asyncio loop of its own, in a thread)."""

from __future__ import annotations

import pytest

from tests.frameworks.claude_agent_sdk.swap import store_class as swapped_class
from tests.frameworks.conftest import OnStore
from tests.templates import Templates

VARIANTS = [
    "sync-sqlite-asyncio",
    "async-postgres-asyncio",
    "sync-postgres-trio",
    "async-sqlite-trio",
]
"""Store flavour, database and event loop of each variant."""


@pytest.fixture(params=VARIANTS)
def variant(request: pytest.FixtureRequest) -> list[str]:
    """This test's store flavour, database and event loop."""
    return str(request.param).split("-")


@pytest.fixture
def anyio_backend(variant: list[str]) -> str:
    """The event loop the SDK's anyio tests run under (the SDK's conftest: both)."""
    return variant[2]


@pytest.fixture
def store_class(
    request: pytest.FixtureRequest, variant: list[str], migrated_templates: Templates
) -> OnStore:
    """The class to construct where the tests constructed InMemorySessionStore (made in the
    test's event loop by tests/frameworks/conftest.py)."""
    flavour, database = variant[0], variant[1]
    url = request.getfixturevalue(f"{database}_url")
    return OnStore.migrated(flavour, url, swapped_class, migrated_templates)
