# Copyright (c) 2025 OpenAI. Licensed under the MIT License: see LICENSE in this directory.
#
# Adopted by memstore from openai-agents 0.25.0, tests/test_soft_cancel.py (the source
# distribution on PyPI, openai_agents-0.25.0.tar.gz), under the MIT License above: the tests of
# a soft cancel (`cancel(mode="after_turn")`) that construct a session. Changed: the reference
# class, SQLiteSession, is swapped for memstore's MemstoreSession through the `make_session`
# fixture (conftest.py and swap.py here: SessionStore and AsyncSessionStore, SQLite and
# PostgreSQL); the model outputs come from responses.py (the SDK's tests/test_responses.py);
# annotated for mypy and formatted by ruff. The file's other tests construct no session: not
# adopted.
"""The OpenAI Agents SDK's own soft-cancel tests with a session, run on MemstoreSession."""

from typing import Any

import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel

from tests.frameworks.openai_agents.responses import (
    get_function_tool,
    get_function_tool_call,
    get_text_message,
)
from tests.frameworks.openai_agents.swap import SessionFactory

EXCLUDED: dict[str, str] = {}
"""The tests of the SDK's file that construct a session and are left out: none."""


@pytest.mark.asyncio
async def test_soft_cancel_saves_session(make_session: SessionFactory) -> None:
    """Verify session is saved properly with soft cancel."""
    model = ScriptedModel([[], []])
    agent = Agent(name="Assistant", model=model)

    session = make_session("test_soft_cancel_session")
    await session.clear_session()  # Start fresh

    result = Runner.run_streamed(agent, input="Hello", session=session)

    async for event in result.stream_events():
        if event.type == "run_item_stream_event":
            result.cancel(mode="after_turn")

    # Check session has the turn
    items = await session.get_items()
    assert len(items) > 0, "Session should have saved items from completed turn"

    # Verify we can resume
    result2 = await Runner.run(agent, "Continue", session=session)
    assert result2.final_output is not None

    # Cleanup
    await session.clear_session()


@pytest.mark.asyncio
async def test_soft_cancel_with_handoff(make_session: SessionFactory) -> None:
    """Verify soft cancel after handoff saves the handoff turn."""
    from agents import Handoff

    model = ScriptedModel()

    # Create two agents with handoff
    agent2 = Agent(name="Agent2", model=model)

    async def on_invoke_handoff(context: Any, data: Any) -> Agent[Any]:
        return agent2

    agent1 = Agent(
        name="Agent1",
        model=model,
        handoffs=[
            Handoff(
                tool_name=Handoff.default_tool_name(agent2),
                tool_description=Handoff.default_tool_description(agent2),
                input_json_schema={},
                on_invoke_handoff=on_invoke_handoff,
                agent_name=agent2.name,
            )
        ],
    )

    # Setup: Agent1 does handoff, Agent2 responds
    model.extend(
        [
            # Agent1's turn - triggers handoff
            [get_function_tool_call(Handoff.default_tool_name(agent2), "{}")],
            # Agent2's turn after handoff
            [get_text_message("Agent2 response")],
        ]
    )

    session = make_session("test_soft_cancel_handoff")
    await session.clear_session()

    result = Runner.run_streamed(agent1, input="Hello", session=session)

    handoff_seen = False
    async for event in result.stream_events():
        if event.type == "run_item_stream_event" and event.name == "handoff_requested":
            handoff_seen = True
            # Cancel right after handoff
            result.cancel(mode="after_turn")

    assert handoff_seen, "Handoff should have occurred"

    # Verify session has items from the handoff turn
    items = await session.get_items()
    assert len(items) > 0, "Session should have saved the handoff turn"

    # Cleanup
    await session.clear_session()


@pytest.mark.asyncio
async def test_soft_cancel_with_session_and_multiple_turns(make_session: SessionFactory) -> None:
    """Verify soft cancel with session across multiple turns."""
    model = ScriptedModel()
    agent = Agent(
        name="Assistant",
        model=model,
        tools=[get_function_tool("tool1", "result1")],
    )

    session = make_session("test_soft_cancel_multi")
    await session.clear_session()

    # Setup 3 turns
    model.extend(
        [
            [get_function_tool_call("tool1", "{}", call_id="tool_1")],
            [get_function_tool_call("tool1", "{}", call_id="tool_2")],
            [get_text_message("Final")],
        ]
    )

    result = Runner.run_streamed(agent, input="Hello", session=session)

    turns_seen = 0
    async for event in result.stream_events():
        if event.type == "run_item_stream_event" and event.name == "tool_output":
            turns_seen += 1
            if turns_seen == 2:
                result.cancel(mode="after_turn")

    # Should have completed 2 turns
    assert turns_seen == 2

    # Check session has both turns
    items = await session.get_items()
    assert len(items) > 0

    # Cleanup
    await session.clear_session()
