# Copyright (c) 2025 OpenAI. Licensed under the MIT License: see LICENSE in this directory.
#
# Adopted by memstore from openai-agents 0.25.0, tests/memory/test_compaction_model_visibility.py
# (the source distribution on PyPI, openai_agents-0.25.0.tar.gz), under the MIT License above:
# the tests that construct a SQLiteSession under `OpenAIResponsesCompactionSession` (its native
# compaction path, through memstore's compaction snapshot). Changed: the reference class,
# SQLiteSession, is swapped for memstore's MemstoreSession through the `make_list_session`
# fixture (conftest.py and swap.py here: a SessionStore on SQLite and an AsyncSessionStore on
# PostgreSQL, for the suite's run time); the pending-approval test's variant on the tests'
# in-memory SimpleListSession (the wrapper's other path) is dropped, its SQLiteSession variant
# kept; helpers come from this directory (responses.py, model_test_helpers.py); annotated for
# mypy and formatted by ruff. The file's other tests construct no SQLiteSession (the tests'
# in-memory sessions only): not adopted.
# The SDK's tests index items as the dicts they are at run time; mypy sees the unions of the
# typed items (and EncryptedSession's signature names SessionABC, not the Session protocol):
# mypy: disable-error-code="typeddict-item,union-attr,arg-type"
"""The OpenAI Agents SDK's own tests of what compaction may see, with a SQLiteSession under
the compaction wrapper, run on MemstoreSession."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Literal, cast
from unittest.mock import AsyncMock, MagicMock

import pytest
from agents import Agent, HostedMCPTool, RunConfig, Runner, RunState
from agents.items import TResponseInputItem
from agents.memory import OpenAIResponsesCompactionSession, Session
from agents.memory.session import SessionABC
from agents.result import RunResult, RunResultStreaming
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ScriptedModel
from openai.types.responses import ResponseReasoningItem
from openai.types.responses.response_output_item import McpApprovalRequest

from tests.frameworks.openai_agents.model_test_helpers import get_exact_output_stream_step
from tests.frameworks.openai_agents.responses import (
    get_function_tool,
    get_function_tool_call,
    get_text_message,
)
from tests.frameworks.openai_agents.swap import SessionFactory

pytestmark = pytest.mark.asyncio

EXCLUDED: dict[str, str] = {}
"""The tests of the SDK's file that construct a SQLiteSession and are left out: none."""

LOCAL_OUTPUT = "synthetic-local-only-result"


async def run(
    agent: Agent[Any],
    prompt: str | list[TResponseInputItem] | RunState[Any],
    session: Session,
    streamed: bool,
    config: RunConfig | None = None,
) -> RunResult | RunResultStreaming:
    if not streamed:
        return await Runner.run(agent, prompt, session=session, run_config=config)
    result = Runner.run_streamed(agent, prompt, session=session, run_config=config)
    async for _ in result.stream_events():
        pass
    return result


def without_tools(items: list[TResponseInputItem]) -> list[TResponseInputItem]:
    return [
        item for item in items if item.get("type") not in {"function_call", "function_call_output"}
    ]


