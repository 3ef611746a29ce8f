"""The LangChain converter: every message comes back equal, also from its turn's stored text;
content, tool calls and tool results reach memstore's blocks."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
)

from memstore import Turn
from memstore.convert import OPAQUE
from memstore.convert.langchain import LANGCHAIN, compact_dict
from tests.convert_strategies import data_urls, texts, typed, values, with_extras

_PARTS = st.one_of(
    texts,
    typed("text", text=texts),
    typed("thinking", thinking=texts, signature=texts),
    typed("reasoning", reasoning=texts),
    typed("image_url", image_url=st.fixed_dictionaries({"url": data_urls()})),
    typed("tool_use", id=texts, name=texts, input=values),
).flatmap(with_extras)
_CONTENT = texts | st.lists(_PARTS, max_size=3)
_CALLS = st.lists(
    st.fixed_dictionaries({"name": texts, "args": st.dictionaries(texts, values, max_size=2)}),
    max_size=2,
)


def _numbered(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**call, "id": f"call_{n}", "type": "tool_call"} for n, call in enumerate(calls)]


@st.composite
def messages(draw: st.DrawFn) -> BaseMessage:
    """A message of any type LangChain can make from a dict, with optional fields set."""
    kind = draw(st.sampled_from(["human", "ai", "system", "tool", "chat", "AIMessageChunk"]))
    data: dict[str, Any] = {"content": draw(_CONTENT)}
    optional: dict[str, st.SearchStrategy[Any]] = {
        "id": texts,
        "name": texts,
        "additional_kwargs": st.dictionaries(texts, values, max_size=2),
        "response_metadata": st.dictionaries(texts, values, max_size=2),
    }
    if kind in ("ai", "AIMessageChunk"):
        optional["tool_calls"] = _CALLS.map(_numbered)
    if kind == "tool":
        data["tool_call_id"] = draw(texts)
        optional["status"] = st.sampled_from(["success", "error"])
        optional["artifact"] = values
    if kind == "chat":
        data["role"] = draw(texts)
    for key, strategy in optional.items():
        if draw(st.booleans()):
            data[key] = draw(strategy)
    try:
        (message,) = messages_from_dict([{"type": kind, "data": data}])
    except Exception:  # LangChain refused this combination: not a message
        assume(False)
        raise
    return message


@given(messages())
def test_every_message_comes_back_equal_also_from_its_stored_text(message: BaseMessage) -> None:
    turn = LANGCHAIN.message_to_turn(message)
    assert LANGCHAIN.turn_to_messages(turn) == [message]
    stored = Turn.from_json_text(turn.json_text())
    assert LANGCHAIN.turn_to_messages(stored) == [message]


def _blocks(message: BaseMessage) -> list[dict[str, Any]]:
    turn = LANGCHAIN.message_to_turn(message).to_json()
    assert OPAQUE not in turn["langchain"], "a well-formed message was kept whole"
    return [{k: v for k, v in block.items() if k != "langchain"} for block in turn["blocks"]]


def test_messages_reach_memstore_blocks_and_keep_only_what_is_not_a_default() -> None:
    assert _blocks(SystemMessage("be brief")) == [{"kind": "text", "text": "be brief"}]
    assert LANGCHAIN.message_to_turn(HumanMessage("hi")).to_json() == {
        "role": "user",
        "blocks": [{"kind": "text", "text": "hi"}],
        "langchain": {"type": "human", "data": {}},
    }
    call = AIMessage("", tool_calls=[{"name": "add", "args": {"a": 1}, "id": "c1"}])
    assert _blocks(call) == [
        {"kind": "text", "text": ""},
        {"kind": "tool_call", "id": "c1", "name": "add", "input": {"a": 1}},
    ]
    assert _blocks(ToolMessage("2", tool_call_id="c1")) == [
        {"kind": "tool_result", "callId": "c1", "output": "2"}
    ]
    thinking = AIMessage([{"type": "thinking", "thinking": "hm", "signature": "s"}, "ok"])
    assert _blocks(thinking) == [{"kind": "thinking", "text": "hm"}, {"kind": "text", "text": "ok"}]
    compact = {"type": "human", "data": {"content": "x", "id": "m1"}}
    assert compact_dict(HumanMessage("x", id="m1")) == compact


def test_turns_memstore_wrote_read_as_messages() -> None:
    turns: list[dict[str, Any]] = [
        {"role": "user", "blocks": [{"kind": "text", "text": "add 1"}]},
        {
            "role": "assistant",
            "blocks": [
                {"kind": "thinking", "text": "easy"},
                {"kind": "tool_call", "id": "1", "name": "add", "input": {"a": 1}},
            ],
        },
        {"role": "user", "blocks": [{"kind": "tool_result", "callId": "1", "output": 2}]},
    ]
    assert LANGCHAIN.turns_to_messages(turns) == [
        HumanMessage("add 1"),
        AIMessage("", tool_calls=[{"name": "add", "args": {"a": 1}, "id": "1"}]),
        ToolMessage("2", tool_call_id="1"),
    ]
