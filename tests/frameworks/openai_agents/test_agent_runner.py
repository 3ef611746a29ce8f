# Copyright (c) 2025 OpenAI. Licensed under the MIT License: see LICENSE in this directory.
#
# Adopted by memstore from openai-agents 0.25.0, tests/test_agent_runner.py (the source
# distribution on PyPI, openai_agents-0.25.0.tar.gz), under the MIT License above: the tests that
# run the Runner with a session they construct (SQLiteSession, or the tests' in-memory
# SimpleListSession), with the module-level helpers they use. Changed: each session is built by
# the `make_session` fixture instead (conftest.py and swap.py here: memstore's MemstoreSession on
# SessionStore and AsyncSessionStore, SQLite and PostgreSQL), or for a SimpleListSession by
# `make_list_session` (the same, on a SessionStore on SQLite and an AsyncSessionStore on
# PostgreSQL); of the retry test's two variants
# (the in-memory CountingSession and SQLiteSession) the SQLiteSession one is kept, the other holds
# no session of memstore's; helpers come from this directory (responses.py, hitl.py);
# annotated for mypy and formatted by ruff. The file's other tests construct no session, or
# test the SDK's internal functions or sessions that fail on purpose: not adopted (EXCLUDED).
"""The OpenAI Agents SDK's own Runner tests that construct a session, run on MemstoreSession."""

from __future__ import annotations

import asyncio
import json
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any, cast
from unittest.mock import patch

import httpx
import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrail,
    InputGuardrailTripwireTriggered,
    ModelRetrySettings,
    ModelSettings,
    OutputGuardrail,
    OutputGuardrailTripwireTriggered,
    RunConfig,
    RunContextWrapper,
    Runner,
    UserError,
    retry_policies,
)
from agents.items import (
    HandoffOutputItem,
    ModelResponse,
    RunItem,
    ToolCallOutputItem,
    TResponseInputItem,
)
from agents.memory import SessionSettings
from agents.run_internal import run_loop
from agents.run_internal.run_steps import NextStepFinalOutput, SingleStepResult
from agents.run_state import RunState
from agents.testing import ScriptedModel, assistant_message
from agents.tool import function_tool
from agents.usage import Usage
from openai import APIConnectionError, NotFoundError
from openai.types.responses.response_reasoning_item import ResponseReasoningItem

from tests.frameworks.openai_agents.hitl import make_shell_call
from tests.frameworks.openai_agents.responses import (
    get_final_output_message,
    get_function_tool,
    get_function_tool_call,
    get_handoff_tool_call,
    get_text_input_item,
    get_text_message,
)
from tests.frameworks.openai_agents.swap import SessionFactory