def filter_tools(data: CallModelData[Any]) -> ModelInputData:
    return ModelInputData(
        input=without_tools(data.model_data.input), instructions=data.model_data.instructions
    )


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("encrypted", [False, True])
@pytest.mark.parametrize("deferred", [False, True])
async def test_automatic_compaction_hook_approves_the_reloaded_snapshot(
    streamed: bool, encrypted: bool, deferred: bool, make_list_session: SessionFactory
) -> None:
    client = MagicMock()
    client.responses.compact = AsyncMock(return_value=SimpleNamespace(output=[]))
    backend = make_list_session("hook-snapshot", session_settings={"limit": 1})
    approved_views: list[list[TResponseInputItem]] = []

    def approve(context: Any) -> bool:
        items = context["session_items"]
        approved_views.append(list(items))
        return LOCAL_OUTPUT not in str(items)

    compaction = OpenAIResponsesCompactionSession(
        "hook-snapshot",
        backend,
        client=client,
        compaction_mode="input",
        should_trigger_compaction=approve,
    )
    session: SessionABC = compaction
    if encrypted:
        pytest.importorskip("cryptography")
        from agents.extensions.memory.encrypt_session import EncryptedSession

        session = EncryptedSession("hook-snapshot", compaction, encryption_key="synthetic-test-key")
    try:
        await session.add_items(
            [
                {"role": "user", "content": LOCAL_OUTPUT},
                {"role": "user", "content": "visible tail"},
            ]
        )
        model = ScriptedModel(
            steps=([[get_function_tool_call("lookup")]] if deferred else [])
            + [[get_text_message("ok")]]
        )
        await run(
            Agent(
                name="worker",
                model=model,
                tools=[get_function_tool(name="lookup", return_value="tool result")],
            ),
            "full read",
            session,
            streamed,
            RunConfig(session_settings={"limit": 100}),
        )
        assert LOCAL_OUTPUT in str(model.calls[-1].input)
        assert LOCAL_OUTPUT not in str(approved_views[0])
        client.responses.compact.assert_not_awaited()
        assert LOCAL_OUTPUT in str(approved_views[-1])
        assert LOCAL_OUTPUT in str(await session.get_items(limit=100))
        if deferred:
            assert compaction._get_deferred_compaction_response_id() is not None
    finally:
        backend.close()


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("approve", [False, True])
async def test_pending_approval_defers_automatic_compaction(
    streamed: bool, approve: bool, make_list_session: SessionFactory
) -> None:
    client = MagicMock()
    summary = {"type": "compaction", "id": "cmp-test", "encrypted_content": "synthetic-summary"}
    client.responses.compact = AsyncMock(return_value=SimpleNamespace(output=[summary]))
    backend = make_list_session("approval")
    session = OpenAIResponsesCompactionSession(
        "approval",
        backend,
        client=client,
        compaction_mode="input",
        should_trigger_compaction=lambda _: True,
    )
    tool = get_function_tool(name="lookup", return_value=LOCAL_OUTPUT)
    tool.needs_approval = True
    call = get_function_tool_call("lookup")
    model = ScriptedModel(
        steps=[
            [call],
            [get_text_message("resolved")],
            [get_text_message("next")],
            [get_text_message("done")],
        ]
    )
    agent = Agent(name="worker", model=model, tools=[tool])
    try:
        interrupted = await run(agent, "first", session, streamed)
        assert len(interrupted.interruptions) == 1
        client.responses.compact.assert_not_awaited()
        assert any(item.get("call_id") == call.call_id for item in await session.get_items())

        state = await RunState.from_json(agent, interrupted.to_state().to_json())
        if approve:
            state.approve(interrupted.interruptions[0])
        else:
            state.reject(interrupted.interruptions[0])
        await run(agent, state, session, streamed)

        for items in (model.calls[1].input, await session.get_items()):
            assert [item["type"] for item in items if item.get("call_id") == call.call_id] == [
                "function_call",
                "function_call_output",
            ]

        await run(agent, "second", session, streamed)
        client.responses.compact.assert_awaited_once()
        assert [
            item["type"]
            for item in client.responses.compact.call_args.kwargs["input"]
            if item.get("call_id") == call.call_id
        ] == ["function_call", "function_call_output"]
        assert await session.get_items() == [summary]

        await run(agent, "third", session, streamed)
        assert model.calls[3].input == [summary, {"role": "user", "content": "third"}]
    finally:
        backend.close()


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("approve", [False, True])
async def test_pending_hosted_mcp_approval_defers_automatic_compaction(
    streamed: bool, approve: bool, make_list_session: SessionFactory
) -> None:
    client = MagicMock()
    summary = {"type": "compaction", "id": "cmp-mcp", "encrypted_content": "synthetic-summary"}
    client.responses.compact = AsyncMock(return_value=SimpleNamespace(output=[summary]))
    backend = make_list_session("mcp-approval")
    session = OpenAIResponsesCompactionSession(
        "mcp-approval",
        backend,
        client=client,
        compaction_mode="input",
        should_trigger_compaction=lambda _: True,
    )
    request = McpApprovalRequest(
        id="approval-1",
        type="mcp_approval_request",
        arguments="{}",
        name="lookup",
        server_label="synthetic",
    )
    model = ScriptedModel(
        steps=[
            get_exact_output_stream_step([request]) if streamed else [request],
            [get_text_message("resolved")],
            [get_text_message("next")],
            [get_text_message("done")],
        ]
    )
    agent = Agent(
        name="worker",
        model=model,
        tools=[
            HostedMCPTool(
                tool_config={
                    "type": "mcp",
                    "server_label": "synthetic",
                    "server_url": "https://synthetic.example/mcp",
                    "require_approval": "always",
                }
            )
        ],
    )
    try:
        interrupted = await run(agent, "first", session, streamed)
        assert len(interrupted.interruptions) == 1
        client.responses.compact.assert_not_awaited()
        assert request.model_dump(exclude_unset=True) in await session.get_items()

        state = await RunState.from_json(agent, interrupted.to_state().to_json())
        if approve:
            state.approve(interrupted.interruptions[0])
        else:
            state.reject(interrupted.interruptions[0])
        await run(agent, state, session, streamed)
        for items in (model.calls[1].input, await session.get_items()):
            assert request.model_dump(exclude_unset=True) in items
            responses = [item for item in items if item.get("type") == "mcp_approval_response"]
            assert len(responses) == 1
            assert responses[0]["approval_request_id"] == request.id
            assert responses[0]["approve"] is approve

        await run(agent, "second", session, streamed)
        client.responses.compact.assert_awaited_once()
        compact_input = client.responses.compact.call_args.kwargs["input"]
        assert request.model_dump(exclude_unset=True) in compact_input
        assert any(
            item.get("type") == "mcp_approval_response"
            and item.get("approval_request_id") == request.id
            and item.get("approve") is approve
            for item in compact_input
        )
        assert await session.get_items() == [summary]

        await run(agent, "third", session, streamed)
        assert model.calls[3].input == [summary, {"role": "user", "content": "third"}]
    finally:
        backend.close()


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("encrypted", [False, True])
async def test_backend_read_limit_cannot_hide_retained_history_from_compaction(
    streamed: bool, encrypted: bool, make_list_session: SessionFactory
) -> None:
    client = MagicMock()
    client.responses.compact = AsyncMock(return_value=SimpleNamespace(output=[]))
    backend = make_list_session("limited", session_settings={"limit": 1})
    session: SessionABC = OpenAIResponsesCompactionSession(
        "limited",
        backend,
        client=client,
        compaction_mode="input",
        should_trigger_compaction=lambda _: True,
    )
    if encrypted:
        pytest.importorskip("cryptography")
        from agents.extensions.memory.encrypt_session import EncryptedSession

        session = EncryptedSession("limited", session, encryption_key="synthetic-test-key")
    try:
        await session.add_items(
            [
                {"role": "user", "content": LOCAL_OUTPUT},
                {"role": "user", "content": "visible tail"},
            ]
        )
        model = ScriptedModel(steps=[[get_text_message("ok")], [get_text_message("done")]])
        agent = Agent(name="worker", model=model)
        await run(agent, "limited read", session, streamed)
        assert LOCAL_OUTPUT not in str(model.calls[0].input)
        client.responses.compact.assert_awaited_once()
        assert LOCAL_OUTPUT not in str(client.responses.compact.call_args.kwargs["input"])
        assert LOCAL_OUTPUT in str(await session.get_items(limit=100))

        await run(
            agent,
            "full read",
            session,
            streamed,
            RunConfig(session_settings={"limit": 100}),
        )
        assert LOCAL_OUTPUT in str(model.calls[1].input)
        assert client.responses.compact.await_count == 2
        assert LOCAL_OUTPUT in str(client.responses.compact.call_args.kwargs["input"])
        assert await session.get_items(limit=100) == []
    finally:
        backend.close()


