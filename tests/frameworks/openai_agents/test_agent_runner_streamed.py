# Copyright (c) 2025 OpenAI. Licensed under the MIT License: see LICENSE in this directory.
#
# Adopted by memstore from openai-agents 0.25.0, tests/test_agent_runner_streamed.py (the source
# distribution on PyPI, openai_agents-0.25.0.tar.gz), under the MIT License above: the tests that
# run the Runner with a session they construct (SQLiteSession, or the tests' in-memory
# SimpleListSession), with the module-level helpers they use. Changed: each session is built by
# the `make_session` fixture instead (conftest.py and swap.py here: memstore's MemstoreSession on
# SessionStore and AsyncSessionStore, SQLite and PostgreSQL), or for a SimpleListSession by
# `make_list_session` (the same, on a SessionStore on SQLite and an AsyncSessionStore on
# PostgreSQL); helpers come from this directory
# (responses.py, hitl.py, model_test_helpers.py); formatted by ruff, its style as the SDK's
# (ruff's noqa below), seven lines marked for mypy. The
# file's other tests construct no session, or hand the Runner a session that fails or blocks on
# purpose: not adopted (EXCLUDED).
"""The OpenAI Agents SDK's own streamed Runner tests that construct a session, run on
MemstoreSession."""

# ruff: noqa: PT012, PT018, SIM108

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, cast

import httpx
import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrail,
    InputGuardrailTripwireTriggered,
    OutputGuardrail,
    OutputGuardrailBlockedMessageArgs,
    OutputGuardrailTripwireTriggered,
    RunContextWrapper,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolOutputGuardrailData,
    UserError,
    function_tool,
)
from agents.items import (
    RunItem,
    ToolCallOutputItem,
    TResponseInputItem,
    TResponseStreamEvent,
)
from agents.run import RunConfig
from agents.run_internal import run_loop
from agents.run_state import RunState
from agents.testing import ScriptedModel
from agents.tool_guardrails import (
    tool_output_guardrail,
)
from openai import NotFoundError
from openai.types.responses import ResponseFunctionToolCall
from openai.types.responses.response_reasoning_item import ResponseReasoningItem, Summary

from tests.frameworks.openai_agents.hitl import (
    consume_stream,
    make_model_and_agent,
    queue_function_call_and_text,
)
from tests.frameworks.openai_agents.responses import (
    get_function_tool,
    get_function_tool_call,
    get_handoff_tool_call,
    get_text_input_item,
    get_text_message,
)
from tests.frameworks.openai_agents.swap import SessionFactory

_MATRIX = (
    "a matrix of the Runner's approval and guardrail resumption (6 to 16 cases a store) whose "
    "session is the tests' in-memory one: left out for the suite's run time; the adopted tests "
    "above persist and resume the same kinds of items through memstore"
)
_CONVERSATIONS = (
    "one of its sessions is a stand-in for OpenAI's server-side Conversations session, whose id "
    "handling differs from a local store's on purpose"
)
_TEST_DOUBLE = (
    "its session is a test double that counts pops, or fails, cancels or blocks on purpose: the "
    "test's meaning is that double's behaviour"
)
EXCLUDED = {
    "test_streamed_model_retry_does_not_rewind_committed_session_input": _TEST_DOUBLE,
    "test_stream_input_persistence_strips_ids_for_openai_conversation_session": _CONVERSATIONS,
    "test_terminal_behaviors_defer_completed_approval_siblings": _MATRIX,
    "test_persisted_run_llm_again_checkpoint_rejects_terminal_behavior_change": _MATRIX,
    "test_resumed_approved_tool_final_persists_complete_post_verdict_batch": _MATRIX,
    "test_serialized_later_turn_approval_with_output_guardrail_resumes": _MATRIX,
    "test_serialized_mixed_approval_guardrail_preserves_only_accepted_outputs": _MATRIX,
    "test_serialized_filtered_handoff_approval_with_empty_prefix_resumes": _MATRIX,
    "test_legacy_approval_checkpoint_uses_current_session_ownership": _MATRIX,
    "test_stop_on_first_tool_final_persists_committed_tool_items_on_tripwire": _CONVERSATIONS,
    "test_terminal_tool_trip_falls_back_when_blocked_message_formatter_fails": _MATRIX,
    "test_streamed_session_save_error_takes_precedence_over_output_guardrail_error": _TEST_DOUBLE,
    "test_streamed_session_save_cancellation_is_not_a_public_immediate_cancel": _TEST_DOUBLE,
    "test_streamed_session_save_direct_base_exception_is_terminal": _TEST_DOUBLE,
    "test_public_immediate_cancel_during_guardrail_recovery_save_stays_prompt": _TEST_DOUBLE,
    "test_streamed_cancel_during_output_guardrail_starts_no_final_turn_write": _TEST_DOUBLE,
}
"""The tests of the SDK's file that construct a session and are not adopted, with the reason
(its other tests construct no session)."""


