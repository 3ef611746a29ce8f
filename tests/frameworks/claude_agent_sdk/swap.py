"""The swap of the adopted tests' reference class: where they built the SDK's
`InMemorySessionStore()` (or subclassed it), they use `store_class`, a `MemstoreSessionStore`
whose constructor takes no argument and binds it to the test's store (conftest.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from memstore.integrations._history import AnyStore
from memstore.integrations.claude_agent_sdk import MemstoreSessionStore
from tests.framework_stores import maybe


def store_class(store: AnyStore) -> type[MemstoreSessionStore]:
    """`MemstoreSessionStore` on `store`, constructed as `InMemorySessionStore()` is: every
    instance of one test shares the test's new database (an InMemorySessionStore's are separate,
    but no adopted test makes two)."""

    class InMemorySessionStoreSwapped(MemstoreSessionStore):
        """MemstoreSessionStore on the test's store, made without arguments."""

        def __init__(self) -> None:
            super().__init__(store)

    return InMemorySessionStoreSwapped


def emptied(
    store_class: Callable[[], MemstoreSessionStore],
) -> Callable[[], Awaitable[MemstoreSessionStore]]:
    """An async factory of `store_class` instances on an emptied database: the SDK's
    conformance harness makes a store for each contract and expects it empty, as a new
    InMemorySessionStore is, while the swapped class shares the test's database."""

    async def make() -> MemstoreSessionStore:
        adapter = store_class()
        store = adapter.store
        for session_id in await maybe(store.list_sessions(), store):
            await maybe(store.delete_session(session_id), store)
        return adapter

    return make