@pytest.mark.parametrize("approve", [False, True])
@pytest.mark.parametrize("encryption", ["none", "outer", "inner"])
async def test_automatic_compaction_does_not_reload_unbounded_hidden_history(
    approve: bool,
    encryption: str,
    monkeypatch: pytest.MonkeyPatch,
    make_list_session: SessionFactory,
) -> None:
    client = MagicMock()
    client.responses.compact = AsyncMock(return_value=SimpleNamespace(output=[]))
    backend = make_list_session("bounded", session_settings={"limit": 1})
    session: SessionABC = OpenAIResponsesCompactionSession(
        "bounded",
        backend,
        client=client,
        compaction_mode="input",
        should_trigger_compaction=lambda _: approve,
    )
    clock = [1000]
    if encryption != "none":
        pytest.importorskip("cryptography")
        from agents.extensions.memory.encrypt_session import EncryptedSession

        monkeypatch.setattr("cryptography.fernet.time.time", lambda: clock[0])
        if encryption == "outer":
            session = EncryptedSession(
                "bounded", session, encryption_key="synthetic-test-key", ttl=10
            )
        else:
            session = OpenAIResponsesCompactionSession(
                "bounded",
                EncryptedSession("bounded", backend, encryption_key="synthetic-test-key", ttl=10),
                client=client,
                compaction_mode="input",
                should_trigger_compaction=lambda _: approve,
            )
    try:
        await session.add_items(
            [{"role": "user", "content": f"retained-{index}"} for index in range(100)]
        )
        if encryption != "none":
            clock[0] += 11
            await session.add_items([{"role": "user", "content": "fresh tail"}])
        read = AsyncMock(wraps=backend.get_items)
        backend.get_items = read  # type: ignore[method-assign]
        snapshot_read = AsyncMock(wraps=backend._get_compaction_snapshot)
        backend._get_compaction_snapshot = snapshot_read  # type: ignore[method-assign]
        model = ScriptedModel(steps=[[get_text_message("ok")], [get_text_message("done")]])
        agent = Agent(name="worker", model=model)
        for prompt in ("first", "second"):
            read.reset_mock()
            snapshot_read.reset_mock()
            await run(agent, prompt, session, False)
            # One stored input, one new prompt, one response, and one lookahead item.
            limits = [
                call.kwargs.get("limit", call.args[0] if call.args else None)
                for call in read.call_args_list
            ]
            if approve:
                assert all(call.args[0] <= 4 for call in snapshot_read.call_args_list)
                assert snapshot_read.await_count == 1
            else:
                assert all(limit is None or limit == 1 for limit in limits)
                snapshot_read.assert_not_awaited()
                client.responses.compact.assert_not_awaited()
        assert client.responses.compact.await_count == (2 if approve else 0)
        assert len(await backend.get_items(limit=1000)) == (
            (0 if encryption != "none" else 98)
            if approve
            else (105 if encryption != "none" else 104)
        )
        # Explicit manual compaction can still process the application's approved
        # logical history, including when limited reads omit live history.
        client.responses.compact.reset_mock()
        await session.run_compaction({"force": True})  # type: ignore[attr-defined]
        client.responses.compact.assert_awaited_once()
        if not approve:
            assert "done" in str(client.responses.compact.call_args.kwargs["input"])
        assert await backend.get_items(limit=1000) == []
    finally:
        backend.close()