def _find_reasoning_input_item(
    items: str | list[TResponseInputItem] | Any,
) -> dict[str, Any] | None:
    if not isinstance(items, list):
        return None
    for item in items:
        if isinstance(item, dict) and item.get("type") == "reasoning":
            return cast(dict[str, Any], item)
    return None


class _StreamedRevokedReasoningIdModel(ScriptedModel):
    """ScriptedModel that 404s like the Responses API when a revoked reasoning ID is replayed."""

    def __init__(self) -> None:
        super().__init__()
        self.revoked_reasoning_ids: set[str] = set()

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        *args: Any,
        **kwargs: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
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
        return super().stream_response(system_instructions, input, *args, **kwargs)


@pytest.mark.asyncio
async def test_streamed_omit_policy_strips_reasoning_ids_already_stored_in_the_session(
    make_session: SessionFactory,
) -> None:
    """Adopting `omit` must also cover reasoning IDs a session recorded before it was set.

    Streaming counterpart of the non-streamed regression test for
    https://github.com/openai/openai-agents-python/issues/2020.
    """
    model = _StreamedRevokedReasoningIdModel()
    specialist = Agent(name="specialist", model=model)
    triage = Agent(name="triage", model=model, handoffs=[specialist])
    session = make_session("issue-2020-streamed")

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
    first = Runner.run_streamed(triage, input="hello", session=session)
    async for _ in first.stream_events():
        pass
    assert first.final_output == "handled"
    stored_reasoning = _find_reasoning_input_item(await session.get_items())
    assert stored_reasoning is not None
    assert stored_reasoning.get("id") == "rs_triage"

    # The server no longer resolves that reasoning item.
    model.revoked_reasoning_ids.add("rs_triage")

    # Turn 2 opts into the documented mitigation for this failure.
    model.extend([[get_text_message("done")]])
    second = Runner.run_streamed(
        triage,
        input="anything else?",
        session=session,
        run_config=RunConfig(reasoning_item_id_policy="omit"),
    )
    async for _ in second.stream_events():
        pass

    assert second.final_output == "done"
    replayed_reasoning = _find_reasoning_input_item(model.calls[-1].input)
    assert replayed_reasoning is not None
    assert "id" not in replayed_reasoning


@pytest.mark.asyncio
async def test_streamed_run_again_persists_tool_items_to_session(
    make_list_session: SessionFactory,
) -> None:
    model = ScriptedModel()
    call_id = "call-session-run-again"
    agent = Agent(
        name="test",
        model=model,
        tools=[get_function_tool("foo", "tool_result")],
    )
    session = make_list_session("test")

    model.extend(
        [
            [get_function_tool_call("foo", json.dumps({"a": "b"}), call_id=call_id)],
            [get_text_message("done")],
        ]
    )

    result = Runner.run_streamed(agent, input="user_message", session=session)
    await consume_stream(result)

    saved_items = await session.get_items()
    assert any(
        isinstance(item, dict)
        and item.get("type") == "function_call"
        and item.get("call_id") == call_id
        for item in saved_items
    )
    assert any(
        isinstance(item, dict)
        and item.get("type") == "function_call_output"
        and item.get("call_id") == call_id
        for item in saved_items
    )


@pytest.mark.asyncio
async def test_input_guardrail_streamed_does_not_save_assistant_message_to_session(
    make_list_session: SessionFactory,
) -> None:
    async def guardrail_function(
        context: RunContextWrapper[Any], agent: Agent[Any], input: Any
    ) -> GuardrailFunctionOutput:
        await asyncio.sleep(0.01)
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

    session = make_list_session("test")

    model = ScriptedModel()
    model.enqueue([get_text_message("should_not_be_saved")])

    agent = Agent(
        name="test",
        model=model,
        input_guardrails=[InputGuardrail(guardrail_function=guardrail_function)],
    )

    with pytest.raises(InputGuardrailTripwireTriggered):
        result = Runner.run_streamed(agent, input="user_message", session=session)
        async for _ in result.stream_events():
            pass

    items = await session.get_items()

    assert len(items) == 1
    first_item = cast(dict[str, Any], items[0])
    assert "role" in first_item
    assert first_item["role"] == "user"


@pytest.mark.asyncio
async def test_input_guardrail_streamed_persists_user_input_for_sequential_guardrail(
    make_list_session: SessionFactory,
) -> None:
    def guardrail_function(
        context: RunContextWrapper[Any], agent: Agent[Any], input: Any
    ) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

    session = make_list_session("test")

    model = ScriptedModel()
    model.enqueue([get_text_message("should_not_be_saved")])

    agent = Agent(
        name="test",
        model=model,
        input_guardrails=[
            InputGuardrail(guardrail_function=guardrail_function, run_in_parallel=False)
        ],
    )

    with pytest.raises(InputGuardrailTripwireTriggered):
        result = Runner.run_streamed(agent, input="user_message", session=session)
        async for _ in result.stream_events():
            pass

    items = await session.get_items()

    assert len(items) == 1
    first_item = cast(dict[str, Any], items[0])
    assert "role" in first_item
    assert first_item["role"] == "user"