_INTERNAL = (
    "calls one of the Runner's internal functions (prepare_input_with_session, "
    "save_result_to_session, the rewind and cleanup helpers) with the tests' in-memory session: "
    "the SDK's logic, not a store's"
)
_CONVERSATIONS = (
    "its session is a stand-in for OpenAI's server-side Conversations session, whose id handling "
    "differs from a local store's on purpose"
)
_TEST_DOUBLE = (
    "its session is a test double that counts pops, strips ids or fails on purpose: the test's "
    "meaning is that double's behaviour"
)
EXCLUDED = {
    "test_non_streamed_trip_uses_safe_items_for_sandbox_memory_after_session_failure": _TEST_DOUBLE,
    "test_prepare_input_with_session_keeps_orphan_output_without_limit": _INTERNAL,
    "test_prepare_input_with_session_drops_limited_orphan_history_function_call_outputs": _INTERNAL,
    "test_prepare_input_with_session_preserves_new_function_call_outputs": _INTERNAL,
    "test_prepare_input_with_session_leaves_custom_callback_output_unchanged": _INTERNAL,
    "test_prepare_input_with_session_drops_output_for_program_owned_call_pruned_with_parent": (
        _INTERNAL
    ),
    "test_prepare_input_with_session_keeps_paired_history_function_call_outputs": _INTERNAL,
    "test_prepare_input_with_session_prefers_latest_function_call_output": _INTERNAL,
    "test_prepare_input_with_session_drops_orphan_function_calls": _INTERNAL,
    "test_prepare_input_with_session_preserves_pending_new_shell_calls": _INTERNAL,
    "test_prepare_input_with_session_uses_sync_callback": _INTERNAL,
    "test_prepare_input_with_session_awaits_async_callback": _INTERNAL,
    "test_prepare_input_with_session_callback_drops_new_items": _INTERNAL,
    "test_prepare_input_with_session_callback_reorders_new_items": _INTERNAL,
    "test_prepare_input_with_session_callback_accepts_extra_items": _INTERNAL,
    "test_prepare_input_with_session_ignores_callback_without_history": _INTERNAL,
    "test_prepare_input_with_session_rejects_non_callable_callback": _INTERNAL,
    "test_prepare_input_with_session_rejects_non_list_callback_result": _INTERNAL,
    "test_prepare_input_with_session_matches_copied_items_by_content": _INTERNAL,
    "test_prepare_input_with_session_repeated_history_keeps_equal_new_item": _INTERNAL,
    "test_prepare_input_with_session_async_callback_moves_repeated_history_item": _INTERNAL,
    "test_prepare_input_with_session_history_moved_to_new_input_stays_history": _INTERNAL,
    "test_prepare_input_with_session_callback_replaces_history_item": _INTERNAL,
    "test_prepare_input_with_session_extra_reconstructed_history_item_stays_new": _INTERNAL,
    "test_prepare_input_with_openai_conversation_strips_assistant_history_ids": _CONVERSATIONS,
    "test_prepare_input_with_regular_session_preserves_history_ids": _INTERNAL,
    "test_prepare_input_with_openai_conversation_callback_matches_assistant_no_ids": _CONVERSATIONS,
    "test_prepare_input_with_openai_conversation_callback_keeps_user_ids_distinct": _CONVERSATIONS,
    "test_persist_session_items_for_guardrail_trip_uses_original_input_when_missing": _INTERNAL,
    "test_wait_for_session_cleanup_retries_after_get_items_error": _TEST_DOUBLE,
    "test_wait_for_session_cleanup_logs_when_targets_linger": _INTERNAL,
    "test_conversation_lock_rewind_skips_when_no_snapshot": _TEST_DOUBLE,
    "test_save_result_to_session_preserves_function_outputs": _INTERNAL,
    "test_save_result_to_session_prefers_latest_duplicate_function_outputs": _INTERNAL,
    "test_save_result_to_session_keeps_tool_call_before_its_output": _INTERNAL,
    "test_save_result_to_session_keeps_latest_output_after_its_call": _INTERNAL,
    "test_rewind_handles_id_stripped_sessions": _TEST_DOUBLE,
    "test_rewind_debug_logging_respects_model_and_tool_policies": _TEST_DOUBLE,
    "test_rewind_failure_uses_placeholder_free_shared_logger_message": _TEST_DOUBLE,
    "test_rewind_skips_mismatched_tail_suffix": _TEST_DOUBLE,
    "test_rewind_preserves_unrelated_tail_items_when_server_tracker_cleanup_runs": _TEST_DOUBLE,
    "test_rewind_strips_only_retry_owned_tail_items_before_known_server_item": _TEST_DOUBLE,
    "test_save_result_to_session_does_not_increment_counter_when_nothing_saved": _INTERNAL,
    "test_save_result_to_session_returns_count_and_updates_state": _INTERNAL,
    "test_save_result_to_session_counts_sanitized_openai_items": _CONVERSATIONS,
    "test_save_result_to_session_omits_reasoning_ids_when_policy_is_omit": _INTERNAL,
    "test_save_result_to_openai_conversation_preserves_reasoning_id_when_policy_is_omit": (
        _CONVERSATIONS
    ),
    "test_save_result_to_openai_conversation_drops_unpersistable_reasoning_item": _CONVERSATIONS,
    "test_save_result_to_openai_conversation_keeps_reasoning_encrypted_content": _CONVERSATIONS,
    "test_save_result_to_openai_conversation_drops_placeholder_id_reasoning_item": _CONVERSATIONS,
    "test_save_result_to_openai_conversation_strips_placeholder_reasoning_id": _CONVERSATIONS,
    "test_save_result_to_session_keeps_tool_call_payload_api_safe": _INTERNAL,
    "test_save_result_to_session_sanitizes_original_input_items": _INTERNAL,
    "test_prepare_input_with_session_strips_internal_tool_call_metadata": _INTERNAL,
    "test_prepare_input_with_session_sanitizes_new_tool_call_session_items": _INTERNAL,
}
"""The tests of the SDK's file that construct a session and are not adopted, with the reason
(its other tests construct no session)."""


class _DummyRunItem:
    def __init__(self, payload: dict[str, Any], item_type: str = "tool_call_output_item"):
        self._payload = payload
        self.type = item_type

    def to_input_item(self) -> dict[str, Any]:
        return self._payload


