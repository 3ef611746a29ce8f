"""How a node becomes rows: its `nodes` row and its `node_blocks` rows, derived from its turn in
one place."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from memstore import jsjson

__all__ = ["UNSPACED", "block_rows", "search_chars", "search_text", "storable", "stored_rows"]

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# Characters of scripts written without spaces between words: Han (with radicals, iteration
# marks and compatibility ideographs), Hiragana, Katakana (and halfwidth), Hangul, Thai, Lao,
# Myanmar and Khmer.
UNSPACED = (
    "\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u2e80-\u2fdf\u3005-\u3007"
    "\u3021-\u3029\u3031-\u3035\u3038-\u303c\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f"
)
_UNSPACED_CHAR = re.compile(f"([{UNSPACED}])")
_UNSPACED_WORD = re.compile(f"\\S*[{UNSPACED}]\\S*")


def storable(text: str) -> str:
    """`text` as a database can store it: lone surrogates (not UTF-8) and NUL (refused by
    PostgreSQL) become U+FFFD."""
    return text if text.isascii() and "\x00" not in text else _UNSTORABLE.sub("\ufffd", text)


def search_text(turn: Mapping[str, Any]) -> str:
    """The searchable text of a raw turn: text, thinking, tool names, inputs and outputs."""
    return _derive("", "", turn)[0]


def search_chars(text: str) -> str:
    """The words of `text` written in a script without spaces (Chinese, Japanese, ...), with each
    such character a word of its own: indexed so that a phrase of characters finds them
    anywhere inside a word. Empty for text without such characters (most text)."""
    if text.isascii():
        return ""
    words = " ".join(_UNSPACED_WORD.findall(text))
    return " ".join(_UNSPACED_CHAR.sub(r" \1 ", words).split())


def block_rows(session_id: str, node_id: str, turn: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The `node_blocks` rows of a node: one per block, with the columns queries need."""
    return _derive(session_id, node_id, turn)[1]


def stored_rows(
    session_id: str,
    node_id: str,
    parent: str | None,
    created_at: int,
    turn: Mapping[str, Any],
    turn_json: str,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The `nodes` row of a node whose turn is `turn`, stored as the exact text `turn_json`,
    and its `node_blocks` rows."""
    text, blocks = _derive(session_id, node_id, turn)
    row = {
        "session_id": session_id,
        "id": node_id,
        "parent_id": parent,
        "role": turn["role"],
        "created_at": created_at,
        "turn_json": turn_json,
        "search_text": text,
        "search_chars": search_chars(text),
    }
    return row, blocks


def _derive(
    session_id: str, node_id: str, turn: Mapping[str, Any]
) -> tuple[str, list[dict[str, Any]]]:
    """A turn's search text and block rows, in one pass: each tool input and output is
    serialized once, for both."""
    parts: list[str] = []
    rows: list[dict[str, Any]] = []
    for position, block in enumerate(turn.get("blocks", ())):
        row = _block_row(session_id, node_id, position, block)
        rows.append(row)
        kind = row["kind"]
        if kind in ("text", "thinking"):
            parts.append(block.get("text", ""))
        elif kind == "tool_call":
            parts.append(f"{block.get('name', '')} {_value_text(block, 'input', row)}")
        elif kind == "tool_result":
            parts.append(_value_text(block, "output", row))
    return storable("\n".join(part for part in parts if part)), rows


def _value_text(block: Mapping[str, Any], key: str, row: Mapping[str, Any]) -> str:
    """A tool input's or output's searchable text: a string as it is, anything else as JSON
    (taken from the block's row, which serialized it already)."""
    value = block.get(key)
    if isinstance(value, str):
        return value
    dumped = row[f"{key}_json"]
    return dumped if dumped is not None else "null"


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
