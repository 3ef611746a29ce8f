"""The key a writer gave a node (a Claude Agent SDK entry's `uuid`, the `node_keys` table), by
which a keyed append knows the entries the session holds already.

A key is never part of a turn: a node's id and its JSONL lines are the same with or without it.
It travels in a native session's JSONL export as a line of its own,
`{"type":"key","node":"<id>","key":"<key>"}`, which readers of the legacy format skip (they
ignore unknown record types) and an import into memstore reads back into `node_keys`, so an
imported transcript still deduplicates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memstore import jsjson
from memstore.errors import InvalidArgumentError

__all__ = ["KEY_RECORD", "MAX_KEY", "key_from_record", "key_record"]

KEY_RECORD = "key"
"""The `type` of the JSONL line that carries a node's key."""

MAX_KEY = 255
"""The longest key, in characters (the `node_keys.key` column)."""


def key_record(node_id: str, key: str) -> str:
    """The JSONL line (without its newline) that gives node `node_id` the writer's `key`."""
    return jsjson.dumps({"type": KEY_RECORD, "node": node_id, "key": key})


def key_from_record(record: Mapping[str, Any]) -> tuple[str, str] | None:
    """The node id and key a parsed JSONL record carries, or None for a record of another type.

    Raises:
        InvalidArgumentError: a key record whose node or key is malformed.
    """
    if record.get("type") != KEY_RECORD:
        return None
    node, key = record.get("node"), record.get("key")
    if not isinstance(node, str) or not isinstance(key, str) or not 0 < len(key) <= MAX_KEY:
        raise InvalidArgumentError(
            f"a key line names its node (a string) and a key of 1 to {MAX_KEY} characters"
        )
    return node, key
