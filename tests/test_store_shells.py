"""The sync and async stores (and handles) are two shells of one definition: they cannot drift.

Each operation is written once (`StoreBase`, `HandleBase`); these tests hold the two flavours to
the same public names, parameters and docstrings, so that a method added to one shell only, or
a signature changed in one place, fails here.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

import pytest

from memstore import EventLoopError, ReadOnlyStoreError, SessionStore
from memstore.store.aio import AsyncSessionHandle, AsyncSessionStore
from memstore.store.base import StoreBase
from memstore.store.handle import HandleBase
from memstore.store.migrate import head_revision
from memstore.store.opening import Opening
from memstore.store.operation import Operation
from memstore.store.sync import SessionHandle

ONLY_SYNC = {"__enter__", "__exit__"}
ONLY_ASYNC = {"__aenter__", "__aexit__", "aclose", "open"}
"""How the flavours differ on purpose: how a store is entered and left, and the async store's
`open` (its constructor cannot await the migration)."""
NOT_COROUTINES = {"transaction"}
"""Async, but not coroutine functions: `async with store.transaction(...)`."""


def public_methods(cls: type) -> dict[str, Any]:
    """A class's public methods (and context-manager dunders), as its users read them."""
    names = {name for name in dir(cls) if not name.startswith("_")}
    names |= {name for name in ONLY_SYNC | ONLY_ASYNC if hasattr(cls, name)}
    return {name: getattr(cls, name) for name in names if callable(getattr(cls, name))}


def parameters(method: Any) -> list[tuple[str, Any, Any]]:
    """What a caller may pass: each parameter's name, kind and default (self left out)."""
    listed = list(inspect.signature(method).parameters.values())[1:]
    return [(p.name, p.kind, p.default) for p in listed]


def drift(sync: type, async_: type) -> list[str]:
    """Every way the async class differs from the sync one other than by design."""
    ours, theirs = public_methods(sync), public_methods(async_)
    found = [f"only on {sync.__name__}: {n}" for n in sorted(set(ours) - set(theirs) - ONLY_SYNC)]
    found += [
        f"only on {async_.__name__}: {n}" for n in sorted(set(theirs) - set(ours) - ONLY_ASYNC)
    ]
    for name in sorted(set(ours) & set(theirs)):
        if parameters(ours[name]) != parameters(theirs[name]):
            found.append(f"{name}: parameters differ")
        if inspect.getdoc(ours[name]) != inspect.getdoc(theirs[name]):
            found.append(f"{name}: docstrings differ")
        if inspect.iscoroutinefunction(ours[name]):
            found.append(f"{name}: a coroutine on {sync.__name__}")
        shared = ours[name] is theirs[name]  # the base's, without I/O (`branch_from`)
        coroutine = not shared and name not in NOT_COROUTINES and not name.startswith("__")
        if coroutine and not inspect.iscoroutinefunction(theirs[name]):
            found.append(f"{name}: not a coroutine on {async_.__name__}")
    return found


def test_the_two_stores_have_the_same_operations_parameters_and_docstrings() -> None:
    assert drift(SessionStore, AsyncSessionStore) == []


def test_the_two_handles_have_the_same_operations_parameters_and_docstrings() -> None:
    assert drift(SessionHandle, AsyncSessionHandle) == []


def test_the_two_stores_take_their_options_from_one_constructor() -> None:
    """An option is written once (`Opening`): a shell with its own constructor could drift, as
    each had to be given `tenant` separately."""
    for shell in (SessionStore, AsyncSessionStore):
        assert inspect.getattr_static(shell, "__init__") is Opening.__dict__["__init__"], shell
    assert [name for name, _, _ in parameters(SessionStore.__init__)] == [
        "url",
        "migrators",
        "auto_migrate",
        "read_only",
        "schema",
        "redact",
        "tenant",
    ]


def test_a_method_one_shell_alone_has_or_spells_differently_is_drift() -> None:
    class Sync:
        def head(self, session_id: str) -> None:
            """The head."""

        def stats(self) -> None:
            """Totals."""

    class Async:
        async def head(self, session: str) -> None:
            """The head."""

        async def search(self) -> None:
            """Search."""

    assert drift(Sync, Async) == [
        "only on Sync: stats",
        "only on Async: search",
        "head: parameters differ",
    ]