def _find_reasoning_input_item(
    items: str | list[TResponseInputItem] | Any,
) -> dict[str, Any] | None:
    if not isinstance(items, list):
        return None
    for item in items:
        if isinstance(item, dict) and item.get("type") == "reasoning":
            return cast(dict[str, Any], item)
    return None


class _RevokedReasoningIdModel(ScriptedModel):
    """ScriptedModel that 404s like the Responses API when a revoked reasoning ID is replayed."""

    def __init__(self) -> None:
        super().__init__()
        self.revoked_reasoning_ids: set[str] = set()

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        if isinstance(input, list):
            for item in input:
                if not isinstance(item, dict) or item.get("type") != "reasoning":
                    continue
                item_id = item.get("id")
                if item_id in self.revoked_reasoning_ids:
                    message = f"Item with id '{item_id}' not found."
                    body = {"error": {"message": message, "type": "invalid_request_error"}}
                    raise NotFoundError(
                        message,
                        response=httpx.Response(  # type: ignore[arg-type]
                            404,
                            request=httpx.Request("POST", "https://api.openai.com/v1/responses"),
                            json=body,
                        ),
                        body=body,
                    )
        return await super().get_response(system_instructions, input, *args, **kwargs)


@pytest.mark.asyncio
async def test_omit_policy_strips_reasoning_ids_already_stored_in_the_session(
    make_session: SessionFactory,
) -> None:
    """Adopting `omit` must also cover reasoning IDs a session recorded before it was set.

    Reproduces https://github.com/openai/openai-agents-python/issues/2020: a triage agent hands
    off, its empty-summary reasoning item is persisted to the session, the server later drops the
    item, and every later turn of that conversation fails with
    `404 Item with id 'rs_...' not found`.
    """
    model = _RevokedReasoningIdModel()
    specialist = Agent(name="specialist", model=model)
    triage = Agent(name="triage", model=model, handoffs=[specialist])

    session = make_session("issue-2020")

    # Turn 1 predates the mitigation, so the session records the reasoning ID.
    model.extend(
        [
            [
                ResponseReasoningItem(id="rs_triage", type="reasoning", summary=[]),
                get_handoff_tool_call(specialist),
            ],
            [get_text_message("handled")],
        ]
    )
    first = await Runner.run(triage, input="hello", session=session)
    assert first.final_output == "handled"
    stored_reasoning = _find_reasoning_input_item(await session.get_items())
    assert stored_reasoning is not None
    assert stored_reasoning.get("id") == "rs_triage"

    # The server no longer resolves that reasoning item.
    model.revoked_reasoning_ids.add("rs_triage")

    # Turn 2 opts into the documented mitigation for this failure.
    model.extend([[get_text_message("done")]])
    second = await Runner.run(
        triage,
        input="anything else?",
        session=session,
        run_config=RunConfig(reasoning_item_id_policy="omit"),
    )

    assert second.final_output == "done"
    replayed_reasoning = _find_reasoning_input_item(model.calls[-1].input)
    assert replayed_reasoning is not None
    assert "id" not in replayed_reasoning


@pytest.mark.asyncio
async def test_nested_handoff_filters_model_input_but_preserves_session_items(
    make_list_session: SessionFactory,
) -> None:
    model = ScriptedModel()
    delegate = Agent(
        name="delegate",
        model=model,
    )
    triage = Agent(
        name="triage",
        model=model,
        handoffs=[delegate],
        tools=[get_function_tool("some_function", "result")],
    )

    model.extend(
        [
            # First turn: a tool call.
            [get_function_tool_call("some_function", json.dumps({"a": "b"}))],
            # Second turn: a message and a handoff.
            [get_text_message("a_message"), get_handoff_tool_call(delegate)],
            # Third turn: final message.
            [get_text_message("done")],
        ]
    )

    model_input_types: list[list[str]] = []

    def capture_model_input(data: Any) -> Any:
        types: list[str] = []
        for item in data.model_data.input:
            if isinstance(item, dict):
                item_type = item.get("type")
                if isinstance(item_type, str):
                    types.append(item_type)
        model_input_types.append(types)
        return data.model_data

    session = make_list_session("test")
    result = await Runner.run(
        triage,
        input="user_message",
        run_config=RunConfig(
            nest_handoff_history=True,
            call_model_input_filter=capture_model_input,
        ),
        session=session,
    )

    assert result.final_output == "done"
    assert len(model_input_types) >= 3
    handoff_input_types = model_input_types[2]
    assert "function_call" not in handoff_input_types
    assert "function_call_output" not in handoff_input_types

    assert any(isinstance(item, ToolCallOutputItem) for item in result.new_items)
    assert any(isinstance(item, HandoffOutputItem) for item in result.new_items)

    session_items = await session.get_items()
    has_function_call_output = any(
        isinstance(item, dict) and item.get("type") == "function_call_output"
        for item in session_items
    )
    assert has_function_call_output


