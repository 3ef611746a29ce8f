# Copyright (c) 2025 OpenAI. Licensed under the MIT License: see LICENSE in this directory.
#
# Adopted by memstore from openai-agents 0.25.0,
# tests/memory/test_openai_responses_compaction_session.py (the source distribution on PyPI,
# openai_agents-0.25.0.tar.gz), under the MIT License above: the tests that construct a
# SQLiteSession under `OpenAIResponsesCompactionSession`. Changed: the reference class,
# SQLiteSession, is swapped for memstore's MemstoreSession (swap.py: the SDK's constructor, on
# the store of the test's `sqlite_store` fixture, which each adopted test takes as an argument:
# a SessionStore on SQLite and an AsyncSessionStore on PostgreSQL; the tests' own subclasses of
# SQLiteSession subclass the swapped class); the rollback-budget test's variant on the
# tests' in-memory SimpleListSession (the wrapper's other path) is dropped, its SQLiteSession
# variant kept; helpers come from this directory (responses.py, model_test_helpers.py);
# annotated for mypy and formatted by ruff. The file's other tests construct no SQLiteSession
# (the tests' in-memory sessions only): not adopted; of those that do, the ones that replace
# the reference's sqlite3 connection are left out, listed with their reason in EXCLUDED. The
# error codes disabled below: the tests' subclasses of SQLiteSession type `add_items` with a
# list (MemstoreSession: a Sequence), and EncryptedSession's signature names SessionABC, not the
# Session protocol MemstoreSession implements.
# mypy: disable-error-code="override,arg-type"
"""The OpenAI Agents SDK's own tests of its compaction wrapper over a SQLiteSession, run on
MemstoreSession."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast
from unittest.mock import AsyncMock, MagicMock, patch

import httpx2
import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner
from agents.items import TResponseInputItem
from agents.memory import (
    OpenAIResponsesCompactionSession,
    Session,
    SessionSettings,
)
from agents.testing import ScriptedModel
from openai import AsyncOpenAI

from tests.frameworks.openai_agents.model_test_helpers import get_response_obj
from tests.frameworks.openai_agents.responses import (
    get_text_message,
)
from tests.frameworks.openai_agents.swap import SQLiteSession

_CONNECTION = (
    "replaces the reference's private sqlite3 connection (`_get_connection`, `_connections`) "
    "to pause and fail its commit acknowledgement; MemstoreSession has no such seam (it "
    "writes through the memstore store's engine)"
)
EXCLUDED = {
    "TestOpenAIResponsesCompactionSession::test_settled_pop_failure_invalidates_response_chain": (
        _CONNECTION
    ),
    "TestOpenAIResponsesCompactionSession::test_settled_clear_failure_invalidates_response_chain": (
        _CONNECTION
    ),
}
"""The tests of the SDK's file that construct a SQLiteSession and are left out, with the reason."""


