"""How a node becomes a `nodes` row: the columns derived from its turn, computed in one place."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from memstore import jsjson

__all__ = ["block_rows", "node_row", "search_text", "storable"]

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """`text` as a database can store it: lone surrogates (not UTF-8) and NUL (refused by
    PostgreSQL) become U+FFFD."""
    return text if text.isascii() and "\x00" not in text else _UNSTORABLE.sub("\ufffd", text)


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else jsjson.dumps(value)


def search_text(turn: Mapping[str, Any]) -> str:
    """The searchable text of a raw turn: text, thinking, tool names, inputs and outputs."""
    parts: list[str] = []
    for block in turn.get("blocks", ()):
        kind = block.get("kind")
        if kind in ("text", "thinking"):
            parts.append(block.get("text", ""))
        elif kind == "tool_call":
            parts.append(f"{block.get('name', '')} {_value_text(block.get('input'))}")
        elif kind == "tool_result":
            parts.append(_value_text(block.get("output")))
    return storable("\n".join(part for part in parts if part))


def node_row(
    session_id: str,
    node_id: str,
    parent: str | None,
    created_at: int,
    turn: Mapping[str, Any],
    turn_json: str,
) -> dict[str, Any]:
    """The `nodes` row of a node whose turn is `turn`, stored as the exact text `turn_json`."""
    return {
        "session_id": session_id,
        "id": node_id,
        "parent_id": parent,
        "role": turn["role"],
        "created_at": created_at,
        "turn_json": turn_json,
        "search_text": search_text(turn),
    }


def _optional(value: Any) -> str | None:
    return storable(value) if isinstance(value, str) else None


def _block_row(session_id: str, node_id: str, position: int, block: Any) -> dict[str, Any]:
    kind = block.get("kind") if isinstance(block, Mapping) else None
    call = kind == "tool_call"
    result = kind == "tool_result"
    return {
        "session_id": session_id,
        "node_id": node_id,
        "position": position,
        "kind": _optional(kind) or "",
        "text": _optional(block.get("text")) if kind in ("text", "thinking") else None,
        "tool_name": _optional(block.get("name")) if call else None,
        "call_id": _optional(block.get("id") if call else block.get("callId") if result else None),
        "is_error": int(block.get("isError") is True) if result else None,
        "input_json": jsjson.dumps(block.get("input")) if call and "input" in block else None,
        "output_json": jsjson.dumps(block.get("output")) if result and "output" in block else None,
    }


def block_rows(session_id: str, node_id: str, turn: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The `node_blocks` rows of a node: one per block, with the columns queries need."""
    return [
        _block_row(session_id, node_id, position, block)
        for position, block in enumerate(turn.get("blocks", ()))
    ]
