"""The swap of the adopted tests' reference class: where they built the SDK's
`SQLiteSession(session_id, db_path, session_settings=...)`, they call a `SessionFactory`, which
builds a `MemstoreSession` on the test's store instead (conftest.py's `make_session`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from agents.memory import SessionSettings

from memstore import SessionStore
from memstore.integrations._history import AnyStore
from memstore.integrations.openai_agents import MemstoreSession


class SessionUnderTest(MemstoreSession):
    """A MemstoreSession answering the reference's `close()`, which the tests call at their end:
    there is nothing to release per session (the fixture closes the test's store after it)."""

    def close(self) -> None:
        """Nothing: the session holds no connection of its own."""


class SessionFactory(Protocol):
    """`SQLiteSession`'s constructor, as the adopted tests call it."""

    def __call__(
        self,
        session_id: str,
        db_path: object = ...,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = ...,
    ) -> SessionUnderTest: ...


def session_factory(store: AnyStore) -> SessionFactory:
    """Sessions on `store`: every session of one test shares the test's new database, as the
    reference's sessions of one `db_path` shared a file (so `db_path` itself is not used)."""

    def make(
        session_id: str,
        db_path: object = ":memory:",
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> SessionUnderTest:
        del db_path
        return SessionUnderTest(session_id, store, session_settings=session_settings)

    return make


class SyncStoreSession(SessionUnderTest):
    """Where the SDK's tests chose its `SQLiteSession`: a MemstoreSession on a SessionStore."""


class AsyncStoreSession(SessionUnderTest):
    """Where the SDK's tests chose its `AsyncSQLiteSession`: a MemstoreSession on an
    AsyncSessionStore (the tests' `isinstance` checks keep choosing the async paths for it)."""


def flavoured(session_id: str, **options: Any) -> Callable[[AnyStore], SessionUnderTest]:
    """A session `session_id` on a store: `AsyncStoreSession` on an AsyncSessionStore, else
    `SyncStoreSession`, as the SDK's tests paired `AsyncSQLiteSession` and `SQLiteSession`."""

    def make(store: AnyStore) -> SessionUnderTest:
        kind = SyncStoreSession if isinstance(store, SessionStore) else AsyncStoreSession
        return kind(session_id, store, **options)

    return make


CURRENT_STORES: list[AnyStore] = []
"""The store of the running test's `sqlite_store` fixture (conftest.py), which `SQLiteSession`
opens its sessions on."""


class SQLiteSession(SessionUnderTest):
    """The SDK's `SQLiteSession(session_id, db_path, session_settings=...)` constructor, on
    the running test's store (its `sqlite_store` fixture): the tests' own subclasses of
    SQLiteSession, which override its public methods, subclass this one (`db_path` unused)."""

    def __init__(
        self,
        session_id: str,
        db_path: object = ":memory:",
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        del db_path
        if not CURRENT_STORES:
            raise RuntimeError(
                "SQLiteSession stands for a MemstoreSession on the test's store: "
                "the test takes the `sqlite_store` fixture"
            )
        super().__init__(session_id, CURRENT_STORES[-1], session_settings=session_settings)


def current(store: AnyStore) -> AnyStore:
    """Make `store` the one `SQLiteSession` opens sessions on, until the test ends."""
    CURRENT_STORES.append(store)
    return store
