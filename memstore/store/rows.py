"""How a node becomes rows: its `nodes` row and its `node_blocks` rows, derived from its turn in
one place."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from memstore.blocks import BlockColumns, per_kind
from memstore.errors import InvalidArgumentError
from memstore.types import MAX_CREATED_AT, MIN_CREATED_AT

__all__ = [
    "UNSPACED",
    "block_rows",
    "derived_text",
    "search_chars",
    "search_text",
    "storable",
    "stored_rows",
]

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
_HAS_UNSPACED = re.compile(f"[{UNSPACED}]")


def storable(text: str) -> str:
    """`text` as a database can store it: lone surrogates (not UTF-8) and NUL (refused by
    PostgreSQL) become U+FFFD."""
    return text if text.isascii() and "\x00" not in text else _UNSTORABLE.sub("\ufffd", text)


def derived_text(value: bytes) -> str:
    """Text that SQLite's JSON functions derived from a turn, read as bytes: a lone surrogate
    (which the turn's JSON escapes) comes out as the bytes of a surrogate, which are not UTF-8;
    it reads as U+FFFD, as `storable` makes it."""
    try:
        return storable(value.decode("utf-8", "surrogatepass"))
    except UnicodeDecodeError:
        return value.decode("utf-8", "replace")


def search_text(turn: Mapping[str, Any]) -> str:
    """The searchable text of a raw turn: text, thinking, tool names, inputs and outputs."""
    return _derive("", "", turn)[0]


def search_chars(text: str) -> str:
    """The words of `text` written in a script without spaces (Chinese, Japanese, ...), with each
    such character a word of its own: indexed so that a phrase of characters finds them
    anywhere inside a word. Empty for text without such characters (most text)."""
    if text.isascii():
        return ""
    # not a regular expression of `\S*[...]\S*`: it backtracked quadratically on a long word
    words = " ".join(word for word in text.split() if _HAS_UNSPACED.search(word))
    return " ".join(_UNSPACED_CHAR.sub(r" \1 ", words).split())


def block_rows(session_id: str, node_id: str, turn: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The `node_blocks` rows of a node: one per block, with the columns queries need."""
    return list(_derive(session_id, node_id, turn)[1])


def stored_rows(
    session_id: str,
    node_id: str,
    parent: str | None,
    created_at: int,
    turn: Mapping[str, Any],
    turn_json: str,
) -> tuple[dict[str, Any], Iterable[dict[str, Any]]]:
    """The `nodes` row of a node whose turn is `turn`, stored as the exact text `turn_json`,
    and its `node_blocks` rows: a list, or for a turn of more than ROWS_AT_ONCE blocks an
    iterator that builds the rest as they are read (to insert in bounded batches).

    Raises:
        InvalidArgumentError: `created_at` is out of the range both databases hold (int64).
    """
    if not MIN_CREATED_AT <= created_at <= MAX_CREATED_AT:
        node = f"node {node_id[:40]!r}" if node_id else "a turn"
        raise InvalidArgumentError(
            f"session {session_id!r}: {node} has created_at {created_at}, "
            "out of the range the databases hold (-2**63 to 2**63-1 epoch milliseconds)"
        )
    text, blocks = _derive(session_id, node_id, turn)
    chars = search_chars(text)
    row = {
        "session_id": session_id,
        "id": node_id,
        "parent_id": parent,
        "role": turn["role"],
        "created_at": created_at,
        "turn_json": turn_json,
        "search_text": text,
        "search_chars": chars,
        # PostgreSQL's search vectors (`tables.SearchVector` folds them as they are bound)
        "search_vector": text,
        "search_chars_vector": chars,
    }
    return row, blocks


_indexed = per_kind("indexed")
ROWS_AT_ONCE = 1000
"""Block rows built with a turn's search text; a turn's further rows are built as inserted."""


def _derive(
    session_id: str, node_id: str, turn: Mapping[str, Any]
) -> tuple[str, Iterable[dict[str, Any]]]:
    """A turn's search text and block rows, in one pass (each kind says both: `indexed`),
    but for the rows past ROWS_AT_ONCE, built later by a second pass as they are read: a row
    takes ten times a tiny block's bytes, and a turn may hold a million blocks."""
    parts: list[str] = []
    rows: list[dict[str, Any]] = []
    blocks = turn.get("blocks", ())
    for position, block in enumerate(blocks):
        text, columns = _indexed(block.get("kind"))(block)
        if text:
            parts.append(text)
        if position < ROWS_AT_ONCE:
            rows.append(_block_row(session_id, node_id, position, block.get("kind"), columns))
    more = len(blocks) > ROWS_AT_ONCE
    later = _rows_from(session_id, node_id, blocks, ROWS_AT_ONCE) if more else ()
    return storable("\n".join(parts)), itertools.chain(rows, later) if more else rows


def _rows_from(
    session_id: str, node_id: str, blocks: Sequence[Mapping[str, Any]], start: int
) -> Iterator[dict[str, Any]]:
    """The block rows from position `start` on, one at a time."""
    for position in range(start, len(blocks)):
        block = blocks[position]
        _, columns = _indexed(block.get("kind"))(block)
        yield _block_row(session_id, node_id, position, block.get("kind"), columns)


def _block_row(
    session_id: str, node_id: str, position: int, kind: object, columns: BlockColumns
) -> dict[str, Any]:
    shown, tool_name, call_id, is_error, input_json, output_json = columns
    return {
        "session_id": session_id,
        "node_id": node_id,
        "position": position,
        "kind": storable(kind) if type(kind) is str else "",
        "text": shown and storable(shown),  # validated: a string or None
        "tool_name": tool_name and storable(tool_name),
        "call_id": call_id and storable(call_id),
        "is_error": is_error,
        "input_json": input_json,
        "output_json": output_json,
    }