@pytest.mark.asyncio
async def test_input_guardrail_tripwire_does_not_save_assistant_message_to_session(
    make_list_session: SessionFactory,
) -> None:
    async def guardrail_function(
        context: RunContextWrapper[Any], agent: Agent[Any], input: Any
    ) -> GuardrailFunctionOutput:
        # Delay to ensure the agent has time to produce output before the guardrail finishes.
        await asyncio.sleep(0.01)
        return GuardrailFunctionOutput(
            output_info=None,
            tripwire_triggered=True,
        )

    session = make_list_session("test")

    model = ScriptedModel()
    model.enqueue([get_text_message("should_not_be_saved")])

    agent = Agent(
        name="test",
        model=model,
        input_guardrails=[InputGuardrail(guardrail_function=guardrail_function)],
    )

    with pytest.raises(InputGuardrailTripwireTriggered):
        await Runner.run(agent, input="user_message", session=session)

    items = await session.get_items()

    assert len(items) == 1
    first_item = cast(dict[str, Any], items[0])
    assert "role" in first_item
    assert first_item["role"] == "user"


@pytest.mark.asyncio
@pytest.mark.parametrize("streamed", [False, True])
async def test_limited_session_replays_boundary_answer_by_value(
    streamed: bool, make_session: SessionFactory
) -> None:
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    with closing(make_session("reasoning-window")) as session:
        for turn in (1, 2):
            model.enqueue(
                [
                    ResponseReasoningItem(id=f"rs_{turn}", type="reasoning", summary=[]),
                    assistant_message(f"answer {turn}", item_id=f"msg_{turn}"),
                ]
            )
            await Runner.run(agent, f"question {turn}", session=session)

        stored = await session.get_items()
        model.enqueue([assistant_message("done")])
        config = RunConfig(session_settings=SessionSettings(limit=4))
        if streamed:
            result = Runner.run_streamed(agent, "continue", session=session, run_config=config)
            async for _ in result.stream_events():
                pass
        else:
            await Runner.run(agent, "continue", session=session, run_config=config)

        boundary = dict(stored[-4])
        assert boundary.pop("id") == "msg_1"
        assert model.calls[-1].input == [
            boundary,
            *stored[-3:],
            {"role": "user", "content": "continue"},
        ]
        assert (await session.get_items())[: len(stored)] == stored


@pytest.mark.asyncio
async def test_limited_session_custom_callback_owns_boundary_message_ids(
    make_session: SessionFactory,
) -> None:
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    with closing(make_session("callback-window")) as session:
        model.enqueue([assistant_message("answer", item_id="msg_original")])
        await Runner.run(agent, "question", session=session)
        stored_answer = (await session.get_items())[-1]

        model.enqueue([assistant_message("done")])
        await Runner.run(
            agent,
            "continue",
            session=session,
            run_config=RunConfig(
                session_settings=SessionSettings(limit=1),
                session_input_callback=lambda history, new: history + new,
            ),
        )
        assert model.calls[-1].input == [stored_answer, {"role": "user", "content": "continue"}]


@pytest.mark.asyncio
async def test_non_streamed_model_retry_does_not_rewind_committed_session_input(
    make_session: SessionFactory,
) -> None:
    model = ScriptedModel()
    model.extend(
        [
            APIConnectionError(
                message="connection error",
                request=httpx.Request("POST", "https://example.com"),  # type: ignore[arg-type]
            ),
            [get_text_message("done")],
        ]
    )
    agent = Agent(
        name="test",
        model=model,
        model_settings=ModelSettings(
            retry=ModelRetrySettings(
                max_retries=1,
                policy=retry_policies.network_error(),
            )
        ),
    )
    session = make_session("retry-session")
    await session.add_items([get_text_input_item("previous")])

    try:
        result = await Runner.run(agent, input="test", session=session)
        saved_items = await session.get_items()
    finally:
        session.close()

    assert result.final_output == "done"
    assert [item.get("role") for item in saved_items] == ["user", "user", "assistant"]
    assert [item.get("content") for item in saved_items[:2]] == ["previous", "test"]