@pytest.mark.asyncio
async def test_input_guardrail_streamed_persists_user_input_for_async_sequential_guardrail(
    make_list_session: SessionFactory,
) -> None:
    async def guardrail_function(
        context: RunContextWrapper[Any], agent: Agent[Any], input: Any
    ) -> GuardrailFunctionOutput:
        await asyncio.sleep(0)
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

    session = make_list_session("test")

    model = ScriptedModel()
    model.enqueue([get_text_message("should_not_be_saved")])

    agent = Agent(
        name="test",
        model=model,
        input_guardrails=[
            InputGuardrail(guardrail_function=guardrail_function, run_in_parallel=False)
        ],
    )

    with pytest.raises(InputGuardrailTripwireTriggered):
        result = Runner.run_streamed(agent, input="user_message", session=session)
        async for _ in result.stream_events():
            pass

    items = await session.get_items()

    assert len(items) == 1
    first_item = cast(dict[str, Any], items[0])
    assert "role" in first_item
    assert first_item["role"] == "user"


@pytest.mark.asyncio
async def test_stream_input_persistence_saves_only_new_turn_input(
    monkeypatch: pytest.MonkeyPatch, make_list_session: SessionFactory
) -> None:
    session = make_list_session("test")
    model = ScriptedModel()
    model.extend(
        [
            [get_text_message("first")],
            [get_text_message("second")],
        ]
    )
    agent = Agent(name="test", model=model)

    from agents.run_internal import session_persistence as sp

    real_save_result = sp.save_result_to_session
    input_saves: list[list[TResponseInputItem]] = []

    async def save_wrapper(
        sess: Any,
        original_input: Any,
        new_items: list[RunItem],
        run_state: Any = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(original_input, list) and original_input:
            input_saves.append(list(original_input))
        await real_save_result(sess, original_input, new_items, run_state, **kwargs)

    monkeypatch.setattr(
        "agents.run_internal.session_persistence.save_result_to_session", save_wrapper
    )
    monkeypatch.setattr("agents.run_internal.run_loop.save_result_to_session", save_wrapper)

    run_config = RunConfig(session_input_callback=lambda existing, new: existing + new)

    first = Runner.run_streamed(
        agent, input=[get_text_input_item("hello")], session=session, run_config=run_config
    )
    async for _ in first.stream_events():
        pass

    second = Runner.run_streamed(
        agent, input=[get_text_input_item("next")], session=session, run_config=run_config
    )
    async for _ in second.stream_events():
        pass

    assert len(input_saves) == 2, "each turn should persist only the turn input once"
    assert all(len(saved) == 1 for saved in input_saves), (
        "each persisted input should contain only the new turn items"
    )
    first_saved = input_saves[0][0]
    second_saved = input_saves[1][0]
    assert isinstance(first_saved, dict) and first_saved.get("content") == "hello"
    assert isinstance(second_saved, dict) and second_saved.get("content") == "next"


@pytest.mark.asyncio
async def test_streaming_resume_with_session_does_not_duplicate_items(
    make_list_session: SessionFactory,
) -> None:
    """Ensure session persistence does not duplicate tool items after streaming resume."""

    async def test_tool() -> str:
        return "tool_result"

    tool = function_tool(test_tool, name_override="test_tool", needs_approval=True)
    model, agent = make_model_and_agent(name="test", tools=[tool])
    session = make_list_session("test")

    queue_function_call_and_text(
        model,
        get_function_tool_call("test_tool", json.dumps({}), call_id="call-resume"),
        followup=[get_text_message("done")],
    )

    first = Runner.run_streamed(agent, input="Use test_tool", session=session)
    await consume_stream(first)
    assert first.interruptions

    state = first.to_state()
    state.approve(first.interruptions[0])

    resumed = Runner.run_streamed(agent, state, session=session)
    await consume_stream(resumed)
    assert resumed.final_output == "done"

    saved_items = await session.get_items()
    call_count = sum(
        1
        for item in saved_items
        if isinstance(item, dict)
        and item.get("type") == "function_call"
        and item.get("call_id") == "call-resume"
    )
    output_count = sum(
        1
        for item in saved_items
        if isinstance(item, dict)
        and item.get("type") == "function_call_output"
        and item.get("call_id") == "call-resume"
    )

    assert call_count == 1
    assert output_count == 1


@pytest.mark.parametrize("mode", ["non_streamed", "streamed"])
@pytest.mark.asyncio
async def test_run_llm_again_approval_persists_completed_sibling(
    mode: str, make_list_session: SessionFactory
) -> None:
    side_effects: list[str] = []

    @function_tool(name_override="approval_tool", needs_approval=True)
    def approval_tool() -> str:
        side_effects.append("approved")
        return "approved-output"

    @function_tool(name_override="sibling_tool")
    def sibling_tool() -> str:
        side_effects.append("sibling")
        return "sibling-output"

    model = ScriptedModel(
        [
            [
                get_function_tool_call("approval_tool", "{}", call_id="call-approved"),
                get_function_tool_call("sibling_tool", "{}", call_id="call-sibling"),
            ],
            [get_text_message("done")],
        ]
    )
    agent = Agent(
        name="test",
        model=model,
        tools=[approval_tool, sibling_tool],
        output_guardrails=[
            OutputGuardrail(
                guardrail_function=lambda _context, _agent, _output: GuardrailFunctionOutput(
                    output_info=None,
                    tripwire_triggered=False,
                )
            )
        ],
    )
    session = make_list_session("test")

    async def run_once(input_value: Any) -> Any:
        if mode == "non_streamed":
            return await Runner.run(agent, input_value, session=session)
        result = Runner.run_streamed(agent, input_value, session=session)
        await consume_stream(result)
        return result

    first = await run_once("Use both tools")
    assert len(first.interruptions) == 1
    assert side_effects == ["sibling"]

    saved_before_resume = await session.get_items()
    saved_sibling_items = [
        item
        for item in saved_before_resume
        if isinstance(item, dict) and item.get("call_id") == "call-sibling"
    ]
    assert [item.get("type") for item in saved_sibling_items] == [
        "function_call",
        "function_call_output",
    ]
    assert saved_sibling_items[1].get("output") == "sibling-output"

    state = first.to_state()
    assert state._current_turn_persisted_item_count > 0
    state.approve(first.interruptions[0])
    resumed = await run_once(state)

    assert resumed.final_output == "done"
    assert side_effects == ["sibling", "approved"]
    saved_after_resume = await session.get_items()
    for call_id in ("call-sibling", "call-approved"):
        assert [
            item.get("type")
            for item in saved_after_resume
            if isinstance(item, dict) and item.get("call_id") == call_id
        ] == ["function_call", "function_call_output"]


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.asyncio
async def test_serialized_nested_approval_with_parent_output_guardrail(
    streamed: bool, make_list_session: SessionFactory
) -> None:
    executed: list[str] = []
    guarded: list[str] = []

    @function_tool(needs_approval=True)
    def check(label: str) -> str:
        executed.append(label)
        return label

    def guard(
        _context: RunContextWrapper[Any], _agent: Agent[Any], output: str
    ) -> GuardrailFunctionOutput:
        guarded.append(output)
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)

    child_model = ScriptedModel()
    parent_model = ScriptedModel()
    for label in ("alpha", "beta"):
        child_model.enqueue(
            [
                get_function_tool_call(
                    "check",
                    json.dumps({"label": label}),
                    call_id="outer-alpha" if label == "beta" else "inner-alpha",
                )
            ]
        )
        child_model.enqueue([get_text_message(label)])
        parent_model.enqueue(
            [get_function_tool_call("ask", json.dumps({"input": label}), call_id=f"outer-{label}")]
        )
    parent_model.enqueue([get_text_message("done")])
    child = Agent(name="child", model=child_model, tools=[check])
    parent = Agent(
        name="parent",
        model=parent_model,
        tools=[child.as_tool(tool_name="ask", tool_description="Check a label")],
        output_guardrails=[OutputGuardrail(guardrail_function=guard)],
    )
    session = make_list_session("nested-approval")

    async def run(value: str | RunState[Any]) -> Any:
        if streamed:
            result = Runner.run_streamed(parent, value, session=session)
            await consume_stream(result)
            return result
        return await Runner.run(parent, value, session=session)

    result = await run("Check alpha and beta")
    for index, label in enumerate(("alpha", "beta")):
        state = await RunState.from_string(parent, result.to_state().to_string())
        (approval,) = state.get_interruptions()
        assert approval.agent is child
        assert isinstance(approval.raw_item, ResponseFunctionToolCall)
        assert approval.raw_item.call_id == ("inner-alpha" if label == "alpha" else "outer-alpha")
        assert executed == ["alpha", "beta"][:index]
        if label == "beta":
            # The child call ID overlaps a completed parent call. An older checkpoint
            # cannot use the nested ownership marker, even if its payload contains one.
            legacy = state.to_json()
            legacy["$schemaVersion"] = "1.21"
            old_state = await RunState.from_json(parent, legacy)
            old_state.approve(old_state.get_interruptions()[0])
            with pytest.raises(UserError, match="current response boundary cannot be proven"):
                await run(old_state)
            missing_child = state.to_json()
            del missing_child["last_processed_response"]["functions"][0]["agent_run_state"]
            unowned = await RunState.from_json(parent, missing_child)
            with pytest.raises(UserError, match="current response boundary cannot be proven"):
                await run(unowned)
            assert executed == ["alpha"]
        state.approve(approval)
        result = await run(state)
    assert result.final_output == "done"
    assert executed == ["alpha", "beta"]
    assert guarded == ["done"]
    assert [
        item.get("name")
        for item in await session.get_items()
        if item.get("type") == "function_call"
    ] == ["ask", "ask"]


