"""The seed's token estimate (the character rule): characters / 4, rounded up, plus 4 per turn.

Counting follows JavaScript: string lengths are UTF-16 code units, serialized values are
`JSON.stringify` output. Condensation (`memstore.condense`) decides and sizes its requests by it;
the usage-aware estimate (`memstore.usage.estimate_with_usage`) adds it to what a provider
reported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from memstore.blocks import per_kind
from memstore.types import TurnLike, turn_to_json

__all__ = ["CHARS_PER_TOKEN", "TOKENS_PER_TURN", "estimate_context_tokens"]

CHARS_PER_TOKEN = 4
TOKENS_PER_TURN = 4

_chars = per_kind("chars")


def _block_chars(block: Mapping[str, Any]) -> int:
    chars: int = _chars(block.get("kind"))(block)
    return chars


def estimate_context_tokens(messages: Iterable[TurnLike]) -> int:
    """A cheap token estimate: characters / 4, rounded up, plus 4 per turn for framing."""
    chars = 0
    turns = 0
    for turn in messages:
        turns += 1
        chars += sum(_block_chars(block) for block in turn_to_json(turn).get("blocks", ()))
    return math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_TURN * turns