@pytest.mark.asyncio
async def test_session_persists_only_new_step_items(
    monkeypatch: pytest.MonkeyPatch, make_list_session: SessionFactory
) -> None:
    """Ensure only per-turn new_step_items are persisted to the session."""

    session = make_list_session("test")
    agent = Agent(name="agent", model=ScriptedModel())

    pre_item = _DummyRunItem(
        {"type": "message", "role": "assistant", "content": "old"}, "message_output_item"
    )
    new_item = _DummyRunItem(
        {"type": "message", "role": "assistant", "content": "new"}, "message_output_item"
    )
    new_response = ModelResponse(output=[], usage=Usage(), response_id="resp-1")
    turn_result = SingleStepResult(
        original_input="hello",
        model_response=new_response,
        pre_step_items=[cast(RunItem, pre_item)],
        new_step_items=[cast(RunItem, new_item)],
        next_step=NextStepFinalOutput(output="done"),
        tool_input_guardrail_results=[],
        tool_output_guardrail_results=[],
    )

    calls: list[list[RunItem]] = []

    from agents.run_internal import session_persistence as sp

    real_save_result = sp.save_result_to_session

    async def save_wrapper(
        sess: Any,
        original_input: Any,
        new_items: list[RunItem],
        run_state: RunState | None = None,
        **kwargs: Any,
    ) -> None:
        calls.append(list(new_items))
        await real_save_result(sess, original_input, new_items, run_state, **kwargs)

    async def fake_run_single_turn(**_: Any) -> SingleStepResult:
        return turn_result

    async def fake_run_output_guardrails(*_: Any, **__: Any) -> list[Any]:
        return []

    async def noop_initialize_computer_tools(
        *args: Any, tools: list[Any], **kwargs: Any
    ) -> list[Any]:
        return tools

    monkeypatch.setattr("agents.run.save_result_to_session", save_wrapper)
    monkeypatch.setattr(
        "agents.run_internal.session_persistence.save_result_to_session", save_wrapper
    )
    monkeypatch.setattr(
        "agents.run_internal.agent_runner_helpers.save_result_to_session", save_wrapper
    )
    monkeypatch.setattr("agents.run.run_single_turn", fake_run_single_turn)
    monkeypatch.setattr("agents.run_internal.run_loop.run_single_turn", fake_run_single_turn)
    monkeypatch.setattr("agents.run.run_output_guardrails", fake_run_output_guardrails)
    monkeypatch.setattr(
        "agents.run_internal.run_loop.run_output_guardrails", fake_run_output_guardrails
    )

    async def fake_get_all_tools(*_: Any, **__: Any) -> list[Any]:
        return []

    monkeypatch.setattr("agents.run_internal.run_loop.get_all_tools", fake_get_all_tools)
    monkeypatch.setattr(
        "agents.run_internal.run_loop.initialize_computer_tools", noop_initialize_computer_tools
    )

    result = await Runner.run(agent, input="hello", session=session)

    assert result.final_output == "done"
    # First save writes the user input; second save should contain only the new_step_items.
    assert len(calls) >= 2
    assert calls[-1] == [cast(RunItem, new_item)]

    items = await session.get_items()
    assert len(items) == 2
    assert any("new" in cast(dict[str, Any], item).get("content", "") for item in items)
    assert not any("old" in cast(dict[str, Any], item).get("content", "") for item in items)


def test_output_guardrail_tripwire_does_not_save_assistant_message_to_session_sync(
    make_list_session: SessionFactory,
) -> None:
    def guardrail_function(
        _context: RunContextWrapper[Any], _agent: Agent[Any], _agent_output: Any
    ) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

    session = make_list_session("test")
    model = ScriptedModel()
    model.enqueue([get_text_message("should_not_be_saved")])
    agent = Agent(
        name="test",
        model=model,
        output_guardrails=[OutputGuardrail(guardrail_function=guardrail_function)],
    )

    with pytest.raises(OutputGuardrailTripwireTriggered):
        Runner.run_sync(agent, input="user_message", session=session)

    items = asyncio.run(session.get_items())
    assert [
        cast(dict[str, Any], item).get("type") or cast(dict[str, Any], item).get("role")
        for item in items
    ] == ["user"]


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.asyncio
async def test_output_guardrail_error_preserves_final_output_in_session(
    streamed: bool, make_list_session: SessionFactory
) -> None:
    def guardrail_function(
        _context: RunContextWrapper[Any], _agent: Agent[Any], _agent_output: Any
    ) -> GuardrailFunctionOutput:
        raise RuntimeError("guardrail failed")

    session = make_list_session("test")
    model = ScriptedModel()
    model.enqueue([get_text_message("preserved_on_guardrail_error")])
    agent = Agent(
        name="test",
        model=model,
        output_guardrails=[OutputGuardrail(guardrail_function=guardrail_function)],
    )

    with pytest.raises(RuntimeError, match="guardrail failed"):  # noqa: PT012
        if streamed:
            result = Runner.run_streamed(agent, input="user_message", session=session)
            async for _ in result.stream_events():
                pass
        else:
            await Runner.run(agent, input="user_message", session=session)

    items = await session.get_items()
    assert [
        cast(dict[str, Any], item).get("type") or cast(dict[str, Any], item).get("role")
        for item in items
    ] == ["user", "message"]


