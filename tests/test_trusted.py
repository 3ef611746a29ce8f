from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from memstore import SessionNode, Turn, jsjson

from .strategies import wire_turns

_SLOTS = ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")


def assert_built_alike(trusted: BaseModel, validated: BaseModel, where: str = "") -> None:
    """Every slot pydantic uses, compared; a pydantic release that changes them fails here."""
    assert type(trusted) is type(validated), where
    for slot in _SLOTS[1:3]:
        ours, theirs = getattr(trusted, slot), getattr(validated, slot)
        assert ours == theirs, (
            f"{where}{type(trusted).__name__}.{slot}: trusted construction made {ours!r}, "
            f"validation {theirs!r}: has pydantic changed its model internals? See _trusted.py"
        )
    assert trusted.__dict__.keys() == validated.__dict__.keys(), where
    for name, value in trusted.__dict__.items():
        other = validated.__dict__[name]
        if isinstance(value, BaseModel):
            assert_built_alike(value, other, f"{where}{name}.")
        elif isinstance(value, tuple) and value and isinstance(value[0], BaseModel):
            for index, (mine, its) in enumerate(zip(value, other, strict=True)):
                assert_built_alike(mine, its, f"{where}{name}[{index}].")
        else:
            assert value == other, f"{where}{name}"
    assert jsjson.dumps(trusted.model_dump()) == jsjson.dumps(validated.model_dump()), where


@settings(max_examples=200)
@given(turn=wire_turns, parent=st.none() | st.text(max_size=4), created_at=st.integers())
def test_trusted_construction_builds_what_validation_builds(
    turn: dict[str, Any], parent: str | None, created_at: int
) -> None:
    text = jsjson.dumps(turn)
    validated = Turn.from_json_text(text)
    trusted = Turn._from_stored_text(text)
    assert_built_alike(trusted, validated)
    assert trusted == validated
    assert trusted.json_text() == validated.json_text() == text
    assert jsjson.dumps(trusted.to_json()) == text
    node = SessionNode._stored("n", parent, trusted, created_at)
    wire = {"id": "n", "parent": parent, "turn": jsjson.loads(text), "createdAt": created_at}
    assert_built_alike(node, SessionNode.model_validate(wire))
    assert node.to_json() == SessionNode.model_validate(wire).to_json()


@settings(max_examples=100)
@given(turns=st.lists(wire_turns, max_size=6))
def test_turns_built_in_bulk_are_built_as_validation_builds_them(
    turns: list[dict[str, Any]],
) -> None:
    """One loop builds a session's turns, sharing layouts between turns of the same shape."""
    texts = [jsjson.dumps(turn) for turn in [*turns, *turns]]  # each shape seen twice
    built = Turn._from_stored_texts(texts)
    assert len(built) == len(texts)
    for index, (trusted, text) in enumerate(zip(built, texts, strict=True)):
        validated = Turn.from_json_text(text)
        assert_built_alike(trusted, validated, f"turn {index}: ")
        assert trusted == validated
        assert trusted.json_text() == text
        assert trusted.__pydantic_private__ is not validated.__pydantic_private__


@pytest.mark.parametrize(
    "bad",
    [
        '{"role":"user"}',
        '{"role":"robot","blocks":[]}',
        '{"role":"user","blocks":[{"kind":"text"}]}',
        '{"role":"user","blocks":[{"kind":5,"text":"x"}]}',
        '{"role":"user","blocks":[["not", "an", "object"]]}',
        '{"role":"user","blocks":[{"kind":["text"],"text":"x"}]}',
        '["role", "blocks"]',
    ],
)
def test_a_turn_that_is_not_valid_among_stored_ones_is_refused_as_validation_refuses_it(
    bad: str,
) -> None:
    good = '{"role":"user","blocks":[{"kind":"text","text":"x"}]}'
    with pytest.raises(ValidationError):
        Turn._from_stored_texts([good, bad, good])
    with pytest.raises(ValidationError):
        Turn._from_stored_text(bad)


def test_a_text_that_orjson_refuses_is_parsed_as_jsjson_parses_it() -> None:
    lone = '{"role":"user","blocks":[{"kind":"text","text":"\\ud800"}]}'  # a lone surrogate
    big = jsjson.dumps({"role": "user", "blocks": [{"kind": "text", "text": "x" * (1 << 20)}]})
    good = '{"role":"user","blocks":[{"kind":"text","text":"x"}]}'
    for texts in ([good, lone], [big, good], [lone, big]):
        built = Turn._from_stored_texts(texts)
        assert built == [Turn.from_json_text(text) for text in texts]
        assert [turn.json_text() for turn in built] == texts
