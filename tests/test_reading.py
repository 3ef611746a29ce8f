"""What a reader of the objects sees: useful reprs, and an async store that closes as asyncio
code expects."""

from __future__ import annotations

import asyncio

from typer.testing import CliRunner

from memstore import SessionStore
from memstore.cli import app
from memstore.ledger import SnapshotAccumulator
from memstore.store.aio import AsyncSessionStore


def test_a_session_handle_names_its_store_session_and_head(database_url: str) -> None:
    with SessionStore(database_url) as store:
        node = store.append("s", {"role": "user", "blocks": [{"kind": "text", "text": "hi"}]})
        dialect = store.dialect
        assert repr(store.session("s")) == (
            f"SessionHandle(session_id='s', head={node.id!r}, store='SessionStore on {dialect}')"
        )


def test_a_snapshot_accumulator_shows_its_snapshot() -> None:
    assert repr(SnapshotAccumulator()) == "SnapshotAccumulator(snapshot=None)"


def test_an_async_store_closes_with_aclose_and_async_with(database_url: str) -> None:
    async def use() -> tuple[str, str | None]:
        async with AsyncSessionStore(database_url) as store:
            await store.append("s", {"role": "user", "blocks": [{"kind": "text", "text": "hi"}]})
        again = AsyncSessionStore(database_url)
        await again.open()
        handle = await again.session("s")
        await again.aclose()
        return repr(handle), handle.head

    shown, head = asyncio.run(use())
    assert shown.startswith(f"AsyncSessionHandle(session_id='s', head={head!r}, store=")


def test_a_search_without_hits_says_no_matches(sqlite_url: str) -> None:
    SessionStore(sqlite_url).close()
    result = CliRunner().invoke(app, ["--db", sqlite_url, "search", "nothing"])
    assert (result.exit_code, result.stdout) == (0, "no matches\n")
