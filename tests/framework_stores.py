"""Running an async test body of a framework adapter on a SessionStore or an AsyncSessionStore."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from memstore import SessionStore
from memstore.integrations._history import AnyStore

Body = Callable[[AnyStore], Awaitable[None]]


def run_on_store(flavour: str, database_url: str, body: Body) -> None:
    """Run `body` in a new event loop with a sync ("sync") or async store on the database."""

    async def main() -> None:
        if flavour == "sync":
            store: Any = SessionStore(database_url)
        else:
            from memstore.store.aio import AsyncSessionStore

            store = AsyncSessionStore(database_url)
        try:
            await body(store)
        finally:
            await maybe(store.close())

    asyncio.run(main())


async def maybe(value: Any) -> Any:
    """`value`, awaited if the store's method was a coroutine (the async store's)."""
    return await value if asyncio.iscoroutine(value) else value
