# Copyright (c) 2025 OpenAI. Licensed under the MIT License: see LICENSE in this directory.
#
# Adopted by memstore from openai-agents 0.25.0, tests/test_run_impl_resume_paths.py (the source
# distribution on PyPI, openai_agents-0.25.0.tar.gz), under the MIT License above: the tests
# that construct a SQLiteSession (resuming a run whose session write failed, under the
# compaction wrapper). Changed: the reference class, SQLiteSession, is swapped for memstore's
# MemstoreSession (swap.py: the SDK's constructor, on the store of the test's `sqlite_store`
# fixture, which each adopted test takes as an argument: a SessionStore on SQLite and an
# AsyncSessionStore on PostgreSQL; the file's subclass of SQLiteSession subclasses the swapped
# class); the approval-retry test keeps its three cases with a session (its six without one
# test no session store); helpers come from this directory (responses.py, hitl.py,
# simple_session.py); annotated for mypy and formatted by ruff. The file's other tests
# construct no SQLiteSession: not adopted; the one that reaches into the reference's SQLite
# insert is left out, listed with its reason in EXCLUDED. The error code disabled below: the
# SDK's subclass of SQLiteSession types `add_items` with a list, MemstoreSession with a Sequence.
# mypy: disable-error-code="override"
"""The OpenAI Agents SDK's own tests of resuming runs over a SQLiteSession, run on
MemstoreSession."""

import asyncio
import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal, cast

import pytest
from agents import (
    Agent,
    Runner,
    function_tool,
    output_guardrail,
)
from agents.agent import StopAtTools
from agents.decorators import tool, tool_output_guardrail
from agents.exceptions import (
    OutputGuardrailTripwireTriggered,
    UserError,
)
from agents.guardrail import GuardrailFunctionOutput
from agents.items import (
    ToolCallOutputItem,
    TResponseInputItem,
)
from agents.lifecycle import RunHooks
from agents.memory import OpenAIResponsesCompactionSession, Session
from agents.result import RunResultStreaming, ToInputListMode
from agents.run import RunConfig
from agents.run_internal import run_loop
from agents.run_state import RunState
from agents.testing import ScriptedModel
from agents.tool_guardrails import (
    ToolGuardrailFunctionOutput,
    ToolOutputGuardrailData,
)

from tests.frameworks.openai_agents.responses import get_function_tool_call, get_text_message
from tests.frameworks.openai_agents.simple_session import SimpleListSession
from tests.frameworks.openai_agents.swap import SQLiteSession

EXCLUDED = {
    "test_handoff_resume_after_cancelled_compaction_commits": (
        "pauses the reference's private SQLite insert (`_insert_items(conn, items)`) through "
        "its sqlite3 connection to cancel a compaction inside its write; MemstoreSession has "
        "no such step"
    ),
}
"""The tests of the SDK's file that construct a SQLiteSession and are left out, with the reason."""


class _FailingResumeSession(SimpleListSession):
    """Control append acknowledgement at the public Session boundary."""

    def __init__(self) -> None:
        super().__init__()
        self.failure: str | None = None
        self.error = RuntimeError("session append failed")
        self.block_next_add = False
        self.add_started = asyncio.Event()
        self.release_add = asyncio.Event()
        self.fail_on_output: str | None = None

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if self.fail_on_output is not None and any(
            self.fail_on_output in json.dumps(item, default=str) for item in items
        ):
            self.fail_on_output = None
            raise self.error
        failure, self.failure = self.failure, None
        if failure == "before":
            raise self.error
        if self.block_next_add:
            self.block_next_add = False
            self.add_started.set()
            await self.release_add.wait()
        if failure == "partial":
            await super().add_items(items[:1])
            raise self.error
        await super().add_items(items)
        if failure == "after":
            raise self.error


class _LostAckSQLiteSession(SQLiteSession):
    fail_after_commit = False
    error = RuntimeError("session append failed")

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        await super().add_items(items)
        if self.fail_after_commit:
            self.fail_after_commit = False
            raise self.error