@pytest.mark.asyncio
async def test_output_guardrail_cancellation_preserves_final_output_in_session(
    make_list_session: SessionFactory,
) -> None:
    guardrail_started = asyncio.Event()

    async def guardrail_function(
        _context: RunContextWrapper[Any], _agent: Agent[Any], _agent_output: Any
    ) -> GuardrailFunctionOutput:
        guardrail_started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    session = make_list_session("test")
    model = ScriptedModel()
    model.enqueue([get_text_message("preserved_on_guardrail_cancellation")])
    agent = Agent(
        name="test",
        model=model,
        output_guardrails=[OutputGuardrail(guardrail_function=guardrail_function)],
    )

    run_task = asyncio.create_task(Runner.run(agent, input="user_message", session=session))
    await guardrail_started.wait()
    run_task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await run_task

    items = await session.get_items()
    assert [
        cast(dict[str, Any], item).get("type") or cast(dict[str, Any], item).get("role")
        for item in items
    ] == ["user", "message"]


@pytest.mark.asyncio
async def test_resumed_final_output_persists_once_after_passing_output_guardrail(
    make_list_session: SessionFactory,
) -> None:
    def guardrail_function(
        _context: RunContextWrapper[Any], _agent: Agent[Any], _agent_output: Any
    ) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)

    @function_tool
    def foo(a: str) -> str:
        return f"result:{a}"

    session = make_list_session("test")
    model = ScriptedModel()
    model.enqueue([get_function_tool_call("foo", json.dumps({"a": "b"}))])
    agent = Agent(
        name="test",
        model=model,
        tools=[foo],
        output_guardrails=[OutputGuardrail(guardrail_function=guardrail_function)],
    )

    streamed = Runner.run_streamed(agent, input="user_message", session=session)
    async for event in streamed.stream_events():
        if event.type == "run_item_stream_event" and event.name == "tool_output":
            streamed.cancel(mode="after_turn")

    items_before_resume = await session.get_items()
    state = streamed.to_state()
    state._current_turn_persisted_item_count = 2

    model.enqueue([get_text_message("accepted_final")])
    resumed = await Runner.run(agent, state, session=session)
    assert resumed.final_output == "accepted_final"

    items_after_resume = await session.get_items()
    assert items_after_resume[: len(items_before_resume)] == items_before_resume
    assistant_messages = [
        item
        for item in items_after_resume
        if cast(dict[str, Any], item).get("role") == "assistant"
        and cast(dict[str, Any], item).get("type") == "message"
    ]
    assert len(assistant_messages) == 1
    content = cast(dict[str, Any], assistant_messages[0]).get("content")
    assert isinstance(content, list)
    assert any(isinstance(part, dict) and part.get("text") == "accepted_final" for part in content)