@pytest.mark.parametrize("mode", ["non_streamed", "streamed"])
@pytest.mark.parametrize("customizer_kind", ["fixed", "sync"])
@pytest.mark.asyncio
async def test_terminal_tool_trip_uses_custom_blocked_message_everywhere(
    mode: str,
    customizer_kind: str,
    make_list_session: SessionFactory,
) -> None:
    blocked_message = "出力ガードレールにより非表示になりました。"
    formatter_args: list[OutputGuardrailBlockedMessageArgs[dict[str, str]]] = []
    context = {"locale": "ja"}

    def sync_formatter(
        args: OutputGuardrailBlockedMessageArgs[dict[str, str]],
    ) -> str:
        formatter_args.append(args)
        return blocked_message

    customizer: Any
    if customizer_kind == "fixed":
        customizer = blocked_message
    else:
        customizer = sync_formatter

    @tool_output_guardrail
    def retain_tool_output(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.allow(output_info=data.output)

    @function_tool(
        name_override="secret_tool",
        tool_output_guardrails=[retain_tool_output],
    )
    def secret_tool() -> str:
        return "blocked-secret"

    def reject_output(
        _context: RunContextWrapper[Any],
        _agent: Agent[Any],
        _output: Any,
    ) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(
            output_info={"secret": "blocked-output-info"},
            tripwire_triggered=True,
        )

    model = ScriptedModel([[get_function_tool_call("secret_tool", "{}", call_id="call-secret")]])
    guardrail = OutputGuardrail(
        guardrail_function=reject_output,
        name="localized_guardrail",
    )
    agent = Agent(
        name="test",
        model=model,
        tools=[secret_tool],
        tool_use_behavior="stop_on_first_tool",
        output_guardrails=[guardrail],
    )
    session = make_list_session("test")
    run_config = RunConfig(output_guardrail_blocked_message=customizer)
    streamed_result = None

    with pytest.raises(OutputGuardrailTripwireTriggered) as exc_info:
        if mode == "non_streamed":
            await Runner.run(
                agent,
                "run",
                context=context,
                session=session,
                run_config=run_config,
            )
        else:
            streamed_result = Runner.run_streamed(
                agent,
                "run",
                context=context,
                session=session,
                run_config=run_config,
            )
            await consume_stream(streamed_result)

    assert exc_info.value.guardrail_result.agent_output == blocked_message
    assert exc_info.value.guardrail_result.output.output_info is None
    saved_items = await session.get_items()
    assert cast(dict[str, Any], saved_items[-1])["output"] == blocked_message
    assert "blocked-secret" not in json.dumps(saved_items)
    assert "blocked-output-info" not in json.dumps(saved_items)

    if customizer_kind == "fixed":
        assert formatter_args == []
    else:
        assert len(formatter_args) == 1
        args = formatter_args[0]
        assert vars(args).keys() == {
            "default_message",
            "guardrail_name",
            "agent",
            "run_context",
        }
        assert args.default_message == run_loop._OUTPUT_GUARDRAIL_BLOCKED_TOOL_OUTPUT
        assert args.guardrail_name == "localized_guardrail"
        assert args.agent is agent
        assert args.run_context.context is context

    if streamed_result is not None:
        streamed_outputs = [
            item for item in streamed_result.new_items if isinstance(item, ToolCallOutputItem)
        ]
        assert [item.output for item in streamed_outputs] == [blocked_message]
        assert (
            streamed_result.tool_output_guardrail_results[0].output.output_info == blocked_message
        )
        serialized_state = streamed_result.to_state().to_json()
        assert blocked_message in json.dumps(serialized_state, ensure_ascii=False)
        assert "blocked-secret" not in json.dumps(serialized_state)
        assert "blocked-output-info" not in json.dumps(serialized_state)

    agent.output_guardrails = []
    model.enqueue([get_text_message("done")])
    if mode == "non_streamed":
        followup: Any = await Runner.run(
            agent,
            "continue",
            context=context,
            session=session,
            run_config=run_config,
        )
    else:
        followup = Runner.run_streamed(
            agent,
            "continue",
            context=context,
            session=session,
            run_config=run_config,
        )
        await consume_stream(followup)
    assert followup.final_output == "done"
    assert blocked_message in json.dumps(model.calls[-1].input, ensure_ascii=False)


@pytest.mark.parametrize("mode", ["non_streamed", "streamed"])
@pytest.mark.asyncio
async def test_blocked_message_final_output_is_not_persisted(
    mode: str, make_list_session: SessionFactory
) -> None:
    """Control for the committed-tool case: a rejected message is withheld from the session."""

    def output_guardrail(
        _context: RunContextWrapper[Any],
        _agent: Agent[Any],
        _output: Any,
    ) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

    model = ScriptedModel()
    model.enqueue([get_text_message("should_not_be_saved")])
    agent = Agent(
        name="test",
        model=model,
        output_guardrails=[OutputGuardrail(guardrail_function=output_guardrail)],
    )
    session = make_list_session("test")

    with pytest.raises(OutputGuardrailTripwireTriggered):
        if mode == "non_streamed":
            await Runner.run(agent, "user_message", session=session)
        else:
            result = Runner.run_streamed(agent, "user_message", session=session)
            await consume_stream(result)

    saved_items = await session.get_items()
    saved = [item.get("type") or item.get("role") for item in saved_items if isinstance(item, dict)]
    assert saved == ["user"]


@pytest.mark.parametrize("mode", ["non_streamed", "streamed"])
@pytest.mark.asyncio
async def test_blocked_final_persists_tool_items_but_not_the_message(
    mode: str, make_list_session: SessionFactory
) -> None:
    """A mixed final turn splits: the tool record is kept, the blocked message is not."""

    @function_tool(name_override="commit_tool")
    def commit_tool() -> str:
        return "committed-result"

    def output_guardrail(
        _context: RunContextWrapper[Any],
        _agent: Agent[Any],
        _output: Any,
    ) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(
            output_info={"reason": "message rejected"},
            tripwire_triggered=True,
        )

    model = ScriptedModel()
    model.extend(
        [
            [get_function_tool_call("commit_tool", "{}", call_id="call-mixed")],
            [get_text_message("should_not_be_saved")],
        ]
    )
    agent = Agent(
        name="test",
        model=model,
        tools=[commit_tool],
        output_guardrails=[OutputGuardrail(guardrail_function=output_guardrail)],
    )
    session = make_list_session("test")

    with pytest.raises(OutputGuardrailTripwireTriggered) as exc_info:
        if mode == "non_streamed":
            await Runner.run(agent, "Use commit_tool", session=session)
        else:
            result = Runner.run_streamed(agent, "Use commit_tool", session=session)
            await consume_stream(result)

    assert exc_info.value.guardrail_result.agent_output == "should_not_be_saved"
    assert exc_info.value.guardrail_result.output.output_info == {"reason": "message rejected"}

    saved_items = await session.get_items()
    saved = [item.get("type") or item.get("role") for item in saved_items if isinstance(item, dict)]
    assert saved == ["user", "function_call", "function_call_output"]


@pytest.mark.parametrize("mode", ["non_streamed", "streamed"])
@pytest.mark.parametrize("tripwire", [False, True], ids=["passes", "trips"])
@pytest.mark.asyncio
async def test_mixed_final_turn_session_order_and_committed_items(
    mode: str,
    tripwire: bool,
    make_list_session: SessionFactory,
) -> None:
    """A final turn holding a message *and* a committed tool call keeps model order when it passes.

    Only the tripwire case may drop anything, and only the undeliverable message. The passing case
    must persist the whole batch in the model's order, so a later run does not replay a reordered
    or truncated history.
    """

    @function_tool(name_override="commit_tool")
    def commit_tool() -> str:
        return "committed-result"

    def output_guardrail(
        _context: RunContextWrapper[Any],
        _agent: Agent[Any],
        _output: Any,
    ) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=tripwire)

    model = ScriptedModel()
    # The message precedes the tool call, so a split save would reorder the persisted turn.
    model.enqueue(
        [
            get_text_message("assistant-preamble"),
            get_function_tool_call("commit_tool", "{}", call_id="call-mixed"),
        ]
    )
    agent = Agent(
        name="test",
        model=model,
        tools=[commit_tool],
        tool_use_behavior="stop_on_first_tool",
        output_guardrails=[OutputGuardrail(guardrail_function=output_guardrail)],
    )
    session = make_list_session("test")

    async def run_once() -> Any:
        if mode == "non_streamed":
            return await Runner.run(agent, "Use commit_tool", session=session)
        result = Runner.run_streamed(agent, "Use commit_tool", session=session)
        await consume_stream(result)
        return result

    if tripwire:
        with pytest.raises(OutputGuardrailTripwireTriggered):
            await run_once()
    else:
        assert (await run_once()).final_output == "committed-result"

    saved_items = await session.get_items()
    saved = [item.get("type") or item.get("role") for item in saved_items if isinstance(item, dict)]

    if tripwire:
        # The undeliverable message is withheld; the tool that already ran is not.
        assert saved == ["user", "function_call", "function_call_output"]
    else:
        assert saved == ["user", "message", "function_call", "function_call_output"]


