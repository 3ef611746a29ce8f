from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

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