@pytest.mark.parametrize("tripwire_triggered", [False, True])
@pytest.mark.asyncio
async def test_resumed_final_tool_persists_call_and_output_after_output_guardrail(
    tripwire_triggered: bool,
    make_list_session: SessionFactory,
) -> None:
    def guardrail_function(
        _context: RunContextWrapper[Any], _agent: Agent[Any], _agent_output: Any
    ) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(
            output_info=None,
            tripwire_triggered=tripwire_triggered,
        )

    @function_tool(name_override="commit_tool")
    def commit_tool() -> str:
        return "committed-result"

    session = make_list_session("test")
    model = ScriptedModel()
    model.enqueue([get_function_tool_call("commit_tool", "{}", call_id="call-first")])
    agent = Agent(
        name="test",
        model=model,
        tools=[commit_tool],
        output_guardrails=[OutputGuardrail(guardrail_function=guardrail_function)],
    )

    streamed = Runner.run_streamed(agent, input="user_message", session=session)
    async for event in streamed.stream_events():
        if event.type == "run_item_stream_event" and event.name == "tool_output":
            streamed.cancel(mode="after_turn")

    state = streamed.to_state()
    assert state._current_turn_persisted_item_count == 2

    agent.tool_use_behavior = "stop_on_first_tool"
    model.enqueue([get_function_tool_call("commit_tool", "{}", call_id="call-second")])

    if tripwire_triggered:
        with pytest.raises(OutputGuardrailTripwireTriggered):
            await Runner.run(agent, state, session=session)
    else:
        result = await Runner.run(agent, state, session=session)
        assert result.final_output == "committed-result"

    assert state._current_turn_persisted_item_count == 2
    items = await session.get_items()
    assert [
        (
            cast(dict[str, Any], item).get("type") or cast(dict[str, Any], item).get("role"),
            cast(dict[str, Any], item).get("call_id"),
        )
        for item in items
    ] == [
        ("user", None),
        ("function_call", "call-first"),
        ("function_call_output", "call-first"),
        ("function_call", "call-second"),
        ("function_call_output", "call-second"),
    ]
    assert cast(dict[str, Any], items[-1]).get("output") == (
        run_loop._OUTPUT_GUARDRAIL_BLOCKED_TOOL_OUTPUT if tripwire_triggered else "committed-result"
    )
    if tripwire_triggered:
        assert "committed-result" not in json.dumps(items[-2:])


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "run_kwargs",
    [
        {"conversation_id": "conv-test"},
        {"previous_response_id": "resp-test"},
        {"auto_previous_response_id": True},
    ],
)
async def test_run_rejects_session_with_server_managed_conversation(
    run_kwargs: dict[str, Any], make_list_session: SessionFactory
) -> None:
    model = ScriptedModel()
    model.enqueue([get_text_message("done")])
    agent = Agent(name="test", model=model)
    session = make_list_session("test")

    with pytest.raises(UserError, match="Session persistence"):
        await Runner.run(agent, input="test", session=session, **run_kwargs)


@pytest.mark.asyncio
async def test_run_rejects_session_with_resumed_conversation_state(
    make_list_session: SessionFactory,
) -> None:
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    session = make_list_session("test")
    context_wrapper = RunContextWrapper(context=None)
    state = RunState(
        context=context_wrapper,
        original_input="hello",
        starting_agent=agent,
        conversation_id="conv-test",
    )

    with pytest.raises(UserError, match="Session persistence"):
        await Runner.run(agent, state, session=session)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "run_kwargs",
    [
        {"conversation_id": "conv-test"},
        {"previous_response_id": "resp-test"},
        {"auto_previous_response_id": True},
    ],
)
async def test_run_streamed_rejects_session_with_server_managed_conversation(
    run_kwargs: dict[str, Any],
    make_list_session: SessionFactory,
) -> None:
    model = ScriptedModel()
    model.enqueue([get_text_message("done")])
    agent = Agent(name="test", model=model)
    session = make_list_session("test")

    with pytest.raises(UserError, match="Session persistence"):
        Runner.run_streamed(agent, input="test", session=session, **run_kwargs)


@pytest.mark.asyncio
async def test_run_streamed_rejects_session_with_resumed_conversation_state(
    make_list_session: SessionFactory,
) -> None:
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    session = make_list_session("test")
    context_wrapper = RunContextWrapper(context=None)
    state = RunState(
        context=context_wrapper,
        original_input="hello",
        starting_agent=agent,
        conversation_id="conv-test",
    )

    with pytest.raises(UserError, match="Session persistence"):
        Runner.run_streamed(agent, state, session=session)


@pytest.mark.asyncio
async def test_manual_pending_shell_call_input_is_preserved_non_streamed_with_session(
    make_list_session: SessionFactory,
) -> None:
    model = ScriptedModel()
    agent = Agent(
        name="manual-shell",
        model=model,
        tools=[get_function_tool("test_func", "tool_result")],
    )
    session = make_list_session("test")
    pending_shell_call = cast(
        TResponseInputItem,
        make_shell_call("manual_shell", id_value="shell_1", commands=["echo hi"]),
    )
    model.extend(
        [
            [get_function_tool_call("test_func", '{"arg": "foo"}')],
            [get_text_message("done")],
        ]
    )

    result = await Runner.run(agent, input=[pending_shell_call], session=session)

    assert result.final_output == "done"
    assert bool(model.calls)
    assert any(
        isinstance(item, dict)
        and item.get("type") == "shell_call"
        and item.get("call_id") == "manual_shell"
        for item in model.calls[0].input
    )

    last_input = model.calls[-1].input
    assert isinstance(last_input, list)
    assert any(
        isinstance(item, dict)
        and item.get("type") == "shell_call"
        and item.get("call_id") == "manual_shell"
        for item in last_input
    )


