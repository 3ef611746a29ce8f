"""Streaming JSON output: nodes written as one indented JSON array, a node at a time.

`json.dumps` of a whole path holds every turn's plain values and one indented copy of the
whole text at once; `write_nodes_json` holds one node's. Values nested deeper than the
indenting encoder can go are written on one line by `jsjson` (iterative: any depth).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from memstore import jsjson
from memstore.types import SessionNode

__all__ = ["write_nodes_json"]


def write_nodes_json(nodes: list[SessionNode], write: Callable[[str], object]) -> None:
    """Write nodes through `write` as one indented JSON array (as `json.dumps(..., indent=2)`
    would), a node at a time and in pieces: each node's models are let go before its plain
    values are built, so a huge turn costs its values once, not also its models and a whole
    indented copy of its text. Empties `nodes`."""
    nodes.reverse()  # popped from the end: oldest first
    separator = "[\n  "
    while nodes:
        node = nodes.pop()
        record = {"id": node.id, "parent": node.parent, "turn": None, "createdAt": node.created_at}
        text = node.turn.json_text()
        del node  # the last reference to its models
        record["turn"] = jsjson.loads(text)
        del text
        write(separator)
        separator = ",\n  "
        if _nests_deeper_than(record, sys.getrecursionlimit() // 4):
            write(jsjson.dumps(record))  # iterative: any depth, on one line
            continue
        for piece in json.JSONEncoder(ensure_ascii=False, indent=2).iterencode(record):
            write(piece.replace("\n", "\n  "))
    write("[]\n" if separator.startswith("[") else "\n]\n")


def _nests_deeper_than(value: Any, limit: int) -> bool:
    """Whether a JSON value nests more than `limit` arrays and objects deep (found iteratively)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False