@pytest.mark.parametrize("outer", [False, True])
async def test_manual_compaction_refreshes_expired_encrypted_history(
    outer: bool, monkeypatch: pytest.MonkeyPatch, make_list_session: SessionFactory
) -> None:
    pytest.importorskip("cryptography")
    from agents.extensions.memory.encrypt_session import EncryptedSession

    clock = [1000]
    monkeypatch.setattr("cryptography.fernet.time.time", lambda: clock[0])
    backend = make_list_session("manual-expiry")
    client = MagicMock()
    # Echo the request so stale input would also be written back with a fresh TTL.
    client.responses.compact = AsyncMock(
        side_effect=lambda **kwargs: SimpleNamespace(output=kwargs["input"])
    )
    session: SessionABC
    if outer:
        session = EncryptedSession(
            "manual-expiry",
            OpenAIResponsesCompactionSession(
                "manual-expiry",
                backend,
                client=client,
                compaction_mode="input",
                should_trigger_compaction=lambda _: False,
            ),
            encryption_key="synthetic-test-key",
            ttl=10,
        )
    else:
        session = OpenAIResponsesCompactionSession(
            "manual-expiry",
            EncryptedSession("manual-expiry", backend, encryption_key="synthetic-test-key", ttl=10),
            client=client,
            compaction_mode="input",
            should_trigger_compaction=lambda _: False,
        )
    try:
        await session.add_items([{"role": "assistant", "content": "synthetic expired item"}])
        await session.run_compaction()  # A declined policy check can populate the cache.
        client.responses.compact.assert_not_awaited()

        clock[0] += 11
        assert await session.get_items() == []
        await session.run_compaction({"force": True})
        client.responses.compact.assert_awaited_once_with(model="gpt-6-luna", input=[])
        assert await session.get_items() == []

        live: TResponseInputItem = {"role": "user", "content": "synthetic live item"}
        await session.add_items([live])
        await session.run_compaction({"force": True})
        assert client.responses.compact.call_args.kwargs["input"] == [live]
        assert await session.get_items() == [live]
    finally:
        backend.close()


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("outer", [False, True])
@pytest.mark.parametrize("limited_default", [False, True])
async def test_automatic_compaction_recovers_after_encrypted_history_expires(
    streamed: bool,
    outer: bool,
    limited_default: bool,
    monkeypatch: pytest.MonkeyPatch,
    make_list_session: SessionFactory,
) -> None:
    pytest.importorskip("cryptography")
    from agents.extensions.memory.encrypt_session import EncryptedSession

    clock = [1000]
    monkeypatch.setattr("cryptography.fernet.time.time", lambda: clock[0])
    backend = make_list_session(
        "expiry", session_settings={"limit": 20} if limited_default else None
    )
    client = MagicMock()
    client.responses.compact = AsyncMock(return_value=SimpleNamespace(output=[]))
    session: SessionABC
    if outer:
        session = EncryptedSession(
            "expiry",
            OpenAIResponsesCompactionSession(
                "expiry", backend, client=client, compaction_mode="input"
            ),
            encryption_key="synthetic-test-key",
            ttl=10,
        )
    else:
        session = OpenAIResponsesCompactionSession(
            "expiry",
            EncryptedSession("expiry", backend, encryption_key="synthetic-test-key", ttl=10),
            client=client,
            compaction_mode="input",
        )
    model = ScriptedModel(steps=[[get_text_message("ok")] for _ in range(15)])
    agent = Agent(name="worker", model=model)
    config = RunConfig(session_settings={"limit": 100}) if limited_default else None
    try:
        await session.add_items([{"role": "user", "content": "expired request"}])
        clock[0] += 11
        for index in range(15):
            await run(agent, f"turn {index}", session, streamed, config)
        client.responses.compact.assert_awaited_once()
        assert len(client.responses.compact.call_args.kwargs["input"]) == 20
        assert "expired request" not in str(client.responses.compact.call_args.kwargs["input"])
        assert len(await backend.get_items(limit=100)) == 10
    finally:
        backend.close()


