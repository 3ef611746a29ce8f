"""Running an async test body of a framework adapter on a SessionStore or an AsyncSessionStore,
under asyncio or trio (anyio's backends: the Claude Agent SDK tests its APIs under both)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from memstore import SessionStore
from memstore.integrations._history import AnyStore, on_store_loop
from tests.templates import Templates

Body = Callable[[AnyStore], Awaitable[None]]
Runner = Callable[[Body], None]


def run_on_store(flavour: str, database_url: str, body: Body, backend: str = "asyncio") -> None:
    """Run `body` in a new event loop of `backend` with a sync ("sync") or async store on the
    database."""

    async def main() -> None:
        if flavour == "sync":
            store: Any = SessionStore(database_url)
        else:
            from memstore.store.aio import AsyncSessionStore

            store = AsyncSessionStore(database_url)
        try:
            await body(store)
        finally:
            await maybe(store.close(), store)

    anyio.run(main, backend=backend)


def runner_on_migrated(flavour: str, database_url: str, templates: Templates) -> Runner:
    """`run_on_store` on this flavour and database, the database filled at the first run from
    the run's migrated template if nothing has touched it yet (tests/templates.py): what the
    store's first open would migrate it to, made cheaply."""
    filled: list[bool] = []

    def run(body: Body, backend: str = "asyncio") -> None:
        if not filled:
            filled.append(templates.fill_if_untouched(database_url))
        run_on_store(flavour, database_url, body, backend)

    return run


async def maybe(value: Any, store: Any = None) -> Any:
    """`value`, awaited if the store's method was a coroutine (the async store's); given the
    store, on the loop it runs on (its own, under trio)."""
    if not asyncio.iscoroutine(value):
        return value
    if store is None or isinstance(store, SessionStore):
        return await value
    return await on_store_loop(store, lambda: value)
