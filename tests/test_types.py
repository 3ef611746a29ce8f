from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from memstore import (
    AgentConfig,
    CompactionPolicy,
    ImageBlock,
    InvalidTurnError,
    MemstoreError,
    Migrator,
    RunEvent,
    SessionNode,
    StreamEvent,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    Turn,
    UnknownBlock,
    jsjson,
    parse_turn,
)

from .conftest import LEGACY_FILES


def test_known_block_kinds_parse_to_their_models() -> None:
    turn = parse_turn(
        {
            "role": "assistant",
            "blocks": [
                {"kind": "text", "text": "hi"},
                {"kind": "tool_call", "id": "c1", "name": "ls", "input": {"path": "."}},
                {"kind": "tool_result", "callId": "c1", "output": "ok", "isError": True},
                {"kind": "image", "mediaType": "image/png", "dataBase64": "AAAA"},
                {"kind": "x-vendor", "payload": [1, 2]},
            ],
        }
    )
    text, call, result, image, unknown = turn.blocks
    assert isinstance(text, TextBlock)
    assert isinstance(call, ToolCallBlock)
    assert call.input == {"path": "."}
    assert isinstance(result, ToolResultBlock)
    assert (result.call_id, result.is_error) == ("c1", True)
    assert isinstance(image, ImageBlock)
    assert image.data_base64 == "AAAA"
    assert isinstance(unknown, UnknownBlock)
    assert unknown.model_extra == {"payload": [1, 2]}


def test_unknown_keys_survive_in_their_original_order() -> None:
    raw: dict[str, Any] = {
        "1": ["a"],
        "blocks": [{"7": True, "kind": "tool_result", "callId": "c", "output": "", "ms": 3}],
        "traceId": "t-1",
        "role": "user",
    }
    turn = Turn.model_validate(raw)
    dumped = turn.to_json()
    assert dumped == raw
    assert list(dumped) == list(raw)
    assert list(dumped["blocks"][0]) == list(raw["blocks"][0])


def test_models_built_in_python_serialize_in_declaration_order() -> None:
    turn = Turn(role="user", blocks=(ToolResultBlock(output=1, call_id="x"), TextBlock(text="t")))
    assert jsjson.dumps(turn.to_json()) == (
        '{"role":"user","blocks":[{"kind":"tool_result","callId":"x","output":1},'
        '{"kind":"text","text":"t"}]}'
    )


def test_a_block_without_kind_in_its_dict_still_writes_kind_first() -> None:
    block = TypeAdapter(TextBlock).validate_python({"text": "x"})
    assert list(block.model_dump()) == ["kind", "text"]


@pytest.mark.parametrize("path", LEGACY_FILES, ids=lambda p: p.stem)
def test_every_legacy_turn_round_trips_exactly(path: Any) -> None:
    for line in path.read_text(encoding="utf-8").split("\n"):
        record = jsjson.loads(line) if line else None
        if record and record["type"] == "node":
            node = SessionNode.model_validate(record["node"])
            assert jsjson.dumps(node.to_json()) == jsjson.dumps(record["node"])


def test_models_are_immutable() -> None:
    turn = Turn(role="user", blocks=(TextBlock(text="x"),))
    with pytest.raises(ValidationError):
        turn.role = "assistant"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"role": "system", "blocks": []}, "turn.role"),
        ({"role": "user"}, "turn.blocks"),
        (
            {"role": "user", "blocks": [{"kind": "text"}]},
            'turn.blocks[0] (text) needs a string "text"',
        ),
        ({"role": "user", "blocks": [{"kind": 5}]}, "turn.blocks[0]"),
        ({"role": "user", "blocks": [{"text": "no kind"}]}, "turn.blocks[0]"),
        ({"role": "user", "blocks": ({"kind": "image"},)}, "mediaType"),
    ],
)
def test_malformed_turns_are_refused_naming_the_field(bad: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidTurnError, match=re.escape(named)) as refused:
        parse_turn(bad)
    assert isinstance(refused.value, MemstoreError)


def test_compaction_policy_defaults_and_camel_case() -> None:
    policy = CompactionPolicy()
    assert (policy.trigger_ratio, policy.keep_recent) == (0.8, 8)
    assert CompactionPolicy.model_validate({"triggerRatio": 0.5, "keepRecent": 2}).keep_recent == 2
    assert policy.model_dump() == {"triggerRatio": 0.8, "keepRecent": 8}