@pytest.mark.asyncio
@pytest.mark.allow_call_model_methods
@pytest.mark.parametrize("history_source", ["automatic", "manual", "stored"])
async def test_compaction_replay_strips_created_by(
    history_source: str,
    sqlite_store: object,
) -> None:
    compacted_item = {
        "id": "cmp_synthetic",
        "type": "compaction",
        "encrypted_content": "synthetic-encrypted-content",
        "created_by": "server",
    }
    request_inputs: list[list[dict[str, Any]]] = []

    async def handler(request: httpx2.Request) -> httpx2.Response:
        request_inputs.append(json.loads(request.content)["input"])
        if request.url.path.endswith("/compact"):
            return httpx2.Response(
                200,
                json={
                    "id": "cmp_response",
                    "object": "response.compaction",
                    "created_at": 1,
                    "output": [compacted_item],
                },
            )
        assert request.url.path.endswith("/responses")
        return httpx2.Response(
            200, content=get_response_obj([get_text_message("42")]).model_dump_json()
        )

    underlying = SQLiteSession("created-by-replay")
    try:
        async with AsyncOpenAI(
            api_key="synthetic-key",
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
        ) as client:
            session = OpenAIResponsesCompactionSession(
                session_id="created-by-replay",
                underlying_session=underlying,
                client=client,
                model="gpt-5",
                compaction_mode="input",
                should_trigger_compaction=lambda ctx: bool(ctx["compaction_candidate_items"]),
            )
            agent = Agent(name="test", model=OpenAIResponsesModel("gpt-5", openai_client=client))
            config = RunConfig(tracing_disabled=True)
            if history_source == "stored":
                # History saved before the fix must also remain usable.
                await underlying.add_items([cast(TResponseInputItem, compacted_item)])
            elif history_source == "manual":
                await session.add_items([{"role": "user", "content": "How many?"}])
                await session.run_compaction({"force": True})
            else:
                await Runner.run(agent, "How many?", session=session, run_config=config)

            stored_items = await underlying.get_items()
            assert stored_items == [compacted_item]
            if history_source == "manual":
                # Repeated manual compaction reuses cached output without a history reload.
                await session.add_items([{"role": "user", "content": "More context"}])
                await session.run_compaction({"force": True})
            result = await Runner.run(agent, "And urgent?", session=session, run_config=config)
            assert result.final_output == "42"

            # Inspect encoded inputs to both Responses and the next compact request.
            replayed_items = [
                item
                for items in request_inputs
                for item in items
                if item.get("type") == "compaction"
            ]
            assert replayed_items == [
                {
                    "id": "cmp_synthetic",
                    "type": "compaction",
                    "encrypted_content": "synthetic-encrypted-content",
                }
            ] * (3 if history_source == "manual" else 2)
            assert stored_items[0] == compacted_item
            assert (await underlying.get_items())[0] == compacted_item
    finally:
        underlying.close()


