"""Tombstones: the turn an erased node holds in place of its own (docs/erasure.md).

An erased node keeps its id, parent, role and time; its turn becomes its tombstone, whose
blocks say `[erased]` and whose `memstore.erased` names the erasure. The node's id was the hash
of the content it no longer holds, so an import that checks ids recognises a tombstone
(`is_tombstone`) and takes it under the id it has: its content is fixed, it can hide nothing.
"""

from __future__ import annotations

from typing import Any

from memstore import jsjson
from memstore.errors import InvalidJsonError

__all__ = ["ERASED_TEXT", "is_tombstone", "tombstone"]

ERASED_TEXT = "[erased]"
"""What a tombstone's blocks say in place of their content."""


def tombstone(role: str, turn_json: str, erased_at: int, receipt: int) -> dict[str, Any]:
    """The turn an erased node holds: its role; per block, a block of the same kind for tool
    calls and results (their ids and tool name kept, so pairs still match; input `{}`, output
    `[erased]`), a text block `[erased]` for any other; and `memstore.erased` naming the
    receipt. It parses as a Turn, and the tombstone of a tombstone is itself."""
    blocks: list[dict[str, Any]] = []
    try:
        original = jsjson.loads(turn_json).get("blocks") or []
    except (InvalidJsonError, AttributeError):  # a stored turn always parses to an object
        original = []
    for block in original if isinstance(original, list) else []:
        kind = block.get("kind") if isinstance(block, dict) else None
        if kind == "tool_call":
            blocks.append(
                {
                    "kind": "tool_call",
                    "id": str(block.get("id", "")),
                    "name": str(block.get("name", "")),
                    "input": {},
                }
            )
        elif kind == "tool_result":
            result: dict[str, Any] = {"kind": "tool_result", "callId": str(block.get("callId", ""))}
            result["output"] = ERASED_TEXT
            if isinstance(block.get("isError"), bool):
                result["isError"] = block["isError"]
            blocks.append(result)
        else:
            blocks.append({"kind": "text", "text": ERASED_TEXT})
    erased = {"at": erased_at, "erasure": receipt}
    return {"role": role, "blocks": blocks, "memstore": {"erased": erased}}


def is_tombstone(turn_json: str) -> bool:
    """Whether `turn_json` is, byte for byte, a tombstone as `erase` writes it: a role, blocks
    that hold nothing but `[erased]` (and tool ids and names), and `memstore.erased` with its
    time and receipt, nothing else. Anything more (or other spacing, or key order) is not."""
    if '"erased":{"at":' not in turn_json:
        return False  # the common case: not even close
    try:
        turn = jsjson.loads(turn_json)
    except InvalidJsonError:
        return False
    if not isinstance(turn, dict) or list(turn) != ["role", "blocks", "memstore"]:
        return False
    marker = turn["memstore"]
    erased = marker.get("erased") if isinstance(marker, dict) else None
    if not isinstance(erased, dict) or not isinstance(turn["role"], str):
        return False
    at, receipt = erased.get("at"), erased.get("erasure")
    if type(at) is not int or type(receipt) is not int:
        return False
    return jsjson.dumps(tombstone(turn["role"], turn_json, at, receipt)) == turn_json