@pytest.mark.parametrize("mode", ["non_streamed", "streamed"])
@pytest.mark.asyncio
async def test_failing_output_guardrail_keeps_the_whole_final_turn(
    mode: str,
    make_list_session: SessionFactory,
) -> None:
    """A guardrail error leaves no rejection, so the completed turn remains replayable."""

    @function_tool(name_override="commit_tool")
    def commit_tool() -> str:
        return "committed-result"

    def output_guardrail(
        _context: RunContextWrapper[Any],
        _agent: Agent[Any],
        _output: Any,
    ) -> GuardrailFunctionOutput:
        raise RuntimeError("guardrail failed")

    model = ScriptedModel()
    model.enqueue(
        [
            get_text_message("assistant-preamble"),
            get_function_tool_call("commit_tool", "{}", call_id="call-mixed"),
        ]
    )
    agent = Agent(
        name="test",
        model=model,
        tools=[commit_tool],
        tool_use_behavior="stop_on_first_tool",
        output_guardrails=[OutputGuardrail(guardrail_function=output_guardrail)],
    )
    session = make_list_session("test")

    async def run_once() -> None:
        if mode == "non_streamed":
            await Runner.run(agent, "Use commit_tool", session=session)
        else:
            result = Runner.run_streamed(agent, "Use commit_tool", session=session)
            await consume_stream(result)

    with pytest.raises(RuntimeError, match="guardrail failed"):
        await run_once()

    saved_items = await session.get_items()
    saved = [item.get("type") or item.get("role") for item in saved_items if isinstance(item, dict)]
    assert saved == ["user", "message", "function_call", "function_call_output"]