class TestOpenAIResponsesCompactionSession:
    @pytest.mark.asyncio
    @pytest.mark.parametrize("budget", [None, 2])
    @pytest.mark.parametrize("failure_stage", ["clear", "add"])
    async def test_rollback_does_not_revive_items_expired_during_compaction(
        self,
        budget: int | None,
        failure_stage: str,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        sqlite_store: object,
    ) -> None:
        pytest.importorskip("cryptography")
        from agents.extensions.memory.encrypt_session import EncryptedSession

        clock = [1000]
        monkeypatch.setattr("cryptography.fernet.time.time", lambda: clock[0])
        backend = SQLiteSession("ttl-rollback", tmp_path / "history.db")
        encrypted = EncryptedSession("ttl-rollback", backend, "synthetic-key", ttl=10)
        live_item: TResponseInputItem = {"role": "user", "content": "still live"}
        await encrypted.add_items([{"role": "user", "content": "expires during request"}])
        clock[0] = 1005
        await encrypted.add_items([live_item])

        async def compact(**kwargs: Any) -> SimpleNamespace:
            clock[0] = 1011
            return SimpleNamespace(output=[{"role": "assistant", "content": "summary"}])

        client = MagicMock()
        client.responses.compact = AsyncMock(side_effect=compact)
        session = OpenAIResponsesCompactionSession(
            "ttl-rollback", encrypted, client=client, max_rollback_items=budget
        )
        operation = encrypted.clear_session if failure_stage == "clear" else encrypted.add_items
        calls = 0

        async def fail_once(*args: Any) -> None:
            nonlocal calls
            calls += 1
            await operation(*args)
            if calls == 1:
                raise RuntimeError("replacement failed")

        try:
            with (
                patch.object(
                    encrypted,
                    "clear_session" if failure_stage == "clear" else "add_items",
                    side_effect=fail_once,
                ),
                pytest.raises(RuntimeError, match="replacement failed"),
            ):
                await session.run_compaction({"force": True})
            client.responses.compact.assert_awaited_once()
            assert await encrypted.get_items() == [live_item]
        finally:
            backend.close()

    @pytest.mark.asyncio
    @pytest.mark.parametrize("retrieval_limit", [None, 1])
    async def test_manual_rollback_budget_rejects_before_api_or_writes(
        self,
        retrieval_limit: int | None,
        tmp_path: Path,
        sqlite_store: object,
    ) -> None:
        backend = SQLiteSession(
            "test", tmp_path / "budget.db", session_settings=SessionSettings(limit=retrieval_limit)
        )
        history: list[TResponseInputItem] = [
            {"role": "user", "content": f"{index}:" + "x" * 4096} for index in range(64)
        ]
        await backend.add_items(history)
        client = MagicMock()
        client.responses.compact = AsyncMock()
        session = OpenAIResponsesCompactionSession(
            "test", backend, client=client, max_rollback_items=3
        )
        try:
            with (
                patch.object(backend, "get_items", wraps=backend.get_items) as reads,
                patch.object(backend, "clear_session", wraps=backend.clear_session) as clear,
                patch.object(backend, "add_items", wraps=backend.add_items) as writes,
                pytest.raises(ValueError, match="exceeds max_rollback_items"),
            ):
                await session.run_compaction({"force": True})
            reads.assert_awaited_once_with(limit=4)
            client.responses.compact.assert_not_awaited()
            clear.assert_not_awaited()
            writes.assert_not_awaited()
            assert await backend.get_items(limit=100) == history
        finally:
            backend.close()

    @pytest.mark.asyncio
    @pytest.mark.parametrize("native", [True])
    async def test_automatic_compaction_rollback_budget(
        self,
        native: bool,
        sqlite_store: object,
    ) -> None:
        backend = SQLiteSession("test")
        client = MagicMock()
        client.responses.compact = AsyncMock(return_value=SimpleNamespace(output=[]))
        session = OpenAIResponsesCompactionSession(
            "test",
            backend,
            client=client,
            max_rollback_items=1,
            should_trigger_compaction=lambda _: True,
        )
        agent = Agent(name="test", model=ScriptedModel(steps=[[get_text_message("reply")]]))
        try:
            if native:
                await Runner.run(agent, "hello", session=session)
                client.responses.compact.assert_awaited_once()
                assert await backend.get_items() == []
            else:
                with pytest.raises(ValueError, match="exceeds max_rollback_items"):
                    await Runner.run(agent, "hello", session=session)
                client.responses.compact.assert_not_awaited()
                assert len(await backend.get_items()) == 2
        finally:
            if isinstance(backend, SQLiteSession):
                backend.close()

    def create_mock_session(self) -> MagicMock:
        mock = MagicMock(spec=Session)
        mock.session_id = "test-session"
        mock.get_items = AsyncMock(return_value=[])
        mock.add_items = AsyncMock()
        mock.pop_item = AsyncMock(return_value=None)
        mock.clear_session = AsyncMock()
        return mock

    @pytest.mark.asyncio
    async def test_cancel_restore_waits_for_mutation_lock_before_newer_writes(
        self,
        tmp_path: Path,
        sqlite_store: object,
    ) -> None:
        """Newer wrapper writes must wait out cancel-restore and survive chronologically."""
        history: list[TResponseInputItem] = [
            cast(TResponseInputItem, {"type": "message", "role": "user", "content": "original"}),
            cast(
                TResponseInputItem,
                {"type": "message", "role": "assistant", "content": "reply"},
            ),
        ]
        newer_item: TResponseInputItem = cast(
            TResponseInputItem,
            {"type": "message", "role": "user", "content": "newer-after-cancel"},
        )
        compacted_items: list[TResponseInputItem] = [
            cast(
                TResponseInputItem,
                {"type": "message", "role": "assistant", "content": "compacted"},
            )
        ]

        class GatedSQLiteSession(SQLiteSession):
            def __init__(self, session_id: str, db_path: str) -> None:
                super().__init__(session_id, db_path)
                self.add_calls = 0
                self.clear_calls = 0
                self.cancel_replacement_add = False
                self.restore_clear_started = asyncio.Event()
                self.allow_restore_clear = asyncio.Event()

            async def add_items(self, items: list[TResponseInputItem]) -> None:
                self.add_calls += 1
                if self.cancel_replacement_add and self.add_calls == 1:
                    raise asyncio.CancelledError()
                await super().add_items(items)

            async def clear_session(self) -> None:
                self.clear_calls += 1
                if self.clear_calls == 2:
                    self.restore_clear_started.set()
                    await self.allow_restore_clear.wait()
                await super().clear_session()

        underlying = GatedSQLiteSession("lock-test", str(tmp_path / "compaction_lock.db"))
        await underlying.add_items(history)
        underlying.add_calls = 0
        underlying.clear_calls = 0
        underlying.cancel_replacement_add = True

        mock_compact_response = MagicMock()
        mock_compact_response.output = compacted_items
        mock_client = MagicMock()
        mock_client.responses.compact = AsyncMock(return_value=mock_compact_response)

        session = OpenAIResponsesCompactionSession(
            session_id="lock-test",
            underlying_session=underlying,
            client=mock_client,
            compaction_mode="input",
        )
        # Warm wrapper caches so later add_items updates _session_items in place.
        await session._ensure_compaction_candidates()

        compaction_task = asyncio.create_task(session.run_compaction({"force": True}))
        await underlying.restore_clear_started.wait()

        newer_write = asyncio.create_task(session.add_items([newer_item]))
        await asyncio.sleep(0)
        assert not newer_write.done()
        assert underlying.clear_calls == 2
        assert not underlying.allow_restore_clear.is_set()

        underlying.allow_restore_clear.set()

        with pytest.raises(asyncio.CancelledError):
            await compaction_task
        await newer_write

        stored = await session.get_items()
        assert stored == [*history, newer_item]
        assert session._session_items == [*history, newer_item]
        assert underlying.clear_calls == 2
        # 1) cancelled replacement add, 2) restore rewrite, 3) newer wrapper write.
        assert underlying.add_calls == 3

    @pytest.mark.asyncio
    async def test_exception_restore_drains_when_compaction_is_cancelled(
        self,
        tmp_path: Path,
        sqlite_store: object,
    ) -> None:
        """Cancel during Exception-path restore must still finish rewriting history."""
        history: list[TResponseInputItem] = [
            cast(TResponseInputItem, {"type": "message", "role": "user", "content": "original"}),
            cast(
                TResponseInputItem,
                {"type": "message", "role": "assistant", "content": "reply"},
            ),
        ]
        compacted_items: list[TResponseInputItem] = [
            cast(
                TResponseInputItem,
                {"type": "message", "role": "assistant", "content": "compacted"},
            )
        ]

        class ExceptionThenGateRestoreSQLiteSession(SQLiteSession):
            def __init__(self, session_id: str, db_path: str) -> None:
                super().__init__(session_id, db_path)
                self.add_calls = 0
                self.clear_calls = 0
                self.fail_replacement_add = False
                self.restore_add_started = asyncio.Event()
                self.allow_restore_add = asyncio.Event()
                self.restore_tasks_seen: list[asyncio.Task[Any]] = []

            async def add_items(self, items: list[TResponseInputItem]) -> None:
                self.add_calls += 1
                if self.fail_replacement_add and self.add_calls == 1:
                    raise RuntimeError("replacement failed")
                if self.fail_replacement_add and self.add_calls == 2:
                    current = asyncio.current_task()
                    if current is not None:
                        self.restore_tasks_seen.append(current)
                    self.restore_add_started.set()
                    await self.allow_restore_add.wait()
                await super().add_items(items)

            async def clear_session(self) -> None:
                self.clear_calls += 1
                await super().clear_session()

        underlying = ExceptionThenGateRestoreSQLiteSession(
            "exception-cancel-restore", str(tmp_path / "exception_cancel_restore.db")
        )
        await underlying.add_items(history)
        underlying.add_calls = 0
        underlying.clear_calls = 0
        underlying.fail_replacement_add = True

        mock_compact_response = MagicMock()
        mock_compact_response.output = compacted_items
        mock_client = MagicMock()
        mock_client.responses.compact = AsyncMock(return_value=mock_compact_response)

        session = OpenAIResponsesCompactionSession(
            session_id="exception-cancel-restore",
            underlying_session=underlying,
            client=mock_client,
            compaction_mode="input",
        )
        await session._ensure_compaction_candidates()
        warmed_items = list(session._session_items or [])

        compaction_task = asyncio.create_task(session.run_compaction({"force": True}))
        await underlying.restore_add_started.wait()

        compaction_task.cancel()
        await asyncio.sleep(0)
        assert not compaction_task.done()
        assert not underlying.allow_restore_add.is_set()
        assert await underlying.get_items() == []

        underlying.allow_restore_add.set()

        with pytest.raises(asyncio.CancelledError):
            await compaction_task

        stored = await session.get_items()
        assert stored == history
        assert session._session_items == warmed_items
        assert not session._mutation_lock.locked()
        assert underlying.clear_calls == 2
        assert underlying.add_calls == 2
        assert all(task.done() for task in underlying.restore_tasks_seen)
