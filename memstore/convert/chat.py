"""OpenAI Chat Completions messages <-> memstore turns.

One message is one turn. `system`, `developer` and `user` messages are user turns (the `chat` key
keeps the role), an assistant message's content and `tool_calls` are text and tool call blocks, a
`tool` message is a tool result block; anything else is kept whole in the turn's `chat` key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from memstore.convert._core import (
    Converter,
    Item,
    PartCodec,
    UrlImageCodec,
    as_text,
    data_url,
    tool_arguments,
    tool_input,
)

__all__ = ["CHAT", "ChatConverter", "message_to_turn", "turn_to_messages"]


class ChatConverter(Converter):
    """Chat Completions messages <-> turns (see the module's docstring)."""

    fmt = "chat"
    codecs: ClassVar[Mapping[str, PartCodec]] = {
        "text": PartCodec("text", ("text", "text")),
        "refusal": PartCodec("text", ("refusal", "text")),
        "image_url": UrlImageCodec("image_url", "url"),
    }

    def typed(self, item: Item) -> Item | None:
        role = item.get("role")
        rest = dict(item)
        if role == "tool" and "content" in item:
            call_id = rest.pop("tool_call_id", None)
            result = {"kind": "tool_result", "callId": call_id, "output": rest.pop("content")}
            return {"role": "user", "blocks": [result], self.fmt: rest}
        if role not in ("system", "developer", "user", "assistant"):
            return None
        blocks: list[Item] = []
        if isinstance(item.get("content"), str | list):
            blocks = self.blocks_of(rest.pop("content")) or []
        if role == "assistant" and isinstance(item.get("tool_calls"), list):
            calls = [self._call_block(call) for call in rest.pop("tool_calls")]
            if None in calls:
                return None
            blocks.extend(call for call in calls if call is not None)
        turn_role = "assistant" if role == "assistant" else "user"
        return {"role": turn_role, "blocks": blocks, self.fmt: rest}

    def _call_block(self, call: Any) -> Item | None:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
            return None
        rest = {key: value for key, value in call.items() if key not in ("id", "function")}
        block = {"kind": "tool_call", "id": call.get("id"), "name": function.get("name")}
        return {**block, **tool_input(function["arguments"]), self.fmt: rest}

    def untyped(self, turn: Mapping[str, Any], rest: Item) -> Item:
        blocks = turn["blocks"]
        if rest.get("role") == "tool":
            return {**rest, "tool_call_id": blocks[0]["callId"], "content": blocks[0].get("output")}
        content = [block for block in blocks if block["kind"] != "tool_call"]
        calls = [block for block in blocks if block["kind"] == "tool_call"]
        if content:
            rest["content"] = self.content_of(content)
        if calls:
            rest["tool_calls"] = [self._call(block) for block in calls]
        return rest

    def _call(self, block: Mapping[str, Any]) -> Item:
        function = {"name": block["name"], "arguments": tool_arguments(block)}
        return {
            "id": block["id"],
            **block.get(self.fmt, {"type": "function"}),
            "function": function,
        }

    def native(self, turn: Mapping[str, Any]) -> list[Item]:
        """A user turn's text and images as one message, its tool results as `tool` messages;
        an assistant turn as one message with its text and `tool_calls`; thinking and unknown
        blocks are not sent."""
        role = turn["role"]
        messages: list[Item] = []
        parts: list[Item] = []
        calls: list[Item] = []
        for block in turn["blocks"]:
            kind = block.get("kind")
            if kind == "text":
                parts.append({"type": "text", "text": block["text"]})
            elif kind == "image" and role == "user":
                parts.append({"type": "image_url", "image_url": {"url": data_url(block)}})
            elif kind == "tool_call" and role == "assistant":
                calls.append(self._call(block))
            elif kind == "tool_result":
                output = as_text(block.get("output"))
                messages.append(
                    {"role": "tool", "tool_call_id": block["callId"], "content": output}
                )
        if role == "assistant" and (parts or calls):
            text = "".join(part["text"] for part in parts)
            message: Item = {"role": "assistant", "content": text or None}
            messages.append({**message, "tool_calls": calls} if calls else message)
        elif parts:
            messages.append({"role": "user", "content": parts})
        return messages


CHAT = ChatConverter()
message_to_turn = CHAT.to_turn
turn_to_messages = CHAT.to_items