@pytest.mark.parametrize("mode", ["non_streamed", "streamed"])
@pytest.mark.parametrize("tripwire", [False, True], ids=["passes", "trips"])
@pytest.mark.asyncio
async def test_blocked_tool_final_discards_reasoning_response_suffix_on_trip(
    mode: str,
    tripwire: bool,
    make_list_session: SessionFactory,
) -> None:
    """A reasoning-bearing response is preserved on pass and discarded completely on trip."""

    @function_tool(name_override="commit_tool")
    def commit_tool() -> str:
        return "committed-result"

    def output_guardrail(
        _context: RunContextWrapper[Any],
        _agent: Agent[Any],
        _output: Any,
    ) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=tripwire)

    model = ScriptedModel()
    model.enqueue(
        [
            ResponseReasoningItem(
                id="rs_committed",
                summary=[Summary(text="deciding to call the tool", type="summary_text")],
                type="reasoning",
            ),
            get_function_tool_call("commit_tool", "{}", call_id="call-reasoned"),
        ]
    )
    agent = Agent(
        name="test",
        model=model,
        tools=[commit_tool],
        tool_use_behavior="stop_on_first_tool",
        output_guardrails=[OutputGuardrail(guardrail_function=output_guardrail)],
    )
    session = make_list_session("test")

    async def run_once(input_value: Any) -> Any:
        if mode == "non_streamed":
            return await Runner.run(agent, input_value, session=session)
        result = Runner.run_streamed(agent, input_value, session=session)
        await consume_stream(result)
        return result

    if tripwire:
        with pytest.raises(OutputGuardrailTripwireTriggered):
            await run_once("Use commit_tool")
    else:
        assert (await run_once("Use commit_tool")).final_output == "committed-result"

    saved_items = await session.get_items()
    saved = [item.get("type") or item.get("role") for item in saved_items if isinstance(item, dict)]
    expected_saved = (
        ["user"] if tripwire else ["user", "reasoning", "function_call", "function_call_output"]
    )
    assert saved == expected_saved

    # The reasoning/call/output group has to reach the next request in that order.
    agent.output_guardrails = []
    model.enqueue([get_text_message("done")])
    followup = await run_once("Continue")
    assert followup.final_output == "done"

    model_input = model.calls[-1].input
    assert isinstance(model_input, list)
    replayed = [
        item.get("type")
        for item in model_input
        if isinstance(item, dict)
        and item.get("type") in {"reasoning", "function_call", "function_call_output"}
    ]
    expected_replayed = [] if tripwire else ["reasoning", "function_call", "function_call_output"]
    assert replayed == expected_replayed