@pytest.mark.asyncio
async def test_manual_pending_shell_call_input_is_preserved_streamed_with_session(
    make_list_session: SessionFactory,
) -> None:
    model = ScriptedModel()
    agent = Agent(name="manual-shell", model=model)
    session = make_list_session("test")
    pending_shell_call = cast(
        TResponseInputItem,
        make_shell_call("manual_shell", id_value="shell_1", commands=["echo hi"]),
    )
    model.enqueue([get_text_message("done")])

    result = Runner.run_streamed(agent, input=[pending_shell_call], session=session)
    async for _ in result.stream_events():
        pass

    assert result.final_output == "done"
    last_input = model.calls[-1].input
    assert isinstance(last_input, list)
    assert any(
        isinstance(item, dict)
        and item.get("type") == "shell_call"
        and item.get("call_id") == "manual_shell"
        for item in last_input
    )


@pytest.mark.asyncio
async def test_session_add_items_called_multiple_times_for_multi_turn_completion(
    make_session: SessionFactory,
) -> None:
    """Test that SQLiteSession.add_items is called multiple times
    during a multi-turn agent completion.

    """
    with tempfile.TemporaryDirectory() as temp_dir:
        db_path = Path(temp_dir) / "test_agent_runner_session_multi_turn_calls.db"
        session_id = "runner_session_multi_turn_calls"
        session = make_session(session_id, db_path)

        # Define a tool that will be called by the orchestrator agent
        @function_tool
        async def echo_tool(text: str) -> str:
            return f"Echo: {text}"

        # Orchestrator agent that calls the tool multiple times in one completion
        orchestrator_agent = Agent(
            name="orchestrator_agent",
            instructions=(
                "Call echo_tool twice with inputs of 'foo' and 'bar', then return a summary."
            ),
            tools=[echo_tool],
        )

        # Patch the model to simulate two tool calls and a final message
        model = ScriptedModel()
        orchestrator_agent.model = model
        model.extend(
            [
                # First turn: tool call
                [get_function_tool_call("echo_tool", json.dumps({"text": "foo"}), call_id="1")],
                # Second turn: tool call
                [get_function_tool_call("echo_tool", json.dumps({"text": "bar"}), call_id="2")],
                # Third turn: final output
                [get_final_output_message("Summary: Echoed foo and bar")],
            ]
        )

        # Patch add_items to count calls
        with patch.object(type(session), "add_items", wraps=session.add_items) as mock_add_items:
            result = await Runner.run(orchestrator_agent, input="foo and bar", session=session)

            expected_items = [
                {"content": "foo and bar", "role": "user"},
                {
                    "arguments": '{"text": "foo"}',
                    "call_id": "1",
                    "name": "echo_tool",
                    "type": "function_call",
                    "id": "1",
                },
                {"call_id": "1", "output": "Echo: foo", "type": "function_call_output"},
                {
                    "arguments": '{"text": "bar"}',
                    "call_id": "2",
                    "name": "echo_tool",
                    "type": "function_call",
                    "id": "1",
                },
                {"call_id": "2", "output": "Echo: bar", "type": "function_call_output"},
                {
                    "id": "1",
                    "content": [
                        {
                            "annotations": [],
                            "logprobs": [],
                            "text": "Summary: Echoed foo and bar",
                            "type": "output_text",
                        }
                    ],
                    "role": "assistant",
                    "status": "completed",
                    "type": "message",
                },
            ]

            expected_calls = [
                # First call is the initial input
                (([expected_items[0]],),),
                # Second call is the first tool call and its result
                (([expected_items[1], expected_items[2]],),),
                # Third call is the second tool call and its result
                (([expected_items[3], expected_items[4]],),),
                # Fourth call is the final output
                (([expected_items[5]],),),
            ]
            assert mock_add_items.call_args_list == expected_calls
            assert result.final_output == "Summary: Echoed foo and bar"
            assert (await session.get_items()) == expected_items

        session.close()
