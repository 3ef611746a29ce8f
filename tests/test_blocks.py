from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from memstore import InvalidTurnError, SessionStore, parse_turn
from memstore.blocks import BLOCK_CLASSES, BlockBase, UnknownBlock, block_class
from memstore.jsonl import turn_problem

from .strategies import damaged_turns, wire_turns


def _validation_accepts(turn: Any) -> bool:
    try:
        parse_turn(turn)
    except InvalidTurnError:
        return False
    return True


@settings(max_examples=400)
@given(turn=damaged_turns() | wire_turns)
def test_the_importers_check_accepts_exactly_what_validation_accepts(turn: Any) -> None:
    problem = turn_problem(turn)
    assert (problem is None) == _validation_accepts(turn), problem


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ({"kind": "text"}, 'turn.blocks[0] (text) needs a string "text"'),
        ({"kind": "text", "text": None}, 'turn.blocks[0] (text) has a "text" that is not a string'),
        ({"kind": "tool_result", "callId": "c", "isError": 1}, '"isError" that is not a boolean'),
        ({"kind": "image", "mediaType": "x"}, '(image) needs a string "dataBase64"'),
        ({"kind": 3}, "turn.blocks[0] must be an object with a string kind"),
        # the key written instead: a Python attribute's snake_case, the other tool block's id
        ({"kind": "tool_call", "callId": "c", "name": "ls"}, 'needs a string "id", not "callId"'),
        ({"kind": "tool_result", "call_id": "c"}, 'needs a string "callId", not "call_id"'),
        ({"kind": "tool_result", "id": "c"}, 'needs a string "callId", not "id"'),
        ({"kind": "image", "media_type": "x"}, 'needs a string "mediaType", not "media_type"'),
    ],
)
def test_a_refused_block_is_named_with_its_field(block: dict[str, Any], problem: str) -> None:
    found = turn_problem({"role": "user", "blocks": [block]})
    assert found is not None
    assert problem in found


def test_an_optional_field_set_to_null_is_valid_and_kept_as_written(
    store: SessionStore, open_store: Any, tmp_path: Path
) -> None:
    """The regression of issue 15: `isError: null` was stored and exported, then refused."""
    chat = store.session("a")
    call = {"kind": "tool_call", "id": "c", "name": "x", "input": {}}
    chat.append({"role": "assistant", "blocks": [call]})
    result = {"kind": "tool_result", "callId": "c", "output": "ok", "isError": None}
    chat.append({"role": "user", "blocks": [result]})
    store.export_jsonl("a", tmp_path / "a.jsonl")
    written = (tmp_path / "a.jsonl").read_bytes()
    assert b'"isError":null' in written
    other = open_store()
    other.import_jsonl(tmp_path / "a.jsonl")
    other.export_jsonl("a", tmp_path / "again.jsonl")
    assert (tmp_path / "again.jsonl").read_bytes() == written
    assert [hit.node_id for hit in other.search("ok")] == [store.load_path_nodes("a")[-1].id]


def test_every_kind_is_one_class_that_answers_for_all_its_uses() -> None:
    for kind, cls in [*BLOCK_CLASSES.items(), ("citation", UnknownBlock)]:
        assert block_class(kind) is cls
        assert cls is UnknownBlock or cls.model_fields["kind"].default == kind
        assert issubclass(cls, BlockBase)
        fields = {field.key for field in cls.wire_fields()}
        aliases = {field.alias or name for name, field in cls.model_fields.items()} - {"kind"}
        assert fields == aliases
        sample = {
            "kind": kind,
            **{field.key: _sample(field.type_name) for field in cls.wire_fields()},
        }
        assert cls.check(sample) is None
        parse_turn({"role": "user", "blocks": [sample]})
        for use in (cls.indexed, cls.chars, cls.transcript, cls.preview, cls.view):
            use(sample)


def _sample(type_name: str) -> Any:
    return {"a string": "s", "a boolean": True}.get(type_name, {"any": ["json"]})