@pytest.mark.parametrize(
    ("base", "shells"),
    [
        (StoreBase, (SessionStore, AsyncSessionStore)),
        (HandleBase, (SessionHandle, AsyncSessionHandle)),
    ],
)
def test_every_operation_of_the_base_is_a_plain_method_of_each_shell(
    base: type, shells: tuple[type, type]
) -> None:
    operations = {n for n in dir(base) if isinstance(inspect.getattr_static(base, n), Operation)}
    assert len(operations) >= (20 if base is StoreBase else 5)
    for name in operations:
        program = inspect.getattr_static(base, name).program
        sync, async_ = (getattr(shell, name) for shell in shells)
        assert sync.__doc__ == async_.__doc__ == program.__doc__, name
        assert parameters(sync) == parameters(program), name
        assert not inspect.iscoroutinefunction(sync), name
        assert inspect.iscoroutinefunction(async_), name


def test_the_async_store_migrates_and_reads_its_schema_revision(database_url: str) -> None:
    async def exercise() -> list[str | None]:
        async with AsyncSessionStore(database_url) as store:
            seen = [await store.schema_revision()]
            await store.downgrade_schema("base")
            seen.append(await store.schema_revision())
            await store.upgrade_schema("0001")
            seen.append(await store.schema_revision())
            await store.upgrade_schema()
            seen.append(await store.schema_revision())
            await store.append("s", {"role": "user", "blocks": [{"kind": "text", "text": "hi"}]})
            seen.append(await store.head("s") and "appended")
            return seen

    assert asyncio.run(exercise()) == [head_revision(), None, "0001", head_revision(), "appended"]
    with SessionStore(database_url, auto_migrate=False) as store:
        assert store.schema_revision() == head_revision()


def test_a_read_only_async_store_refuses_to_migrate(database_url: str) -> None:
    SessionStore(database_url).close()

    async def exercise() -> None:
        async with AsyncSessionStore(database_url, read_only=True) as store:
            assert await store.schema_revision() == head_revision()
            with pytest.raises(ReadOnlyStoreError, match="upgrading the schema to 'head'"):
                await store.upgrade_schema()
            with pytest.raises(ReadOnlyStoreError, match="downgrading the schema to 'base'"):
                await store.downgrade_schema("base")
            assert await store.schema_revision() == head_revision()

    asyncio.run(exercise())


def test_an_async_store_is_closed_by_aclose_and_async_with(sqlite_url: str) -> None:
    async def exercise() -> None:
        store = await AsyncSessionStore(sqlite_url).open()
        assert await store.list_sessions() == []
        await store.aclose()
        async with AsyncSessionStore(sqlite_url) as entered:
            assert await entered.list_sessions() == []

    asyncio.run(exercise())


def test_five_loops_at_once_on_one_async_store_raise_the_loop_error(database_url: str) -> None:
    """One session, five threads each running its own loop at once: without the rule, one of
    them hung forever on another loop's lock and the rest failed with asyncio's RuntimeError."""
    store = AsyncSessionStore(database_url)
    turn = {"role": "user", "blocks": [{"kind": "text", "text": "hi"}]}
    inside = threading.Barrier(5)  # every loop is running before any thread calls the store
    outcomes: list[str] = []

    def work() -> None:
        async def calls() -> None:
            inside.wait(timeout=30)
            handle = await store.session("shared")
            for _ in range(10):
                await handle.append(turn)
                await asyncio.sleep(0)

        try:
            asyncio.run(calls())
            outcomes.append("ran")
        except EventLoopError as error:
            outcomes.append("refused" if "one asyncio event loop" in str(error) else str(error))

    threads = [threading.Thread(target=work, daemon=True) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    assert sorted(outcomes) == ["ran"] + ["refused"] * 4

    async def after_close() -> int:  # the loop that ran it is closed: another may take it
        async with store:
            return len(await store.load_path("shared"))

    assert asyncio.run(after_close()) == 10


def test_an_async_store_outside_asyncio_raises_the_loop_rule(sqlite_url: str) -> None:
    import trio

    async def under_trio() -> None:
        await AsyncSessionStore(sqlite_url).list_sessions()

    with pytest.raises(EventLoopError, match="outside any asyncio loop"):
        trio.run(under_trio)