async def _run_session_resume(
    agent: Agent[Any],
    value: str | RunState[Any],
    session: Session | None,
    streamed: bool,
    hooks: RunHooks[Any] | None = None,
    events: list[Any] | None = None,
) -> Any:
    config = RunConfig(tracing_disabled=True)
    if not streamed:
        return await Runner.run(agent, value, session=session, run_config=config, hooks=hooks)
    result = Runner.run_streamed(agent, value, session=session, run_config=config, hooks=hooks)
    async for event in result.stream_events():
        if events is not None:
            events.append(event)
    return result


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("guardrail_outcome", "prior_turn", "with_session", "retry_mode"),
    [
        pytest.param("error", True, True, "streamed-json", id="prior-turn-error-sqlite"),
        pytest.param("error", True, True, "run-live", id="prior-turn-error-sqlite-run-live"),
        pytest.param("error", True, True, "run-json", id="prior-turn-error-sqlite-run-json"),
    ],
)
async def test_failed_approval_callback_defers_stream_output_until_retry_guardrail(
    guardrail_outcome: str,
    prior_turn: bool,
    with_session: bool,
    retry_mode: Literal["streamed-live", "streamed-json", "run-live", "run-json"],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    sqlite_store: object,
) -> None:
    effects: list[str] = []
    callbacks: list[str] = []
    guardrail_outputs: list[str] = []
    guardrail_entered = asyncio.Event()
    release_guardrail = asyncio.Event()
    failed_outputs: list[str] = []
    retry_outputs: list[str] = []
    config = RunConfig(tracing_disabled=True)
    session = SQLiteSession("approval-retry", tmp_path / "session.db") if with_session else None
    if session is not None:
        request.addfinalizer(session.close)

    def input_outputs(result: RunResultStreaming) -> dict[str, list[Any]]:
        modes: tuple[ToInputListMode, ...] = ("preserve_all", "normalized")
        return {
            mode: [
                item.get("output")
                for item in result.to_input_list(mode=mode)
                if item.get("type") == "function_call_output"
            ]
            for mode in modes
        }

    def fail_after_execution(_context: Any) -> dict[str, Any]:
        callbacks.append("extractor")
        raise RuntimeError("post-tool callback failed")

    @tool_output_guardrail
    def record_output(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.allow(output_info=data.output)

    @function_tool(tool_output_guardrails=[record_output])
    async def prelude() -> str:
        return "earlier-result"

    @function_tool(
        needs_approval=True,
        custom_data_extractor=fail_after_execution,
        tool_output_guardrails=[record_output],
    )
    async def charge() -> str:
        effects.append("charged")
        return "receipt-7"

    @output_guardrail
    async def record_terminal_candidate(
        _context: Any, _agent: Any, output: Any
    ) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=output, tripwire_triggered=False)

    @output_guardrail
    async def terminal_policy(_context: Any, _agent: Any, output: Any) -> GuardrailFunctionOutput:
        guardrail_outputs.append(output)
        guardrail_entered.set()
        await release_guardrail.wait()
        if guardrail_outcome == "error" and len(guardrail_outputs) == 1:
            if retry_mode in {"run-live", "run-json"}:
                raise UserError("policy temporarily unavailable")
            raise RuntimeError("policy temporarily unavailable")
        return GuardrailFunctionOutput(
            output_info=None, tripwire_triggered=guardrail_outcome == "blocked"
        )

    model = ScriptedModel(
        ([[get_function_tool_call("prelude", "{}", call_id="prelude-1")]] if prior_turn else [])
        + [[get_function_tool_call("charge", "{}", call_id="charge-1")]]
    )
    agent = Agent(
        name="agent",
        model=model,
        tools=[prelude, charge],
        tool_use_behavior=StopAtTools(stop_at_tool_names=["charge"]),
        output_guardrails=[record_terminal_candidate, terminal_policy],
    )
    paused = await Runner.run(agent, "charge once", session=session, run_config=config)
    state = paused.to_state()
    state.approve(state.get_interruptions()[0])
    prior_metadata = ["earlier-result"] if prior_turn else []
    withheld_inputs = dict.fromkeys(("preserve_all", "normalized"), prior_metadata)

    failed = Runner.run_streamed(agent, state, session=session, run_config=config)
    with pytest.raises(UserError, match="post-tool callback failed"):  # noqa: PT012
        async for event in failed.stream_events():
            if event.type == "run_item_stream_event" and isinstance(event.item, ToolCallOutputItem):
                # Copy the value at emission, so later owner replacements cannot hide a leak.
                failed_outputs.append(event.item.output)
    assert not guardrail_outputs
    failed_metadata = [result.output.output_info for result in failed.tool_output_guardrail_results]
    failed_input_outputs = input_outputs(failed)

    if retry_mode != "streamed-live":
        # Exercise the documented failed-result resume path and supported durable state format.
        state = await RunState.from_json(agent, json.loads(json.dumps(failed.to_state().to_json())))
    # For live retries, reuse the same approved state that was passed to the failed stream.
    assert [result.output.output_info for result in state._tool_output_guardrail_results] == [
        *prior_metadata,
        "receipt-7",
    ]
    retry = (
        Runner.run_streamed(agent, state, session=session, run_config=config)
        if retry_mode in {"streamed-live", "streamed-json"}
        else None
    )
    initial_retry_metadata = (
        [result.output.output_info for result in retry.tool_output_guardrail_results]
        if retry is not None
        else None
    )
    initial_retry_inputs = input_outputs(retry) if retry is not None else None

    async def collect_retry() -> None:
        if retry is None:
            # Runner.run fails without returning a result; the caller resumes its same RunState.
            await Runner.run(agent, state, session=session, run_config=config)
            return
        async for event in retry.stream_events():
            if event.type == "run_item_stream_event" and isinstance(event.item, ToolCallOutputItem):
                retry_outputs.append(event.item.output)

    consumer = asyncio.create_task(collect_retry())
    try:
        await asyncio.wait_for(guardrail_entered.wait(), timeout=5)
        # Let the waiting stream consumer drain anything the producer queued before its await.
        for _ in range(3):
            await asyncio.sleep(0)
        outputs_before_allow = list(retry_outputs)
        metadata_before_allow = (
            [result.output.output_info for result in retry.tool_output_guardrail_results]
            if retry is not None
            else None
        )
        pending_metadata = [
            result.output.output_info for result in state._tool_output_guardrail_results
        ]
        public_new_outputs = (
            [item.output for item in retry.new_items if isinstance(item, ToolCallOutputItem)]
            if retry is not None
            else None
        )
        public_input_outputs = input_outputs(retry) if retry is not None else None
        stored_before_allow = await session.get_items() if session is not None else None
    finally:
        release_guardrail.set()

    if guardrail_outcome == "blocked":
        with pytest.raises(OutputGuardrailTripwireTriggered):
            await consumer
    elif guardrail_outcome == "error":
        if retry is None:
            with pytest.raises(UserError, match="policy temporarily unavailable") as error:
                await consumer
            run_data = error.value.run_data
            assert run_data is not None
            assert [
                result.output.output_info for result in run_data.tool_output_guardrail_results
            ] == prior_metadata
            assert [
                item.output for item in run_data.new_items if isinstance(item, ToolCallOutputItem)
            ] == prior_metadata
            assert run_data.output_guardrail_results == []
        else:
            with pytest.raises(RuntimeError, match="policy temporarily unavailable"):
                await consumer
    else:
        await consumer

    # Assertions at the end ensure the failed snapshot really reaches the retry guardrail.
    if guardrail_outcome == "error" and session is not None:
        assert "function_call_output" not in _call_pair(await session.get_items(), "charge-1")
    assert effects == ["charged"]
    assert callbacks == ["extractor"]
    assert guardrail_outputs == ["receipt-7"]
    assert failed_outputs == [], "callback failure exposed unchecked terminal output"
    assert failed_metadata == prior_metadata, (
        "callback failure exposed unchecked guardrail metadata"
    )
    assert failed_input_outputs == withheld_inputs, "callback failure exposed unchecked model input"
    assert outputs_before_allow == [], "retry exposed output while its guardrail was pending"
    assert pending_metadata == [*prior_metadata, "receipt-7"]
    if retry is not None:
        assert initial_retry_metadata == prior_metadata, (
            "retry exposed metadata before its guardrail"
        )
        assert initial_retry_inputs == withheld_inputs, "retry exposed model input before starting"
        assert metadata_before_allow == prior_metadata, (
            "retry exposed metadata during its guardrail"
        )
        assert public_new_outputs == prior_metadata, "retry exposed history during its guardrail"
        assert public_input_outputs == withheld_inputs, (
            "retry exposed model input during its guardrail"
        )
    assert len(model.calls) == (2 if prior_turn else 1)
    if stored_before_allow is not None:
        assert "function_call_output" not in _call_pair(stored_before_allow, "charge-1")
    if guardrail_outcome == "error":
        assert retry_outputs == []
        if retry is not None:
            assert retry.output_guardrail_results == []
            assert [
                result.output.output_info for result in retry.tool_output_guardrail_results
            ] == prior_metadata
            assert input_outputs(retry) == withheld_inputs, (
                "guardrail error exposed unchecked input"
            )
            state = retry.to_state()
        restored = state
        if retry_mode != "run-live":
            restored = await RunState.from_json(agent, json.loads(json.dumps(state.to_json())))
        assert [
            result.output.output_info for result in restored._tool_output_guardrail_results
        ] == [*prior_metadata, "receipt-7"]
        guardrail_entered.clear()
        release_guardrail.clear()
        retry = Runner.run_streamed(agent, restored, session=session, run_config=config)
        assert [
            result.output.output_info for result in retry.tool_output_guardrail_results
        ] == prior_metadata
        consumer = asyncio.create_task(collect_retry())
        try:
            await asyncio.wait_for(guardrail_entered.wait(), timeout=5)
            for _ in range(3):
                await asyncio.sleep(0)
            assert retry_outputs == [], (
                "second retry exposed output before its guardrail allowed it"
            )
            assert [
                result.output.output_info for result in retry.tool_output_guardrail_results
            ] == prior_metadata
            assert [
                item.output for item in retry.new_items if isinstance(item, ToolCallOutputItem)
            ] == prior_metadata
            assert input_outputs(retry) == withheld_inputs
            if session is not None:
                assert "function_call_output" not in _call_pair(
                    await session.get_items(), "charge-1"
                )
        finally:
            release_guardrail.set()
            await consumer

        assert guardrail_outputs == ["receipt-7", "receipt-7"]
        assert len(model.calls) == (2 if prior_turn else 1)
        assert effects == ["charged"]
        assert callbacks == ["extractor"]
        if session is not None:
            assert _call_pair(await session.get_items(), "charge-1") == [
                "function_call",
                "function_call_output",
            ]
    elif guardrail_outcome == "blocked":
        assert retry is not None
        assert retry_outputs == []
        assert all(
            result.output.output_info != "receipt-7"
            for result in retry.tool_output_guardrail_results
        )
        assert "receipt-7" not in state.to_string()
        assert input_outputs(retry) == {
            key: [*prior_metadata, run_loop._OUTPUT_GUARDRAIL_BLOCKED_TOOL_OUTPUT]
            for key in ("preserve_all", "normalized")
        }
    if guardrail_outcome != "blocked":
        assert retry is not None
        assert retry_outputs == ["receipt-7"]
        assert retry.final_output == "receipt-7"
        assert [result.output.output_info for result in retry.tool_output_guardrail_results] == [
            *prior_metadata,
            "receipt-7",
        ]
        assert [
            item.output for item in retry.new_items if isinstance(item, ToolCallOutputItem)
        ] == [*prior_metadata, "receipt-7"]
        assert input_outputs(retry) == {
            key: [*prior_metadata, "receipt-7"] for key in ("preserve_all", "normalized")
        }
        restored = await RunState.from_json(agent, retry.to_state().to_json())
        assert [
            item.output for item in restored._session_items if isinstance(item, ToolCallOutputItem)
        ] == [*prior_metadata, "receipt-7"]
    assert input_outputs(failed) == withheld_inputs, (
        "later retries changed the failed stream's public output"
    )


