# Copyright (c) 2025 OpenAI. Licensed under the MIT License: see LICENSE in this directory.
#
# Adopted by memstore from openai-agents 0.25.0, tests/test_native_tool_failure_history.py (the
# source distribution on PyPI, openai_agents-0.25.0.tar.gz), under the MIT License above: the
# tests that construct a session (all of them but three that run no session, listed in
# EXCLUDED). Changed: the reference class, SQLiteSession, is swapped for memstore's
# MemstoreSession through the `make_list_session` fixture (conftest.py and swap.py here: a
# SessionStore on SQLite and an AsyncSessionStore on PostgreSQL, as for the Runner tests, for
# the suite's run time); `FakeComputer` (the SDK's test_computer_tool_lifecycle.py) and
# `RecordingEditor` (its test_tool_custom_data.py) are copied here; other helpers come from this
# directory (model_test_helpers.py, hitl.py); annotated for mypy and formatted by ruff.
"""The OpenAI Agents SDK's own tests that a native tool's output, finalized by the tool already
invoked, survives a sibling's failure in the session, run on MemstoreSession."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from agents import (
    Agent,
    ApplyPatchTool,
    ComputerTool,
    CustomTool,
    LocalShellTool,
    RunHooks,
    Runner,
    RunState,
    ShellTool,
    UserError,
)
from agents.computer import Button, Computer, Environment
from agents.decorators import tool
from agents.editor import ApplyPatchOperation, ApplyPatchResult
from agents.run_internal import tool_planning
from agents.testing import ScriptedModel, function_call
from openai.types.responses import ResponseApplyPatchToolCall, ResponseCustomToolCall
from openai.types.responses.response_computer_tool_call import (
    ActionScreenshot,
    ResponseComputerToolCall,
)
from openai.types.responses.response_output_item import LocalShellCall, LocalShellCallAction

from tests.frameworks.openai_agents.hitl import make_shell_call
from tests.frameworks.openai_agents.model_test_helpers import get_exact_output_stream_step
from tests.frameworks.openai_agents.swap import SessionFactory

_NO_SESSION = (
    "runs the Runner with no session (a cancelled or failing native tool's cleanup bounded in "
    "time): the SDK's tool execution, nothing a store takes part in"
)
EXCLUDED = {
    "test_parent_cancellation_after_function_failure_cancels_pending_finalization": _NO_SESSION,
    "test_converted_native_cancellation_bounds_late_finalization": _NO_SESSION,
    "test_pending_native_invocation_cleanup_is_bounded": _NO_SESSION,
}
"""The tests of the SDK's file that are left out, with the reason (every test that constructs a
session is adopted)."""


class FakeComputer(Computer):
    def __init__(self, label: str = "computer", dimensions: tuple[int, int] = (1, 1)) -> None:
        self.label = label
        self._dimensions = dimensions

    @property
    def environment(self) -> Environment:
        return "mac"

    @property
    def dimensions(self) -> tuple[int, int]:
        return self._dimensions

    def screenshot(self) -> str:
        return "img"

    def click(self, x: int, y: int, button: Button) -> None:
        return None

    def double_click(self, x: int, y: int) -> None:
        return None

    def scroll(self, x: int, y: int, scroll_x: int, scroll_y: int) -> None:
        return None

    def type(self, text: str) -> None:
        return None

    def wait(self) -> None:
        return None

    def move(self, x: int, y: int) -> None:
        return None

    def keypress(self, keys: list[str]) -> None:
        return None

    def drag(self, path: list[tuple[int, int]]) -> None:
        return None


class RecordingEditor:
    def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        return ApplyPatchResult(output=f"Updated {operation.path}")

    def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        return ApplyPatchResult(output=f"Created {operation.path}")

    def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        return ApplyPatchResult(output=f"Deleted {operation.path}")


def _native_tool(kind: str, extractor: Any, effects: list[str]) -> tuple[Any, Any]:
    native: Any
    call: Any

    def execute(*_args: Any) -> str:
        effects.append(kind)
        return "completed"

    if kind == "custom":
        native = CustomTool(
            name="native",
            description="Synthetic native tool",
            on_invoke_tool=execute,
            custom_data_extractor=extractor,
        )
        call = ResponseCustomToolCall(
            type="custom_tool_call", name="native", call_id="native", input="synthetic"
        )
    elif kind == "computer":

        class Computer(FakeComputer):
            def screenshot(self) -> str:
                return execute()

        native = ComputerTool(computer=Computer(), custom_data_extractor=extractor)
        call = ResponseComputerToolCall(
            id="native",
            type="computer_call",
            action=ActionScreenshot(type="screenshot"),
            call_id="native",
            pending_safety_checks=[],
            status="completed",
        )
    elif kind == "patch":

        class Editor(RecordingEditor):
            def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
                execute()
                return super().update_file(operation)

        native = ApplyPatchTool(editor=Editor(), custom_data_extractor=extractor)
        call = ResponseApplyPatchToolCall(
            type="apply_patch_call",
            id="native",
            call_id="native",
            status="completed",
            operation={"type": "update_file", "path": "synthetic.txt", "diff": "-a\n+b\n"},
        )
    elif kind == "shell":
        native = ShellTool(executor=execute)
        call = make_shell_call("native")
    else:
        native = LocalShellTool(executor=execute)
        call = LocalShellCall(
            id="native",
            type="local_shell_call",
            call_id="native",
            status="completed",
            action=LocalShellCallAction(type="exec", command=["synthetic"], env={}),
        )
    return native, call


@pytest.mark.asyncio
@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize(
    ("kind", "phase", "hook_raises"),
    [
        ("computer", "extractor", False),
        ("custom", "extractor", False),
        ("patch", "extractor", False),
        ("custom", "hook", False),
        ("shell", "hook", False),
        ("local_shell", "hook", False),
        ("custom", "hook", True),
    ],
)
async def test_native_finalization_survives_sibling_failure(
    monkeypatch: pytest.MonkeyPatch,
    streaming: bool,
    kind: str,
    phase: str,
    hook_raises: bool,
    make_list_session: SessionFactory,
) -> None:
    entered = asyncio.Event()
    release = asyncio.Event()
    category_failed = asyncio.Event()
    finalized = asyncio.Event()
    effects: list[str] = []
    gather = tool_planning.gather_with_cancel  # type: ignore[attr-defined]

    async def observe_failure(*args: Any, on_child_failure: Any = None, **kwargs: Any) -> Any:
        def notify(error: BaseException) -> None:
            if on_child_failure is not None:
                on_child_failure(error)
            category_failed.set()

        return await gather(*args, on_child_failure=notify, **kwargs)

    # Observe the existing category-failure boundary without replacing its cancellation.
    monkeypatch.setattr(tool_planning, "gather_with_cancel", observe_failure)

    async def extract(_context: Any) -> Any:
        if phase == "extractor":
            entered.set()
            await release.wait()
        return {"finalized": True}

    native, call = _native_tool(kind, extract, effects)

    @tool(failure_error_function=None)
    async def failed_tool() -> str:
        await entered.wait()
        raise ValueError("synthetic sibling failure")

    class Hooks(RunHooks):
        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
            if tool is native:
                if phase == "hook":
                    entered.set()
                    await release.wait()
                finalized.set()
                if hook_raises:
                    raise ValueError("synthetic native end-hook failure")

    calls = [call, function_call("failed_tool", {}, call_id="failed")]
    agent = Agent(
        name="native-agent",
        model=ScriptedModel([get_exact_output_stream_step(calls) if streaming else calls]),
        tools=[native, failed_tool],
    )
    session = make_list_session("native")
    streamed = None
    output_events: list[Any] = []

    async def run() -> None:
        nonlocal streamed
        if streaming:
            streamed = Runner.run_streamed(agent, "go", session=session, hooks=Hooks())
            async for event in streamed.stream_events():
                if (
                    event.type == "run_item_stream_event"
                    and event.item.type == "tool_call_output_item"
                ):
                    output_events.append(event.item)
        else:
            await Runner.run(agent, "go", session=session, hooks=Hooks())

    task = asyncio.create_task(run())
    try:
        await asyncio.wait_for(category_failed.wait(), timeout=5)
        assert effects == [kind]
        assert not finalized.is_set()
        release.set()
        with pytest.raises(UserError, match="synthetic sibling failure") as caught:
            await task
        assert finalized.is_set()
        assert caught.value.run_data is not None
        items = caught.value.run_data.new_items
        assert len(items) == 2
        assert items[0].type == "tool_call_item"
        assert items[1].type == "tool_call_output_item"
        if kind in {"computer", "custom", "patch"}:
            assert items[1].custom_data == {"finalized": True}
        assert [i.get("call_id") for i in await session.get_items()] == [None, "native", "native"]
        if streamed is not None:
            assert len(output_events) == 1
            assert output_events[0].custom_data == items[1].custom_data
            state = await RunState.from_json(agent, streamed.to_state().to_json())
            assert state._generated_items[-1].custom_data == items[1].custom_data
    finally:
        release.set()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        session.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("stop", ["parent_cancel", "drain_timeout"])
async def test_native_finalization_preserves_output_without_delaying_parent(
    monkeypatch: pytest.MonkeyPatch, stop: str, make_list_session: SessionFactory
) -> None:
    from agents.run_internal import tool_execution

    entered = asyncio.Event()
    release = asyncio.Event()
    exited = asyncio.Event()
    effects: list[str] = []

    async def extract(_context: Any) -> Any:
        entered.set()
        try:
            await release.wait()
            return {"finalized": True}
        finally:
            exited.set()

    native, call = _native_tool("custom", extract, effects)

    @tool(failure_error_function=None)
    async def sibling() -> str:
        await entered.wait()
        if stop == "parent_cancel":
            await release.wait()
        raise ValueError("synthetic sibling failure")

    # This test exercises the bound, rather than spending the production drain budget.
    monkeypatch.setattr(tool_execution, "_FUNCTION_TOOL_POST_INVOKE_WAIT_SECONDS", 0.001)
    agent = Agent(
        name="native-agent",
        model=ScriptedModel([[call, function_call("sibling", {}, call_id="sibling")]]),
        tools=[native, sibling],
    )
    session = make_list_session("native-stop")
    task = asyncio.create_task(Runner.run(agent, "go", session=session))
    try:
        await asyncio.wait_for(entered.wait(), timeout=5)
        if stop == "parent_cancel":
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, timeout=5)
            await asyncio.wait_for(exited.wait(), timeout=5)
        else:
            with pytest.raises(UserError, match="synthetic sibling failure") as caught:
                await asyncio.wait_for(task, timeout=5)
            assert exited.is_set()
            assert not release.is_set()
            assert caught.value.run_data is not None
            assert cast(Any, caught.value.run_data.new_items[-1].raw_item)["output"] == "completed"
            assert caught.value.run_data.new_items[-1].custom_data is None
        assert effects == ["custom"]
        saved = await session.get_items()
        if stop == "parent_cancel":
            assert [item.get("role") for item in saved] == ["user"]
        else:
            assert cast(Any, saved[-1])["output"] == "completed"
    finally:
        release.set()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.wait_for(exited.wait(), timeout=5)
        session.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("verdict", ["pass", "reject", "error", "cancelled_child"])
@pytest.mark.parametrize("kind", ["custom", "function"])
@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("tool_cancel", [False, True])
async def test_input_verdict_during_tool_drain_preserves_selected_tool_error(
    monkeypatch: pytest.MonkeyPatch,
    verdict: str,
    kind: str,
    streaming: bool,
    tool_cancel: bool,
    make_list_session: SessionFactory,
) -> None:
    from agents import GuardrailFunctionOutput, input_guardrail
    from agents.run_internal.tool_execution import _FunctionToolBatchExecutor

    entered = asyncio.Event()
    category_failed = asyncio.Event()
    release = asyncio.Event()
    effects: list[str] = []
    gather = tool_planning.gather_with_cancel  # type: ignore[attr-defined]

    async def observe_failure(*args: Any, on_child_failure: Any = None, **kwargs: Any) -> Any:
        def notify(error: BaseException) -> None:
            if on_child_failure is not None:
                on_child_failure(error)
            category_failed.set()

        return await gather(*args, on_child_failure=notify, **kwargs)

    monkeypatch.setattr(tool_planning, "gather_with_cancel", observe_failure)

    async def extract(_context: Any) -> Any:
        entered.set()
        await release.wait()
        return {"finalized": True}

    @tool
    async def completed() -> str:
        effects.append("function")
        return "completed"

    class Hooks(RunHooks):
        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
            if tool is completed:
                await extract(None)

    if kind == "function":
        original_drain = _FunctionToolBatchExecutor._raise_failure_after_draining_siblings

        async def observe_function_drain(self: Any, failure: Any) -> Any:
            category_failed.set()
            return await original_drain(self, failure)

        monkeypatch.setattr(
            _FunctionToolBatchExecutor,
            "_raise_failure_after_draining_siblings",
            observe_function_drain,
        )
        native, call = completed, function_call("completed", {}, call_id="native")
    else:
        native, call = _native_tool("custom", extract, effects)

    @tool(failure_error_function=None)
    async def fail() -> str:
        await entered.wait()
        if tool_cancel:
            raise asyncio.CancelledError("primary tool cancellation")
        raise ValueError("primary tool failure")

    @input_guardrail
    async def input_verdict(context: Any, agent: Any, input: Any) -> Any:
        await category_failed.wait()
        release.set()
        if verdict == "error":
            raise ValueError("late input failure")
        if verdict == "cancelled_child":
            check = asyncio.create_task(asyncio.sleep(0))
            check.cancel()
            await check
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=verdict == "reject")

    calls = [call, function_call("fail", {}, call_id="fail")]
    agent = Agent(
        name="native-agent",
        tools=[native, fail],
        model=ScriptedModel([get_exact_output_stream_step(calls) if streaming else calls]),
        input_guardrails=[input_verdict],
    )
    session = make_list_session("verdict-during-drain")
    result = None

    async def run() -> None:
        nonlocal result
        if streaming:
            result = Runner.run_streamed(agent, "go", session=session, hooks=Hooks())
            async for _ in result.stream_events():
                pass
        else:
            await Runner.run(agent, "go", session=session, hooks=Hooks())

    try:
        expected_error = asyncio.CancelledError if tool_cancel else UserError
        with pytest.raises(expected_error):
            await run()
        assert effects == [kind]
        assert len(await session.get_items()) == (3 if verdict == "pass" else 1)
        if result is not None:
            assert len(result.new_items) == (2 if verdict == "pass" else 0)
            if verdict == "pass" and kind == "custom":
                assert result.new_items[-1].custom_data == {"finalized": True}
    finally:
        release.set()
        session.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("streaming", [False, True])
async def test_approved_native_output_survives_custom_data_failure(
    streaming: bool, make_list_session: SessionFactory
) -> None:
    from agents.testing import assistant_message

    effects: list[str] = []

    async def extract(_context: Any) -> Any:
        raise ValueError("synthetic extractor failure")

    native, call = _native_tool("custom", extract, effects)
    native.needs_approval = True
    agent = Agent(
        name="approved-native",
        tools=[native],
        model=ScriptedModel([[call], [assistant_message("done")]]),
    )
    session = make_list_session("approved-native-extractor-failure")
    try:
        interrupted = await Runner.run(agent, "go", session=session)
        state = interrupted.to_state()
        state.approve(interrupted.interruptions[0])

        async def resume() -> None:
            if streaming:
                result = Runner.run_streamed(agent, state, session=session)
                async for _ in result.stream_events():
                    pass
            else:
                await Runner.run(agent, state, session=session)

        with pytest.raises(ValueError, match="synthetic extractor failure"):
            await resume()
        assert effects == ["custom"]
        outputs = [item for item in state._generated_items if item.type == "tool_call_output_item"]
        assert len(outputs) == 1
        assert outputs[0].output == "completed"
        # Recovery keeps the invocation checkpoint, not the live metadata-finalization flag.
        serialized = state.to_json()
        assert "_custom_data_pending" not in json.dumps(serialized)
        restored = await RunState.from_json(agent, serialized)
        resumed = await Runner.run(agent, restored, session=session)
        assert resumed.final_output == "done"
        assert effects == ["custom"]
        saved_outputs = [
            item
            for item in await session.get_items()
            if item.get("type") == "custom_tool_call_output"
        ]
        assert len(saved_outputs) == 1
    finally:
        session.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("reject_input", [False, True])
@pytest.mark.parametrize("cleanup_error", [False, True])
@pytest.mark.parametrize("kind", ["custom", "local_shell"])
async def test_selected_function_failure_stops_queued_native_invocations(
    monkeypatch: pytest.MonkeyPatch,
    streaming: bool,
    reject_input: bool,
    cleanup_error: bool,
    kind: str,
    make_list_session: SessionFactory,
) -> None:
    from agents import GuardrailFunctionOutput, input_guardrail
    from agents.run_internal import tool_execution

    function_finalizing = asyncio.Event()
    release_function = asyncio.Event()
    function_finalized = asyncio.Event()
    native_started = asyncio.Event()
    release_native = asyncio.Event()
    native_settled = asyncio.Event()
    native_cancelled = asyncio.Event()
    selected = asyncio.Event()
    verdict_returned = asyncio.Event()
    effects: list[str] = []
    original_drain = (
        tool_execution._FunctionToolBatchExecutor._raise_failure_after_draining_siblings
    )

    async def observe_selection(self: Any, failure: Any) -> Any:
        selected.set()
        return await original_drain(self, failure)

    monkeypatch.setattr(
        tool_execution._FunctionToolBatchExecutor,
        "_raise_failure_after_draining_siblings",
        observe_selection,
    )
    # Event-driven assertions must finish before the production cleanup deadline.
    monkeypatch.setattr(tool_execution, "_FUNCTION_TOOL_POST_INVOKE_WAIT_SECONDS", 5)

    @tool
    async def completed() -> str:
        return "completed output"

    @tool(failure_error_function=None)
    async def fail() -> str:
        await function_finalizing.wait()
        await native_started.wait()
        raise ValueError("selected function failure")

    class Hooks(RunHooks):
        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
            if tool is completed:
                function_finalizing.set()
                await release_function.wait()
                function_finalized.set()

    async def invoke(context: Any, value: str) -> str:
        effects.append(value)
        if value == "first":
            native_started.set()
            try:
                await release_native.wait()
            except asyncio.CancelledError:
                native_cancelled.set()
                if cleanup_error:
                    raise RuntimeError("native cleanup failed") from None
                raise
        return "native output"

    executor_name = "execute_custom_tool_calls" if kind == "custom" else "execute_local_shell_calls"
    original_execute = getattr(tool_planning, executor_name)

    async def observe_native_completion(**kwargs: Any) -> Any:
        try:
            return await original_execute(**kwargs)
        finally:
            native_settled.set()

    monkeypatch.setattr(tool_planning, executor_name, observe_native_completion)
    native: Any
    native_calls: list[Any]
    if kind == "custom":
        native = CustomTool(name="native", description="Synthetic tool", on_invoke_tool=invoke)
        native_calls = [
            ResponseCustomToolCall(
                type="custom_tool_call", name="native", call_id=value, input=value
            )
            for value in ("first", "queued")
        ]
    else:

        async def execute_shell(request: Any) -> str:
            return await invoke(request.ctx_wrapper, request.data.call_id)

        native = LocalShellTool(executor=execute_shell)
        native_calls = [
            LocalShellCall(
                id=value,
                type="local_shell_call",
                call_id=value,
                status="completed",
                action=LocalShellCallAction(type="exec", command=["synthetic"], env={}),
            )
            for value in ("first", "queued")
        ]

    @input_guardrail
    async def verdict(context: Any, agent: Any, input: Any) -> GuardrailFunctionOutput:
        await selected.wait()
        verdict_returned.set()
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=reject_input)

    calls = [
        function_call("completed", {}, call_id="completed"),
        function_call("fail", {}, call_id="failed"),
        *native_calls,
    ]
    agent = Agent(
        name="cancel-queued-native",
        model=ScriptedModel([get_exact_output_stream_step(calls) if streaming else calls]),
        tools=[completed, fail, native],
        input_guardrails=[verdict],
    )
    session = make_list_session("cancel-queued-native")
    streamed = None

    async def run() -> None:
        nonlocal streamed
        if streaming:
            streamed = Runner.run_streamed(agent, "go", hooks=Hooks(), session=session)
            async for _ in streamed.stream_events():
                pass
        else:
            await Runner.run(agent, "go", hooks=Hooks(), session=session)

    task = asyncio.create_task(run())
    try:
        await asyncio.wait_for(verdict_returned.wait(), 2)
        release_native.set()
        await asyncio.wait_for(native_settled.wait(), 2)
        assert native_cancelled.is_set()
        assert effects == ["first"]
        assert not function_finalized.is_set()
        release_function.set()
        with pytest.raises(UserError, match="selected function failure") as caught:
            await asyncio.wait_for(task, 2)
        assert function_finalized.is_set()
        assert caught.value.run_data is not None
        outputs = [
            item for item in caught.value.run_data.new_items if item.type == "tool_call_output_item"
        ]
        if reject_input:
            assert outputs == []
        else:
            assert outputs[0].output == "completed output"
            assert len(outputs) == (2 if cleanup_error and kind == "custom" else 1)
        assert len(await session.get_items()) == (1 if reject_input else 1 + 2 * len(outputs))
        if streamed is not None and reject_input:
            assert streamed.new_items == []
    finally:
        release_native.set()
        release_function.set()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        session.close()
