"""The LangChain chat message history: RunnableWithMessageHistory with a fake chat model sends
turn 3 what LangChain's in-memory history sends; sync and async, both backends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from memstore import InvalidArgumentError, SessionStore
from memstore.integrations.langchain import MemstoreChatMessageHistory

# langchain-core deprecated both (1.6.4, removal in 2.0) in favour of LangGraph's memory; the
# issue asks for them, and they work.
pytestmark = pytest.mark.filterwarnings(
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)

_PROMPT = ChatPromptTemplate.from_messages(
    [("system", "You add numbers."), MessagesPlaceholder("history"), ("human", "{input}")]
)
_ANSWERS = [AIMessage("5", id="a1"), AIMessage("20", id="a2"), AIMessage("bye", id="a3")]


def _conversation(history: BaseChatMessageHistory, *, use_async: bool) -> list[list[BaseMessage]]:
    """Three turns through RunnableWithMessageHistory; the messages the model got each time."""
    seen: list[list[BaseMessage]] = []

    def record(prompt: PromptValue) -> PromptValue:
        seen.append(prompt.to_messages())
        return prompt

    model = FakeMessagesListChatModel(responses=list(_ANSWERS))
    chain = _PROMPT | RunnableLambda(record) | model
    runnable = RunnableWithMessageHistory(
        chain,
        lambda session_id: history,
        input_messages_key="input",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": "s"}}
    for text in ("2 + 3?", "times 4?", "thanks"):
        if use_async:
            asyncio.run(runnable.ainvoke({"input": text}, config=config))
        else:
            runnable.invoke({"input": text}, config=config)
    return seen


def test_runnable_with_history_sends_turn_3_what_the_in_memory_history_sends(
    database_url: str,
) -> None:
    expected = _conversation(InMemoryChatMessageHistory(), use_async=False)
    assert len(expected[2]) == 6  # system, 2 rounds, the new question
    with SessionStore(database_url) as store:
        ours = MemstoreChatMessageHistory("s", store)
        assert _conversation(ours, use_async=False) == expected
        assert len(store.search("times", session_id="s")) == 1
        query = "SELECT session_id, role, text FROM turns ORDER BY seq DESC LIMIT 20"
        rows = store.read_only_query(query).rows  # the docs' (docs/frameworks.md)
        assert [tuple(row) for row in rows][-2:] == [
            ("s", "assistant", "5"),
            ("s", "user", "2 + 3?"),
        ]
        ours.clear()
        assert ours.messages == []
        assert _conversation(ours, use_async=True) == expected


def test_an_async_store_answers_the_async_methods(database_url: str) -> None:
    from memstore.store.aio import AsyncSessionStore

    tool = [
        AIMessage("", tool_calls=[{"name": "add", "args": {"a": 2}, "id": "c1"}]),
        ToolMessage("5", tool_call_id="c1"),
    ]

    async def body() -> None:
        store = AsyncSessionStore(database_url)
        try:
            history = MemstoreChatMessageHistory("s", store)
            await history.aadd_messages([HumanMessage("2 + 3?"), *tool])
            assert await history.aget_messages() == [HumanMessage("2 + 3?"), *tool]
            with pytest.raises(InvalidArgumentError, match="aget_messages"):
                _ = history.messages
            await history.aclear()
            assert await history.aget_messages() == []
            rows = await store.read_only_query(
                "SELECT tool_name FROM node_blocks WHERE call_id = 'c1'"
            )
            assert [tuple(row) for row in rows.rows] == [("add",), (None,)]
        finally:
            await store.close()

    asyncio.run(body())