async def _approved_session_state(streamed: bool, session: Session | None = None) -> Any:
    effects: list[int] = []

    @tool(needs_approval=True)
    async def charge(amount: int) -> str:
        effects.append(amount)
        return "receipt-7"

    model = ScriptedModel(
        [
            [get_function_tool_call("charge", '{"amount":7}', call_id="charge-1")],
            [get_text_message("done")],
            [get_text_message("fresh")],
        ]
    )
    agent = Agent(name="payment", model=model, tools=[charge])
    session = session if session is not None else _FailingResumeSession()
    paused = await _run_session_resume(agent, "charge 7", session, streamed)
    state = paused.to_state()
    state.approve(state.get_interruptions()[0])
    return agent, model, session, state, effects


def _charge_pair(items: list[TResponseInputItem]) -> list[str]:
    return [
        str(item.get("type"))
        for item in items
        if isinstance(item, dict) and item.get("call_id") == "charge-1"
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("round_trip", [False, True], ids=["live", "json"])
async def test_resumed_committed_append_refreshes_compaction_input(
    streamed: bool, round_trip: bool, tmp_path: Path, sqlite_store: object
) -> None:
    backend = _LostAckSQLiteSession("compaction-recovery", tmp_path / "history.db")
    compaction_inputs: list[list[TResponseInputItem]] = []
    compact_enabled = False

    async def compact(**kwargs: Any) -> SimpleNamespace:
        items = copy.deepcopy(kwargs["input"])
        compaction_inputs.append(items)
        return SimpleNamespace(output=items, usage=None)

    session = OpenAIResponsesCompactionSession(
        backend.session_id,
        underlying_session=backend,
        client=cast(Any, SimpleNamespace(responses=SimpleNamespace(compact=compact))),
        compaction_mode="input",
        should_trigger_compaction=lambda _: compact_enabled,
    )
    try:
        agent, model, _, state, effects = await _approved_session_state(streamed, session)
        # A normal declined compaction initializes the retained wrapper's history cache.
        await session.run_compaction()
        assert compaction_inputs == []
        backend.fail_after_commit = True
        with pytest.raises(RuntimeError) as error:
            await _run_session_resume(agent, state, session, streamed)
        assert error.value is backend.error
        expected_pair = ["function_call", "function_call_output"]
        assert _charge_pair(await backend.get_items(limit=100)) == expected_pair
        if round_trip:
            state = await RunState.from_json(agent, state.to_json())

        compact_enabled = True
        result = await _run_session_resume(agent, state, session, streamed)
        assert result.final_output == "done"
        assert effects == [7]
        assert len(model.calls) == 2
        assert len(compaction_inputs) == 1
        assert _charge_pair(compaction_inputs[0]) == expected_pair
        assert _charge_pair(await backend.get_items(limit=100)) == expected_pair
        assert _charge_pair(result.to_input_list()) == expected_pair
        assert "pending_session_write" not in result.to_state().to_json()
    finally:
        backend.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["input", "auto"])
