"""What both chat APIs share when they receive our turns: tool pairing and flattened blocks.

Both APIs refuse a tool call without its result in the very next message, and a result whose call
is not in the message before. So a call and its result travel natively only as such a pair; any
other call or result is flattened to text in the transcript notation of `render_transcript`.
"""

from __future__ import annotations

from collections.abc import Sequence

from memstore import jsjson
from memstore.types import Block, ToolCallBlock, ToolResultBlock, Turn

__all__ = ["flatten", "paired_calls", "result_text"]


def paired_calls(turns: Sequence[Turn]) -> list[frozenset[str]]:
    """For each turn, the ids of the tool calls and results it may send natively."""
    paired = [frozenset[str]() for _ in turns]
    for index in range(len(turns) - 1):
        current, following = turns[index], turns[index + 1]
        if current.role != "assistant" or following.role != "user":
            continue
        calls = {block.id for block in current.blocks if isinstance(block, ToolCallBlock)}
        results = {b.call_id for b in following.blocks if isinstance(b, ToolResultBlock)}
        both = frozenset(calls & results)
        paired[index] = paired[index] | both
        paired[index + 1] = paired[index + 1] | both
    return paired


def result_text(block: ToolResultBlock) -> str:
    """A tool result's output as the text both APIs expect: strings as they are, else JSON."""
    return block.output if isinstance(block.output, str) else jsjson.dumps(block.output)


def flatten(block: Block) -> str | None:
    """A block as transcript text, or None for a block that is not sent at all (thinking:
    neither API accepts reasoning text back without the provider's signature)."""
    kind = type(block)
    return kind.transcript(block.model_dump()) if kind.replayed else None
