"""What a reader of the objects sees: useful reprs, and an async store that closes as asyncio
code expects."""

from __future__ import annotations

import asyncio

from typer.testing import CliRunner

from memstore import RunError, RunSnapshot, SessionStore, SnapshotEvent
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


def test_a_long_title_keeps_its_session_on_one_line_at_80_columns(sqlite_url: str) -> None:
    with SessionStore(sqlite_url) as store:
        for session, title in (("s", "a long title " * 100), ("t", "short")):
            store.append(session, {"role": "user", "blocks": [{"kind": "text", "text": "hi"}]})
            store.update_session(session, title=title)
    result = CliRunner().invoke(app, ["--db", sqlite_url, "sessions"], env={"COLUMNS": "80"})
    lines = result.stdout.splitlines()
    assert result.exit_code == 0
    assert len(lines) == 4, result.stdout  # header, rule, one line per session
    assert all(len(line) <= 80 for line in lines)
    assert any(line.endswith("…") for line in lines)


def test_a_snapshot_accumulator_names_its_run_not_every_turn() -> None:
    turns = [{"role": "user", "blocks": [{"kind": "text", "text": "x" * 1000}]}] * 200
    snapshot = RunSnapshot.model_validate(
        {"run_id": "r1", "session_id": "s", "phase": "streaming", "messages": turns, "model": "m"}
    )
    accumulator = SnapshotAccumulator()
    accumulator.observe(SnapshotEvent(snapshot=snapshot))
    assert repr(accumulator) == (
        "SnapshotAccumulator(run_id='r1', session_id='s', phase='streaming', model='m', "
        "messages=200, pending=0)"
    )
    failed = snapshot.model_copy(update={"phase": "faulted", "error": RunError(message="boom")})
    accumulator.observe(SnapshotEvent(snapshot=failed))
    assert repr(accumulator).endswith("messages=200, pending=0, error='boom')")