@pytest.mark.parametrize("outer", [False, True])
async def test_expired_read_overhead_does_not_authorize_hidden_history(
    outer: bool, monkeypatch: pytest.MonkeyPatch, make_list_session: SessionFactory
) -> None:
    pytest.importorskip("cryptography")
    from agents.extensions.memory.encrypt_session import EncryptedSession

    clock = [1000]
    monkeypatch.setattr("cryptography.fernet.time.time", lambda: clock[0])
    backend = make_list_session("expiry-hidden", session_settings={"limit": 1})
    client = MagicMock()
    client.responses.compact = AsyncMock(return_value=SimpleNamespace(output=[]))
    session: SessionABC
    if outer:
        session = EncryptedSession(
            backend.session_id,
            OpenAIResponsesCompactionSession(
                backend.session_id,
                backend,
                client=client,
                compaction_mode="input",
                should_trigger_compaction=lambda _: True,
            ),
            encryption_key="synthetic-test-key",
            ttl=10,
        )
    else:
        session = OpenAIResponsesCompactionSession(
            backend.session_id,
            EncryptedSession(
                backend.session_id, backend, encryption_key="synthetic-test-key", ttl=10
            ),
            client=client,
            compaction_mode="input",
            should_trigger_compaction=lambda _: True,
        )

    def hide_history(data: CallModelData[Any]) -> ModelInputData:
        return ModelInputData(
            input=[item for item in data.model_data.input if item.get("content") != LOCAL_OUTPUT]
            + [{"role": "user", "content": "model-only context"}],
            instructions=data.model_data.instructions,
        )

    model = ScriptedModel(steps=[[get_text_message("ok")] for _ in range(3)])
    agent = Agent(name="worker", model=model)
    try:
        await session.add_items([{"role": "user", "content": "expired"}] * 10)
        clock[0] += 11
        await session.add_items([{"role": "user", "content": LOCAL_OUTPUT}])
        await run(
            agent,
            "filtered",
            session,
            False,
            RunConfig(session_settings={"limit": 100}, call_model_input_filter=hide_history),
        )
        client.responses.compact.assert_awaited_once()
        assert LOCAL_OUTPUT not in str(model.calls[0].input)
        assert LOCAL_OUTPUT not in str(client.responses.compact.call_args.kwargs["input"])
        assert len(await backend.get_items(limit=100)) == 1
        assert LOCAL_OUTPUT in str(await session.get_items(limit=100))

        read = AsyncMock(wraps=backend.get_items)
        backend.get_items = read  # type: ignore[method-assign]
        await run(agent, "bounded", session, False, RunConfig(call_model_input_filter=hide_history))
        # The previous full read's overhead is not carried into a new bounded turn.
        limits = [
            call.kwargs.get("limit", call.args[0] if call.args else None)
            for call in read.call_args_list
        ]
        assert all(limit is None or limit <= 4 for limit in limits)
        assert client.responses.compact.await_count == 2
        assert LOCAL_OUTPUT not in str(client.responses.compact.call_args.kwargs["input"])
        await run(agent, "visible", session, False, RunConfig(session_settings={"limit": 100}))
        assert client.responses.compact.await_count == 3
        assert LOCAL_OUTPUT in str(client.responses.compact.call_args.kwargs["input"])
        assert await session.get_items(limit=100) == []
    finally:
        backend.close()


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("mode", ["input", "previous_response_id"])
async def test_automatic_compaction_applies_current_reasoning_id_policy(
    streamed: bool,
    mode: Literal["input", "previous_response_id"],
    make_list_session: SessionFactory,
) -> None:
    backend = make_list_session("reasoning-policy")
    client = MagicMock()
    client.responses.compact = AsyncMock(return_value=SimpleNamespace(output=[]))
    session = OpenAIResponsesCompactionSession(
        backend.session_id,
        backend,
        client=client,
        compaction_mode=mode,
        should_trigger_compaction=lambda _: False,
    )
    model = ScriptedModel(
        steps=[
            [
                ResponseReasoningItem(id="rs_stored", type="reasoning", summary=[]),
                get_text_message("old"),
            ],
            [get_text_message("done")],
        ]
    )
    agent = Agent(name="worker", model=model)
    try:
        await run(agent, "before policy", session, streamed)
        stored_reasoning = next(
            item for item in await backend.get_items() if item.get("type") == "reasoning"
        )
        assert stored_reasoning.get("id") == "rs_stored"
        decisions: list[list[TResponseInputItem]] = []

        def approve(context: dict[str, Any]) -> bool:
            decisions.append(context["session_items"])
            return True

        session.should_trigger_compaction = approve
        await run(
            agent, "adopt policy", session, streamed, RunConfig(reasoning_item_id_policy="omit")
        )
        sent_reasoning = next(
            item for item in model.calls[1].input if item.get("type") == "reasoning"
        )
        assert "id" not in sent_reasoning
        assert len(decisions) == 2
        approved_reasoning = next(item for item in decisions[-1] if item.get("type") == "reasoning")
        assert approved_reasoning == sent_reasoning
        client.responses.compact.assert_awaited_once()
        if mode == "input":
            compact_reasoning = next(
                item
                for item in client.responses.compact.call_args.kwargs["input"]
                if item.get("type") == "reasoning"
            )
            assert compact_reasoning == sent_reasoning
        assert await backend.get_items() == []
    finally:
        backend.close()


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("restore_history_id", [False, True])
async def test_omit_policy_preserves_model_visible_reasoning_ids(
    streamed: bool, restore_history_id: bool, make_list_session: SessionFactory
) -> None:
    backend = make_list_session("reasoning-caller-input")
    client = MagicMock()
    client.responses.compact = AsyncMock(return_value=SimpleNamespace(output=[]))
    decisions: list[list[TResponseInputItem]] = []

    def approve(context: dict[str, Any]) -> bool:
        decisions.append(context["session_items"])
        return True

    session = OpenAIResponsesCompactionSession(
        backend.session_id,
        backend,
        client=client,
        compaction_mode="input",
        should_trigger_compaction=approve,
    )

    def restore_id(data: CallModelData[Any]) -> ModelInputData:
        items = [dict(item) for item in data.model_data.input]
        items[0]["id"] = "rs_stored"
        return ModelInputData(
            input=cast(list[TResponseInputItem], items), instructions=data.model_data.instructions
        )

    model = ScriptedModel(steps=[[get_text_message("done")]])
    try:
        await session.add_items([{"type": "reasoning", "id": "rs_stored", "summary": []}])
        await run(
            Agent(name="worker", model=model),
            [
                {"type": "reasoning", "id": "rs_caller", "summary": []},
                {"role": "user", "content": "continue"},
            ],
            session,
            streamed,
            RunConfig(
                reasoning_item_id_policy="omit",
                session_input_callback=lambda history, new: history + new,
                call_model_input_filter=restore_id if restore_history_id else None,
            ),
        )
        sent_reasoning = [item for item in model.calls[0].input if item.get("type") == "reasoning"]
        assert sent_reasoning[0].get("id") == ("rs_stored" if restore_history_id else None)
        assert sent_reasoning[1].get("id") == "rs_caller"
        client.responses.compact.assert_awaited_once()
        compact_reasoning = [
            item
            for item in client.responses.compact.call_args.kwargs["input"]
            if item.get("type") == "reasoning"
        ]
        assert compact_reasoning == sent_reasoning
        assert [item for item in decisions[-1] if item.get("type") == "reasoning"] == sent_reasoning
        assert await backend.get_items() == []
    finally:
        backend.close()
