"""Anthropic Messages API messages <-> memstore turns.

One message is one turn with the same role. Text, thinking, `tool_use`, `tool_result` and base64
image blocks become memstore's blocks (what else they hold, such as a thinking block's signature,
stays in the block's `anthropic` key); other content blocks are kept whole as foreign blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from memstore.convert._core import Converter, ImageCodec, Item, PartCodec, as_text

__all__ = ["ANTHROPIC", "AnthropicConverter", "message_to_turn", "turn_to_messages"]


class _Base64Image(ImageCodec):
    """`{"type": "image", "source": {"type": "base64", "media_type": ..., "data": ...}}`."""

    def take(self, part: Item) -> tuple[str, str, Item] | None:
        source = part.get("source")
        if not isinstance(source, dict) or source.get("type") != "base64":
            return None
        media_type, data = source.get("media_type"), source.get("data")
        if not isinstance(media_type, str) or not isinstance(data, str):
            return None
        rest = {key: value for key, value in source.items() if key not in ("media_type", "data")}
        return media_type, data, {**part, "source": rest}

    def put(self, rest: Item, block: Mapping[str, Any]) -> Item:
        rest["source"].update(media_type=block["mediaType"], data=block["dataBase64"])
        return rest


class AnthropicConverter(Converter):
    """Anthropic messages <-> turns (see the module's docstring)."""

    fmt = "anthropic"
    codecs: ClassVar[Mapping[str, PartCodec]] = {
        "text": PartCodec("text", ("text", "text")),
        "thinking": PartCodec("thinking", ("thinking", "text")),
        "tool_use": PartCodec("tool_call", ("id", "id"), ("name", "name"), ("input", "input")),
        "tool_result": PartCodec(
            "tool_result", ("tool_use_id", "callId"), ("content", "output"), ("is_error", "isError")
        ),
        "image": _Base64Image(),
    }

    def typed(self, item: Item) -> Item | None:
        if item.get("role") not in ("user", "assistant"):
            return None
        blocks = self.blocks_of(item.get("content"))
        if blocks is None:
            return None
        rest = {key: value for key, value in item.items() if key != "content"}
        return {"role": item["role"], "blocks": blocks, self.fmt: rest}

    def untyped(self, turn: Mapping[str, Any], rest: Item) -> Item:
        return {**rest, "content": self.content_of(turn["blocks"])}

    def native(self, turn: Mapping[str, Any]) -> list[Item]:
        """One message with the same role; thinking (it has no signature) and unknown blocks are
        not sent."""
        content: list[Any] = []
        for block in turn["blocks"]:
            bare = _NATIVE.get(block.get("kind"))
            if bare is None:
                continue
            part = self.part_of({**block, self.fmt: bare})
            if bare["type"] == "tool_result" and not isinstance(part.get("content"), str | list):
                part["content"] = as_text(part.get("content"))
            content.append({key: value for key, value in part.items() if value is not None})
        return [{"role": turn["role"], "content": content}] if content else []


_NATIVE: Mapping[str, Item] = {
    "text": {"type": "text"},
    "tool_call": {"type": "tool_use"},
    "tool_result": {"type": "tool_result"},
    "image": {"type": "image", "source": {"type": "base64"}},
}
"""What a part of each kind holds besides the block's fields, for turns memstore wrote."""


ANTHROPIC = AnthropicConverter()
message_to_turn = ANTHROPIC.to_turn
turn_to_messages = ANTHROPIC.to_items
