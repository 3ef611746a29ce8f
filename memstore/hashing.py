"""Content addresses of session nodes."""

from __future__ import annotations

import hashlib

from memstore import jsjson
from memstore.types import Turn, TurnLike

__all__ = ["hash_node", "hash_node_text"]


def hash_node(parent: str | None, turn: TurnLike, created_at: int) -> str:
    """The node id: sha256 of `JSON.stringify({parent, turn, createdAt})`, first 32 hex digits.

    A Turn model hashes in the key order it was parsed with; a plain dict in its own key order.
    """
    text = turn.json_text().encode() if isinstance(turn, Turn) else jsjson.dumps_bytes(turn)
    return hash_node_text(parent, text, created_at)


def hash_node_text(parent: str | None, turn_json: bytes, created_at: int) -> str:
    """`hash_node` for a turn already serialized with `JSON.stringify` (saves serializing twice)."""
    payload = b"".join(
        (
            b'{"parent":',
            jsjson.dumps_bytes(parent),
            b',"turn":',
            turn_json,
            b',"createdAt":',
            jsjson.dumps_bytes(created_at),
            b"}",
        )
    )
    return hashlib.sha256(payload).hexdigest()[:32]
