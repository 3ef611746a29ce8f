"""The streaming JSON writer: the same text as `json.dumps(..., indent=2)`, a node at a time."""

from __future__ import annotations

import io
import json
from typing import Any

from memstore import SessionNode, Turn, parse_turn
from memstore.blocks import MAX_JSON_DEPTH
from memstore.json_stream import write_nodes_json


def node(node_id: str, parent: str | None, turn: Turn) -> SessionNode:
    return SessionNode(id=node_id, parent=parent, turn=turn, created_at=7)


def written(nodes: list[SessionNode]) -> str:
    out = io.StringIO()
    write_nodes_json(nodes, out.write)
    return out.getvalue()


def test_nodes_are_written_as_the_indented_array_json_dumps_would_write() -> None:
    turns = [
        parse_turn({"role": "user", "blocks": [{"kind": "text", "text": 'héllo "q"\n'}]}),
        parse_turn({"role": "assistant", "blocks": [], "extra": {"a": [1, 2.5, None]}}),
    ]
    nodes = [node("a", None, turns[0]), node("b", "a", turns[1])]
    expected = [
        {"id": n.id, "parent": n.parent, "turn": n.turn.to_json(), "createdAt": 7} for n in nodes
    ]
    assert written(nodes) == json.dumps(expected, ensure_ascii=False, indent=2) + "\n"
    assert nodes == []  # emptied: each node let go once written


def test_no_nodes_are_an_empty_array() -> None:
    assert written([]) == "[]\n"


def test_a_turn_nested_too_deep_to_indent_is_written_on_one_line() -> None:
    deep: Any = "end"
    for _ in range(MAX_JSON_DEPTH - 10):
        deep = [deep]
    turn = parse_turn({"role": "user", "blocks": [], "deep": deep})
    out = written([node("d", None, turn)])
    assert out.splitlines()[0::2] == ["[", "]"]  # the array indented, its node on one line
    assert out.splitlines()[1].startswith('  {"id":"d","parent":null,"turn":{')
    assert (
        out.splitlines()[1]
        == f'  {{"id":"d","parent":null,"turn":{turn.json_text()},"createdAt":7}}'
    )
