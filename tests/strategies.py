"""Hypothesis strategies for wire turns: every block kind, optional fields absent, null or set,
unknown keys and kinds, keys in any order."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from memstore.blocks import BLOCK_CLASSES

texts = st.text(max_size=8) | st.sampled_from(["", "\u2028", "\ud800", "😀", '"\\', "\x00"])
"""Short strings, with the ones JSON and databases find hard: lone surrogates, NUL, U+2028."""
_KEYS = st.sampled_from(["a", "1", "01", "4294967295"]) | texts
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | texts,
    lambda inner: (
        st.lists(inner, max_size=2)
        | st.dictionaries(
            st.sampled_from(["a", "1", "01", "4294967295"]) | texts, inner, max_size=2
        )
    ),
    max_leaves=4,
)
"""JSON values, with what `JSON.stringify` rewrites (NaN, -0, 1e21, integer-like keys)."""

_KIND_NAMES = [*BLOCK_CLASSES, "citation"]
# Keys that are no field's JSON name: Python names of fields included, which a dict treats as
# unknown keys like any other.
_UNKNOWN_KEYS = st.sampled_from(["vendor", "call_id", "media_type", "is_error", "kind2", "1"])


def _field_value(type_name: str) -> st.SearchStrategy[Any]:
    if type_name == "a string":
        return texts
    if type_name == "a boolean":
        return st.booleans()
    return values


@st.composite
def wire_blocks(draw: st.DrawFn) -> dict[str, Any]:
    """A valid block as JSON: required fields set, each optional one absent, null or set."""
    kind = draw(st.sampled_from(_KIND_NAMES))
    fields: dict[str, Any] = {}
    for field in BLOCK_CLASSES.get(kind, BLOCK_CLASSES["text"]).wire_fields():
        if kind not in BLOCK_CLASSES:
            break
        if field.required:
            fields[field.key] = draw(_field_value(field.type_name))
        else:
            choice = draw(st.sampled_from(["absent", "null", "set"]))
            if choice != "absent":
                fields[field.key] = (
                    None if choice == "null" else draw(_field_value(field.type_name))
                )
    for key in draw(st.lists(_UNKNOWN_KEYS, max_size=2, unique=True)):
        fields.setdefault(key, draw(values))
    return dict(draw(st.permutations([("kind", kind), *fields.items()])))


wire_turns = st.builds(
    lambda role, blocks, extra, first: (
        {"role": role, "blocks": blocks, **extra}
        if first
        else {"blocks": blocks, **extra, "role": role}
    ),
    st.sampled_from(["user", "assistant"]),
    st.lists(wire_blocks(), max_size=3),
    st.dictionaries(st.sampled_from(["traceId", "1"]), values, max_size=1),
    st.booleans(),
)
"""Valid turns as JSON, unknown keys on the turn too, `role` first or last."""


@st.composite
def damaged_turns(draw: st.DrawFn) -> Any:
    """A turn as JSON, possibly invalid: one key of it, or of one of its blocks, removed or set
    to a value of another type (null included)."""
    turn: dict[str, Any] = draw(wire_turns)
    targets: list[dict[str, Any]] = [turn, *turn["blocks"]]
    target = draw(st.sampled_from(targets))
    if not target:
        return turn
    key = draw(st.sampled_from(sorted(target)))
    if draw(st.booleans()):
        del target[key]
    else:
        target[key] = draw(values)
    return turn