@pytest.mark.parametrize("mode", ["non_streamed", "streamed"])
@pytest.mark.asyncio
async def test_blocked_tool_final_discards_suffix_with_multiple_reasoning_groups(
    mode: str,
    make_list_session: SessionFactory,
) -> None:
    """Any reasoning item makes the complete rejected current-response suffix unsupported."""

    @function_tool(name_override="commit_tool")
    def commit_tool() -> str:
        return "committed-result"

    def output_guardrail(
        _context: RunContextWrapper[Any],
        _agent: Agent[Any],
        _output: Any,
    ) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

    model = ScriptedModel()
    model.enqueue(
        [
            ResponseReasoningItem(
                id="rs_rejected",
                summary=[Summary(text="drafting the message", type="summary_text")],
                type="reasoning",
            ),
            get_text_message("rejected-preamble"),
            ResponseReasoningItem(
                id="rs_committed",
                summary=[Summary(text="deciding to call the tool", type="summary_text")],
                type="reasoning",
            ),
            get_function_tool_call("commit_tool", "{}", call_id="call-reasoned"),
        ]
    )
    agent = Agent(
        name="test",
        model=model,
        tools=[commit_tool],
        tool_use_behavior="stop_on_first_tool",
        output_guardrails=[OutputGuardrail(guardrail_function=output_guardrail)],
    )
    session = make_list_session("test")

    async def run_once(input_value: Any) -> Any:
        if mode == "non_streamed":
            return await Runner.run(agent, input_value, session=session)
        result = Runner.run_streamed(agent, input_value, session=session)
        await consume_stream(result)
        return result

    with pytest.raises(OutputGuardrailTripwireTriggered):
        await run_once("Use commit_tool")

    saved_items = await session.get_items()
    saved = [item.get("type") or item.get("role") for item in saved_items if isinstance(item, dict)]
    assert saved == ["user"]

    saved_reasoning_ids = [
        item.get("id") for item in saved_items if isinstance(item, dict) and item.get("id")
    ]
    assert saved_reasoning_ids == []

    # The unsupported response contributes nothing to the next model request.
    agent.output_guardrails = []
    model.enqueue([get_text_message("done")])
    followup = await run_once("Continue")
    assert followup.final_output == "done"

    model_input = model.calls[-1].input
    assert isinstance(model_input, list)
    replayed = [
        item.get("type")
        for item in model_input
        if isinstance(item, dict)
        and item.get("type") in {"reasoning", "message", "function_call", "function_call_output"}
    ]
    assert replayed == []