@pytest.mark.parametrize(
    ("field", "value"),
    [("trigger_ratio", 0), ("trigger_ratio", 1.01), ("trigger_ratio", -0.5), ("keep_recent", -1)],
)
def test_compaction_policy_refuses_invalid_values(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match=field):
        CompactionPolicy.model_validate({field: value})


def test_agent_config_defaults() -> None:
    config = AgentConfig(model="m")
    assert config.max_turns == 64
    assert config.compaction is None
    with pytest.raises(ValidationError):
        AgentConfig(model="m", max_turns=0)


def test_run_events_cover_all_seven_kinds() -> None:
    snapshot = {"runId": "r", "sessionId": "s", "phase": "idle", "model": "m"}
    events: list[dict[str, Any]] = [
        {"kind": "snapshot", "snapshot": snapshot},
        {"kind": "text_delta", "delta": "a"},
        {"kind": "thinking_delta", "delta": "b"},
        {"kind": "tool_started", "id": "t", "name": "ls"},
        {"kind": "tool_finished", "id": "t", "name": "ls", "outcome": {"output": 1}},
        {"kind": "settled", "snapshot": snapshot},
        {"kind": "faulted", "error": {"message": "boom"}, "snapshot": snapshot},
    ]
    adapter: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)
    parsed = [adapter.validate_python(event) for event in events]
    assert [event.kind for event in parsed] == [event["kind"] for event in events]
    with pytest.raises(ValidationError):
        adapter.validate_python({"kind": "exploded"})


def test_stream_events_parse_by_kind() -> None:
    adapter: TypeAdapter[StreamEvent] = TypeAdapter(StreamEvent)
    done = adapter.validate_python(
        {"kind": "done", "turn": {"role": "assistant", "blocks": []}, "usage": {"inputTokens": 3}}
    )
    assert done.kind == "done"
    assert done.usage.input_tokens == 3


def test_migrator_is_a_structural_protocol() -> None:
    class Rename:
        id = "rename-v1"

        def upgrade(self, raw: Any) -> Any:
            return raw

    assert isinstance(Rename(), Migrator)
    assert not isinstance(object(), Migrator)


# --- how stored turns are built (tests/test_trusted.py compares them with validation) -------


@pytest.mark.parametrize(
    "text",
    [
        '{"role":"user"}',  # no blocks
        '{"role":"robot","blocks":[]}',
        '{"role":"user","blocks":[{"kind":"text"}]}',  # no text
        '{"role":"user","blocks":[{"kind":"tool_call","id":"c"}]}',  # no name
        '{"role":"user","blocks":[["not", "an", "object"]]}',
    ],
)
def test_a_stored_turn_that_is_not_valid_is_refused_as_validation_refuses_it(text: str) -> None:
    with pytest.raises(ValidationError):
        Turn._from_stored_text(text)


def test_turns_are_equal_when_their_json_text_is() -> None:
    built = Turn(role="user", blocks=(TextBlock(text="x"),))
    parsed = parse_turn({"role": "user", "blocks": [{"kind": "text", "text": "x"}]})
    reordered = parse_turn({"blocks": [{"kind": "text", "text": "x"}], "role": "user"})
    assert built == parsed
    assert hash(built) == hash(parsed)
    assert parsed != reordered  # the key order is part of a turn: its node id hashes it
    assert TextBlock(text="x") == parsed.blocks[0]
    assert TextBlock(text="x") != ThinkingBlock(text="x")


def test_a_turn_computes_its_json_text_once_and_a_changed_copy_its_own() -> None:
    turn = parse_turn({"role": "user", "blocks": [{"kind": "text", "text": "x"}]})
    assert turn.json_text() is turn.json_text()
    assistant = turn.model_copy(update={"role": "assistant"})
    assert assistant.json_text() == '{"role":"assistant","blocks":[{"kind":"text","text":"x"}]}'
    assert turn.json_text() == '{"role":"user","blocks":[{"kind":"text","text":"x"}]}'
    assert turn.model_copy().json_text() == turn.json_text()


def test_a_turn_answers_a_tool_call_when_any_of_its_blocks_is_a_tool_result() -> None:
    result = {"kind": "tool_result", "callId": "c1", "output": "ok"}
    text = {"kind": "text", "text": "done"}
    assert parse_turn({"role": "user", "blocks": [text, result]}).has_tool_result
    assert not parse_turn({"role": "assistant", "blocks": [text]}).has_tool_result
    assert not parse_turn({"role": "user", "blocks": []}).has_tool_result
    assert Turn.kinds_have_tool_result(["text", "tool_result"])
    assert not Turn.kinds_have_tool_result(["tool_call", "text"])
