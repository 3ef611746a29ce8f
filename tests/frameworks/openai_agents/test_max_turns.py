# Copyright (c) 2025 OpenAI. Licensed under the MIT License: see LICENSE in this directory.
#
# Adopted by memstore from openai-agents 0.25.0, tests/test_max_turns.py (the source
# distribution on PyPI, openai_agents-0.25.0.tar.gz), under the MIT License above: the tests of
# the max-turns handler's output reaching a session. Changed: the reference class, SQLiteSession,
# is swapped for memstore's MemstoreSession through the `make_session` fixture (conftest.py and
# swap.py here: SessionStore and AsyncSessionStore, SQLite and PostgreSQL), which the helper
# that runs them takes; the model outputs come from responses.py (the SDK's
# tests/test_responses.py); annotated for mypy and formatted by ruff. The file's other tests
# construct no session: not adopted.
"""The OpenAI Agents SDK's own max-turns tests with a session, run on MemstoreSession."""

from __future__ import annotations

import json

import pytest
from agents import (
    Agent,
    Runner,
)
from agents.testing import ScriptedModel

from tests.frameworks.openai_agents.responses import (
    get_function_tool,
    get_function_tool_call,
)
from tests.frameworks.openai_agents.swap import SessionFactory

EXCLUDED: dict[str, str] = {}
"""The tests of the SDK's file that construct a session and are left out: none."""


async def _run_max_turns_handler_with_session(
    make_session: SessionFactory, streamed: bool
) -> list[str]:
    """Run one tool turn, trip max turns, and return the session's persisted item types."""
    model = ScriptedModel()
    agent = Agent(
        name="test_1",
        model=model,
        tools=[get_function_tool("some_function", "result")],
    )
    model.extend([[get_function_tool_call("some_function", json.dumps({"a": "b"}))]])
    session = make_session("max-turns-handler", ":memory:")
    try:
        if streamed:
            streamed_result = Runner.run_streamed(
                agent,
                input="user_message",
                max_turns=1,
                session=session,
                error_handlers={"max_turns": lambda data: "fallback answer"},
            )
            async for _ in streamed_result.stream_events():
                pass
            assert streamed_result.final_output == "fallback answer"
        else:
            run_result = await Runner.run(
                agent,
                input="user_message",
                max_turns=1,
                session=session,
                error_handlers={"max_turns": lambda data: "fallback answer"},
            )
            assert run_result.final_output == "fallback answer"

        return [str(item.get("type", item.get("role"))) for item in await session.get_items()]
    finally:
        session.close()


@pytest.mark.asyncio
async def test_non_streamed_max_turns_handler_persists_output_to_session(
    make_session: SessionFactory,
) -> None:
    """The synthesized max-turns final output must reach the session.

    It is a brand new item, so the per-turn persisted-item count left over from the previous
    turn must not be applied as an offset into the one-item list handed to the session save.
    """
    item_types = await _run_max_turns_handler_with_session(make_session, streamed=False)

    assert item_types == ["user", "function_call", "function_call_output", "message"]


@pytest.mark.asyncio
async def test_streamed_max_turns_handler_persists_output_to_session(
    make_session: SessionFactory,
) -> None:
    """The streamed path already persists the synthesized output; keep both paths aligned."""
    item_types = await _run_max_turns_handler_with_session(make_session, streamed=True)

    assert item_types == ["user", "function_call", "function_call_output", "message"]