@pytest.mark.asyncio
async def test_streaming_resume_persists_tool_outputs_on_run_again(
    make_list_session: SessionFactory,
) -> None:
    """Approved tool outputs should be persisted before streaming resumes the next turn."""

    async def test_tool() -> str:
        return "tool_result"

    tool = function_tool(test_tool, name_override="test_tool", needs_approval=True)
    model, agent = make_model_and_agent(name="test", tools=[tool])
    session = make_list_session("test")

    queue_function_call_and_text(
        model,
        get_function_tool_call("test_tool", json.dumps({}), call_id="call-resume"),
        followup=[get_text_message("done")],
    )

    first = Runner.run_streamed(agent, input="Use test_tool", session=session)
    await consume_stream(first)

    assert first.interruptions
    state = first.to_state()
    state.approve(first.interruptions[0])

    resumed = Runner.run_streamed(agent, state, session=session)
    await consume_stream(resumed)

    saved_items = await session.get_items()
    assert any(
        isinstance(item, dict)
        and item.get("type") == "function_call_output"
        and item.get("call_id") == "call-resume"
        for item in saved_items
    ), "approved tool outputs should be persisted on resume"


@pytest.mark.asyncio
async def test_streaming_resume_carries_persisted_count(
    monkeypatch: pytest.MonkeyPatch, make_list_session: SessionFactory
) -> None:
    """Ensure resumed streaming preserves the persisted count for session saves."""

    async def test_tool() -> str:
        return "tool_result"

    tool = function_tool(test_tool, name_override="test_tool", needs_approval=True)
    model, agent = make_model_and_agent(name="test", tools=[tool])
    session = make_list_session("test")

    queue_function_call_and_text(
        model,
        get_function_tool_call("test_tool", json.dumps({}), call_id="call-resume"),
        followup=[get_text_message("done")],
    )

    first = Runner.run_streamed(agent, input="Use test_tool", session=session)
    await consume_stream(first)
    assert first.interruptions

    persisted_count = first._current_turn_persisted_item_count
    assert persisted_count > 0

    state = first.to_state()
    state.approve(first.interruptions[0])

    observed_counts: list[int] = []
    from agents.run_internal import session_persistence

    real_save_resumed = session_persistence.save_resumed_turn_items

    async def save_wrapper(
        *,
        session: Any,
        items: list[RunItem],
        persisted_count: int,
        response_id: str | None,
        reasoning_item_id_policy: str | None = None,
        store: bool | None = None,
        wrapper: RunContextWrapper[Any] | None = None,
        run_state: RunState | None = None,
        held_write: Any = None,
        claim_held: bool = False,
        handoff_input_filtered: bool = False,
        filtered_context_items: Any = None,
    ) -> int:
        observed_counts.append(persisted_count)
        result = await real_save_resumed(
            session=session,
            items=items,
            persisted_count=persisted_count,
            response_id=response_id,
            reasoning_item_id_policy=reasoning_item_id_policy,  # type: ignore[arg-type]
            store=store,
            wrapper=wrapper,
            run_state=run_state,
            held_write=held_write,
            claim_held=claim_held,
            handoff_input_filtered=handoff_input_filtered,
            filtered_context_items=filtered_context_items,
        )
        return int(result)

    monkeypatch.setattr(session_persistence, "save_resumed_turn_items", save_wrapper)

    resumed = Runner.run_streamed(agent, state, session=session)
    await consume_stream(resumed)

    assert observed_counts, "expected resumed save to capture persisted count"
    assert all(count == persisted_count for count in observed_counts)
