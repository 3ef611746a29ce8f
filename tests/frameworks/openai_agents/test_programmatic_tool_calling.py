# Copyright (c) 2025 OpenAI. Licensed under the MIT License: see LICENSE in this directory.
#
# Adopted by memstore from openai-agents 0.25.0, tests/test_programmatic_tool_calling.py (the
# source distribution on PyPI, openai_agents-0.25.0.tar.gz), under the MIT License above: the
# tests that construct a session, with the module-level helpers they use. Changed: the reference
# class, SQLiteSession, is swapped for memstore's MemstoreSession through the `make_session`
# fixture (conftest.py and swap.py here: SessionStore and AsyncSessionStore, SQLite and
# PostgreSQL); the model outputs come from responses.py (the SDK's tests/test_responses.py);
# formatted by ruff. The file's other tests construct no session: not adopted.
"""The OpenAI Agents SDK's own programmatic-tool-calling tests with a session (program items and
their callers kept through a store), run on MemstoreSession."""

from __future__ import annotations

from typing import Any, Literal, cast

import pytest
from agents import (
    Agent,
    ProgrammaticToolCallingTool,
    RunConfig,
    Runner,
    function_tool,
)
from agents.testing import ScriptedModel
from openai.types.responses import (
    ResponseFunctionToolCall,
)
from openai.types.responses.response_function_tool_call import CallerProgram
from openai.types.responses.response_output_item import (
    Program,
    ProgramOutput,
)
from pydantic import BaseModel

from tests.frameworks.openai_agents.responses import get_handoff_tool_call, get_text_message
from tests.frameworks.openai_agents.swap import SessionFactory

EXCLUDED: dict[str, str] = {}
"""The tests of the SDK's file that construct a session and are left out: none."""

PROGRAM_CALL_ID = "call_program"


FUNCTION_CALL_ID = "call_lookup"


PROGRAM_CALLER = {"type": "program", "caller_id": PROGRAM_CALL_ID}


class InventoryOutput(BaseModel):
    sku: str
    available_units: int


def _program() -> Program:
    return Program(
        id="program_item",
        call_id=PROGRAM_CALL_ID,
        code='lookup_inventory(sku="A-1")',
        fingerprint="fingerprint",
        type="program",
    )


def _function_call() -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id="function_item",
        call_id=FUNCTION_CALL_ID,
        name="lookup_inventory",
        arguments='{"sku":"A-1"}',
        caller=CallerProgram(type="program", caller_id=PROGRAM_CALL_ID),
        type="function_call",
    )


def _program_output(
    status: Literal["completed", "incomplete"] = "completed",
) -> ProgramOutput:
    return ProgramOutput(
        id="program_output_item",
        call_id=PROGRAM_CALL_ID,
        result='{"sku":"A-1","available_units":42}',
        status=status,
        type="program_output",
    )


def _caller_dict(value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        return cast(dict[str, str], value)
    return cast(dict[str, str], value.model_dump(exclude_none=True))


def _raw_item_type(value: Any) -> str | None:
    if isinstance(value, dict):
        item_type = value.get("type")
        return item_type if isinstance(item_type, str) else None
    item_type = getattr(value, "type", None)
    return item_type if isinstance(item_type, str) else None


@pytest.mark.asyncio
async def test_sqlite_session_round_trip_preserves_program_history_and_caller(
    make_session: SessionFactory,
) -> None:
    model = ScriptedModel()
    model.extend(
        [
            [_program(), _function_call()],
            [_program_output(), get_text_message("done")],
        ]
    )

    @function_tool(allowed_callers=["programmatic"])
    def lookup_inventory(sku: str) -> InventoryOutput:
        return InventoryOutput(sku=sku, available_units=42)

    agent = Agent(
        name="inventory",
        model=model,
        tools=[ProgrammaticToolCallingTool(), lookup_inventory],
    )
    session = make_session("programmatic-tool-calling")
    try:
        result = await Runner.run(agent, "Check inventory", session=session)
        assert result.final_output == "done"

        session_items = await session.get_items()
        assert [_raw_item_type(item) for item in session_items] == [
            None,
            "program",
            "function_call",
            "function_call_output",
            "program_output",
            "message",
        ]
        function_output = next(
            cast(dict[str, Any], item)
            for item in session_items
            if _raw_item_type(item) == "function_call_output"
        )
        assert _caller_dict(function_output["caller"]) == PROGRAM_CALLER
    finally:
        session.close()


@pytest.mark.asyncio
async def test_nested_handoff_summarizes_complete_programmatic_transcript(
    make_session: SessionFactory,
) -> None:
    model = ScriptedModel()
    delegate = Agent(name="delegate", model=model)
    model.extend(
        [
            [_program(), _function_call()],
            [_program_output(), get_handoff_tool_call(delegate)],
            [get_text_message("done")],
        ]
    )

    @function_tool(allowed_callers=["programmatic"])
    def lookup_inventory(sku: str) -> InventoryOutput:
        return InventoryOutput(sku=sku, available_units=42)

    triage = Agent(
        name="triage",
        model=model,
        handoffs=[delegate],
        tools=[ProgrammaticToolCallingTool(), lookup_inventory],
    )
    captured_inputs: list[list[Any]] = []

    def capture_model_input(data: Any) -> Any:
        captured_inputs.append(list(data.model_data.input))
        return data.model_data

    session = make_session("programmatic-tool-calling-nested-handoff")
    try:
        result = await Runner.run(
            triage,
            "Check inventory and delegate the final response.",
            run_config=RunConfig(
                nest_handoff_history=True,
                call_model_input_filter=capture_model_input,
            ),
            session=session,
        )

        assert result.final_output == "done"
        handoff_input = captured_inputs[-1]
        handoff_types = [_raw_item_type(item) for item in handoff_input]
        assert not {
            "program",
            "function_call",
            "function_call_output",
            "program_output",
        }.intersection(handoff_types)

        summary_text = "\n".join(
            cast(str, item.get("content"))
            for item in handoff_input
            if isinstance(item, dict) and isinstance(item.get("content"), str)
        )
        assert '"type": "program"' in summary_text
        assert '"type": "function_call"' in summary_text
        assert '"type": "function_call_output"' in summary_text
        assert '"type": "program_output"' in summary_text

        session_items = await session.get_items()
        assert [_raw_item_type(item) for item in session_items] == [
            None,
            "program",
            "function_call",
            "function_call_output",
            "program_output",
            "function_call",
            "function_call_output",
            "message",
        ]
    finally:
        session.close()