async def test_compaction_reload_preserves_session_retrieval_window(
    mode: Literal["input", "auto"], tmp_path: Path, sqlite_store: object
) -> None:
    backend = _LostAckSQLiteSession(
        "bounded-compaction", tmp_path / "history.db", session_settings={"limit": 1}
    )
    compaction_inputs: list[list[TResponseInputItem]] = []

    async def compact(**kwargs: Any) -> SimpleNamespace:
        assert "previous_response_id" not in kwargs
        items = copy.deepcopy(kwargs["input"])
        compaction_inputs.append(items)
        return SimpleNamespace(output=items, usage=None)

    session = OpenAIResponsesCompactionSession(
        backend.session_id,
        underlying_session=backend,
        client=cast(Any, SimpleNamespace(responses=SimpleNamespace(compact=compact))),
        compaction_mode=mode,
    )
    old_items: list[TResponseInputItem] = [
        {"role": "assistant", "content": f"old message {index}"} for index in range(12)
    ]
    recovered_item: TResponseInputItem = {"role": "assistant", "content": "committed reply"}
    try:
        await backend.add_items(old_items)
        # The configured window has one candidate, so the default threshold is not met.
        await session.run_compaction({"response_id": "unstored-response", "store": False})
        assert compaction_inputs == []
        assert await backend.get_items(limit=100) == old_items

        backend.fail_after_commit = True
        with pytest.raises(RuntimeError) as error:
            await session.add_items([recovered_item])
        assert error.value is backend.error
        assert await backend.get_items(limit=100) == [*old_items, recovered_item]

        await session.run_compaction({"force": True, "store": False})
        assert compaction_inputs == [[recovered_item]]
        assert await backend.get_items(limit=100) == [recovered_item]
    finally:
        backend.close()


def _call_pair(items: list[TResponseInputItem], call_id: str) -> list[str]:
    return [
        str(item.get("type"))
        for item in items
        if isinstance(item, dict) and item.get("call_id") == call_id
    ]
