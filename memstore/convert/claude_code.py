"""Claude Code transcript entries (the lines the Claude Agent SDK hands a `SessionStore`) <->
memstore turns.

One entry is one turn. A `user` or `assistant` entry's `message` is an Anthropic message, so it
becomes blocks as `memstore.convert.anthropic` makes them (searchable text, tool calls and
results); the rest of the entry stays in the turn's `claude_code` key. Any other entry (titles,
summaries, modes) is kept whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memstore.convert._core import Converter, Item
from memstore.convert.anthropic import ANTHROPIC

__all__ = ["CLAUDE_CODE", "ClaudeCodeConverter"]


class ClaudeCodeConverter(Converter):
    """Claude Code transcript entries <-> turns (see the module's docstring)."""

    fmt = "claude_code"

    def typed(self, item: Item) -> Item | None:
        message = item.get("message")
        if item.get("type") not in ("user", "assistant") or not isinstance(message, dict):
            return None
        turn = dict(ANTHROPIC.to_turn(message).to_json())
        turn[self.fmt] = {key: value for key, value in item.items() if key != "message"}
        return turn

    def untyped(self, turn: Mapping[str, Any], rest: Item) -> Item:
        (message,) = ANTHROPIC.to_items(turn)
        return {**rest, "message": message}

    def native(self, turn: Mapping[str, Any]) -> list[Item]:
        """A turn memstore wrote is no transcript entry: none."""
        return []

    def opaque_role(self, item: Item) -> str:
        return "assistant" if item.get("type") == "assistant" else "user"


CLAUDE_CODE = ClaudeCodeConverter()
