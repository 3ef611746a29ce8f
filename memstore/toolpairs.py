"""Tool calls and their results: where a history may be cut without parting a result from its call.

A call and its result are often not neighbours: an agent that calls several tools at once may
store each call as its own assistant turn and each result as its own user turn (Claude Code's
files do), so `[call c1] [call c2] [result c1] [result c2]`. Cutting before `[call c2]` keeps a
turn that starts with no tool_result and still parts `result c1` from `call c1`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from memstore.types import Turn

__all__ = ["call_ids", "result_ids", "safe_cuts", "unanswered"]


def _blocks(turn: Turn | Mapping[str, Any]) -> Iterator[tuple[object, object, object]]:
    """(kind, id, callId) of each block, of a Turn or of its wire form."""
    if isinstance(turn, Turn):
        for block in turn.blocks:
            yield block.kind, getattr(block, "id", None), getattr(block, "call_id", None)
        return
    for block in turn.get("blocks", ()):
        if isinstance(block, Mapping):
            yield block.get("kind"), block.get("id"), block.get("callId")


def call_ids(turn: Turn | Mapping[str, Any]) -> list[str]:
    """The ids of the turn's tool_call blocks."""
    return [i for kind, i, _ in _blocks(turn) if kind == "tool_call" and isinstance(i, str)]


def result_ids(turn: Turn | Mapping[str, Any]) -> list[str]:
    """The call ids the turn's tool_result blocks answer."""
    return [c for kind, _, c in _blocks(turn) if kind == "tool_result" and isinstance(c, str)]


def unanswered(turns: Sequence[Turn | Mapping[str, Any]]) -> set[str]:
    """The call ids of the tool_results in `turns` whose tool_call is not in `turns`."""
    calls = {i for turn in turns for i in call_ids(turn)}
    return {c for turn in turns for c in result_ids(turn)} - calls


def safe_cuts(turns: Sequence[Turn | Mapping[str, Any]]) -> list[bool]:
    """For each index i, whether keeping `turns[i:]` keeps every tool_result with its call.

    A result whose call is in none of `turns` (an orphan already) does not count. One pass from
    the end: linear in the turns' blocks.
    """
    known = {i for turn in turns for i in call_ids(turn)}
    pending: set[str] = set()  # results kept so far whose call is further back
    safe = [True] * len(turns)
    for index in range(len(turns) - 1, -1, -1):
        pending.update(c for c in result_ids(turns[index]) if c in known)
        pending.difference_update(call_ids(turns[index]))
        safe[index] = not pending
    return safe
