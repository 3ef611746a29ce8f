"""Tool calls and their results in a stretch of turns: which results lack their call.

A call and its result are often not neighbours: an agent that calls several tools at once may
store each call as its own assistant turn and each result as its own user turn (Claude Code's
files do), so `[call c1] [call c2] [result c1] [result c2]`. Starting at `[call c2]` keeps a
turn that is no tool_result and still parts `result c1` from `call c1` (`load_path(last=N)`
moves back until it does not).
"""

from __future__ import annotations

from collections.abc import Sequence

from memstore.blocks import ToolCallBlock, ToolResultBlock
from memstore.types import Turn

__all__ = ["call_ids", "result_ids", "unanswered"]


def call_ids(turn: Turn) -> list[str]:
    """The ids of the turn's tool_call blocks."""
    return [block.id for block in turn.blocks if isinstance(block, ToolCallBlock)]


def result_ids(turn: Turn) -> list[str]:
    """The call ids the turn's tool_result blocks answer."""
    return [block.call_id for block in turn.blocks if isinstance(block, ToolResultBlock)]


def unanswered(turns: Sequence[Turn]) -> set[str]:
    """The call ids of the tool_results in `turns` whose tool_call is not in `turns`."""
    calls = {i for turn in turns for i in call_ids(turn)}
    return {c for turn in turns for c in result_ids(turn)} - calls
