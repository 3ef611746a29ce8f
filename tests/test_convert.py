"""The converters between framework items and turns: every item comes back equal, also after
its turn went through JSON text and a store; what memstore can read reaches its blocks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstore import JsonlSessionStore, SessionStore, Turn
from memstore.convert import ANTHROPIC, CHAT, FOREIGN, OPAQUE, RESPONSES, Converter
from tests.convert_strategies import arguments, data_urls, parts, texts, typed, values, with_extras

_RESPONSES_PARTS = parts(
    typed("input_text", text=texts),
    typed("output_text", text=texts, annotations=st.just([])),
    typed("refusal", refusal=texts),
    typed("input_image", image_url=data_urls(), detail=st.sampled_from(["auto", "low"])),
    typed("input_file", file_id=texts),
)
responses_items = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system", "developer", "tool"])},
        optional={"content": _RESPONSES_PARTS, "type": st.just("message")},
    ),
    typed("function_call", call_id=texts, name=texts, arguments=arguments()),
    typed("function_call_output", call_id=texts, output=values),
    typed(
        "reasoning",
        id=texts,
        summary=st.lists(typed("summary_text", text=texts), max_size=2),
    ),
    typed("web_search_call", id=texts, status=texts),
    values,
).flatmap(with_extras)

_CHAT_PARTS = parts(
    typed("text", text=texts),
    typed("refusal", refusal=texts),
    typed("image_url", image_url=st.fixed_dictionaries({"url": data_urls()})),
)
_CHAT_CALL = st.fixed_dictionaries(
    {
        "id": texts,
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": texts, "arguments": arguments()}),
    }
).flatmap(with_extras)
chat_messages = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "developer", "user", "assistant", "function"])},
        optional={
            "content": _CHAT_PARTS | st.none(),
            "tool_calls": st.lists(_CHAT_CALL, max_size=2),
            "name": texts,
        },
    ),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": texts, "content": _CHAT_PARTS}),
).flatmap(with_extras)

_ANTHROPIC_PARTS = parts(
    typed("text", text=texts),
    typed("thinking", thinking=texts, signature=texts),
    typed("redacted_thinking", data=texts),
    typed("tool_use", id=texts, name=texts, input=values),
    typed("tool_result", tool_use_id=texts, content=values, is_error=st.booleans()),
    typed(
        "image",
        source=st.fixed_dictionaries(
            {"type": st.just("base64"), "media_type": texts, "data": texts}
        ),
    ),
)
anthropic_messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"]), "content": _ANTHROPIC_PARTS}
).flatmap(with_extras)

CASES = [(RESPONSES, responses_items), (CHAT, chat_messages), (ANTHROPIC, anthropic_messages)]


@pytest.mark.parametrize(("converter", "items"), CASES, ids=["responses", "chat", "anthropic"])
def test_every_item_comes_back_equal_also_from_its_stored_text(
    converter: Converter, items: st.SearchStrategy[Any]
) -> None:
    @given(items)
    def check(item: Any) -> None:
        if not isinstance(item, dict):
            return
        turn = converter.to_turn(item)
        assert converter.to_items(turn) == [item]
        stored = Turn.from_json_text(turn.json_text())
        assert converter.to_items(stored) == [item]

    check()


def _blocks(converter: Converter, item: dict[str, Any]) -> list[dict[str, Any]]:
    turn = converter.to_turn(item).to_json()
    assert OPAQUE not in turn[converter.fmt], "a well-formed item was kept whole"
    return [{k: v for k, v in block.items() if k != converter.fmt} for block in turn["blocks"]]


def test_responses_items_reach_memstore_blocks() -> None:
    user = {"role": "developer", "content": "be brief"}
    assert _blocks(RESPONSES, user) == [{"kind": "text", "text": "be brief"}]
    assert RESPONSES.to_turn(user).role == "user"
    call = {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a":1}'}
    assert _blocks(RESPONSES, call) == [
        {"kind": "tool_call", "id": "c1", "name": "add", "input": {"a": 1}}
    ]
    spaced = {**call, "arguments": '{"a": 1}'}
    assert _blocks(RESPONSES, spaced)[0]["input"] == {"a": 1}
    output = {"type": "function_call_output", "call_id": "c1", "output": "2"}
    assert _blocks(RESPONSES, output) == [{"kind": "tool_result", "callId": "c1", "output": "2"}]
    reasoning = {"type": "reasoning", "id": "r", "summary": [{"type": "summary_text", "text": "t"}]}
    assert _blocks(RESPONSES, reasoning) == [{"kind": "thinking", "text": "t"}]
    image = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
    assert _blocks(RESPONSES, {"role": "user", "content": [image]}) == [
        {"kind": "image", "mediaType": "image/png", "dataBase64": "iVBORw0KGgo="}
    ]
    unknown = {"type": "web_search_call", "id": "ws", "status": "completed"}
    assert RESPONSES.to_turn(unknown).to_json() == {
        "role": "assistant",
        "blocks": [],
        "responses": {OPAQUE: unknown},
    }


def test_chat_and_anthropic_messages_reach_memstore_blocks() -> None:
    calls = [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    assistant = {"role": "assistant", "content": "ok", "tool_calls": calls}
    assert _blocks(CHAT, assistant) == [
        {"kind": "text", "text": "ok"},
        {"kind": "tool_call", "id": "c", "name": "f", "input": {}},
    ]
    tool = {"role": "tool", "tool_call_id": "c", "content": "done"}
    assert _blocks(CHAT, tool) == [{"kind": "tool_result", "callId": "c", "output": "done"}]
    content = [
        {"type": "thinking", "thinking": "hm", "signature": "s"},
        {"type": "tool_use", "id": "t", "name": "n", "input": {"x": 1}},
        {"type": "redacted_thinking", "data": "zz"},
    ]
    assert _blocks(ANTHROPIC, {"role": "assistant", "content": content}) == [
        {"kind": "thinking", "text": "hm"},
        {"kind": "tool_call", "id": "t", "name": "n", "input": {"x": 1}},
        {"kind": FOREIGN},
    ]


def test_turns_memstore_wrote_read_as_each_format() -> None:
    turn = {
        "role": "assistant",
        "blocks": [
            {"kind": "thinking", "text": "hidden"},
            {"kind": "text", "text": "calling"},
            {"kind": "tool_call", "id": "1", "name": "f", "input": {"a": 1}},
        ],
    }
    assert RESPONSES.to_items(turn) == [
        {"role": "assistant", "content": [{"type": "output_text", "text": "calling"}]},
        {"type": "function_call", "call_id": "1", "name": "f", "arguments": '{"a":1}'},
    ]
    assert CHAT.to_items(turn) == [
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
            ],
        }
    ]
    assert ANTHROPIC.to_items(turn) == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "1", "name": "f", "input": {"a": 1}},
            ],
        }
    ]
    result = {
        "role": "user",
        "blocks": [{"kind": "tool_result", "callId": "1", "output": {"n": 2}}],
    }
    assert RESPONSES.to_items(result) == [
        {"type": "function_call_output", "call_id": "1", "output": '{"n":2}'}
    ]
    assert CHAT.to_items(result) == [{"role": "tool", "tool_call_id": "1", "content": '{"n":2}'}]


CONVERSATION: list[tuple[Converter, dict[str, Any]]] = [
    (RESPONSES, {"role": "system", "content": "You answer in haiku"}),
    (RESPONSES, {"role": "user", "content": [{"type": "input_text", "text": "weather zanzibar"}]}),
    (RESPONSES, {"type": "function_call", "call_id": "c1", "name": "forecast", "arguments": "{}"}),
    (RESPONSES, {"type": "function_call_output", "call_id": "c1", "output": "monsoon rains"}),
    (RESPONSES, {"type": "web_search_call", "id": "ws_1", "status": "completed"}),
    (CHAT, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": 1}"}}
    ]}),
    (ANTHROPIC, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "ponder quokka", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
    ]}),
]  # fmt: skip


def test_converted_turns_are_stored_searched_and_read_back_equal(
    store: SessionStore, tmp_path: Path
) -> None:
    handle = store.session("agent")
    for converter, item in CONVERSATION:
        handle.append(converter.to_turn(item))
    turns = store.load_path("agent")
    assert [c.to_items(turn) for (c, _), turn in zip(CONVERSATION, turns, strict=True)] == [
        [item] for _, item in CONVERSATION
    ]
    for word in ("haiku", "zanzibar", "monsoon", "quokka"):
        assert len(store.search(word, session_id="agent")) == 1, word
    rows = store.read_only_query(
        "SELECT kind, tool_name, call_id FROM node_blocks WHERE kind = 'tool_call' ORDER BY call_id"
    )
    assert [tuple(row) for row in rows.rows] == [("tool_call", "forecast", "c1"),
                                                  ("tool_call", "lookup", "c2")]  # fmt: skip
    store.export_jsonl("agent", tmp_path / "agent.jsonl")  # the legacy file format's reader
    graph = JsonlSessionStore(tmp_path).load_session("agent")
    exported = graph.path_to(graph.leaf) if graph.leaf else []
    assert [c.to_items(turn) for (c, _), turn in zip(CONVERSATION, exported, strict=True)] == [
        [item] for _, item in CONVERSATION
    ]


def test_importing_memstore_and_its_converters_imports_no_framework() -> None:
    code = (
        "import sys, memstore, memstore.convert, memstore.integrations; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'agents', 'openai', 'langchain_core', 'claude_agent_sdk'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
