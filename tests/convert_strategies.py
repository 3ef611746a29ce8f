"""Hypothesis strategies for framework items: well-formed ones of every type each converter
maps, unknown types and parts, extra keys, and damaged copies (a key dropped or its value
replaced), all as JSON that survives being stored."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st


def _exact_in_json(number: float) -> bool:
    """Whether a float reads back equal from JavaScript's text of it (an integral one past 2**53
    is written as an integer that Python reads as a different number)."""
    return not number.is_integer() or abs(number) < 2**53


texts = st.text(max_size=6) | st.sampled_from(["", "\u2028", "😀", '"\\', "a b"])
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False).filter(_exact_in_json)
    | texts
)
values = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(texts, inner, max_size=2),
    max_leaves=4,
)
"""JSON values that come back equal from JSON text."""
_EXTRA_KEYS = st.sampled_from(["id", "status", "vendor", "kind", "blocks", "item", "1", "type"])


@st.composite
def arguments(draw: st.DrawFn) -> str:
    """A tool call's arguments: compact JSON, spaced JSON, or not JSON at all."""
    value = draw(values)
    return draw(st.sampled_from([json.dumps(value), json.dumps(value, separators=(",", ":"))]))


@st.composite
def data_urls(draw: st.DrawFn) -> str:
    """A base64 `data:` URL, sometimes not one (plain URL, bad base64)."""
    return draw(
        st.sampled_from(
            [
                "data:image/png;base64,iVBORw0KGgo=",
                "data:image/jpeg;base64,",
                "data:image/png;base64,not base64!",
                "https://example.com/a.png",
            ]
        )
    )


@st.composite
def with_extras(draw: st.DrawFn, item: Any) -> Any:
    """`item` with a few extra keys, and sometimes damaged: a key dropped or its value swapped
    (anything but a dict as it is)."""
    if not isinstance(item, dict):
        return item
    item = dict(item)
    for key in draw(st.lists(_EXTRA_KEYS, max_size=2, unique=True)):
        item.setdefault(key, draw(values))
    if item and draw(st.integers(0, 4)) == 0:
        key = draw(st.sampled_from(sorted(item)))
        if draw(st.booleans()):
            del item[key]
        else:
            item[key] = draw(values)
    return item


def parts(*part_strategies: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """A content field: a string, or a list of the given parts, unknown parts and non-parts."""
    part = st.one_of(*part_strategies, st.fixed_dictionaries({"type": texts}), values)
    return texts | st.lists(part.flatmap(with_extras), max_size=3)


def typed(type_name: str, **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A dict with `"type": type_name` and the given fields."""
    return st.fixed_dictionaries({"type": st.just(type_name), **fields})
