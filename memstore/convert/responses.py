"""OpenAI Responses API input items (the OpenAI Agents SDK's session items) <-> memstore turns.

One item is one turn. Messages of every role (`system` and `developer` ones become user turns
whose `responses` key keeps the role), `function_call` (a tool call block), `function_call_output`
(a tool result block) and `reasoning` (thinking blocks from its summary) reach memstore's blocks
and so its search index; anything else is kept whole in the turn's `responses` key.
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

__all__ = ["RESPONSES", "ResponsesConverter", "item_to_turn", "turn_to_items"]

_ROLES = ("user", "assistant", "system", "developer")


class ResponsesConverter(Converter):
    """Responses input items <-> turns (see the module's docstring)."""

    fmt = "responses"
    codecs: ClassVar[Mapping[str, PartCodec]] = {
        "input_text": PartCodec("text", ("text", "text")),
        "output_text": PartCodec("text", ("text", "text")),
        "refusal": PartCodec("text", ("refusal", "text")),
        "input_image": UrlImageCodec("image_url"),
        "summary_text": PartCodec("thinking", ("text", "text")),
    }

    def typed(self, item: Item) -> Item | None:
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") in _ROLES:
            blocks = self.blocks_of(item.get("content"))
            role = "assistant" if item["role"] == "assistant" else "user"
            return self._turn(role, blocks, item, "content")
        if kind == "function_call" and isinstance(item.get("arguments"), str):
            call = {"kind": "tool_call", "id": item.get("call_id"), "name": item.get("name")}
            call.update(tool_input(item["arguments"]))
            return self._turn("assistant", [call], item, "call_id", "name", "arguments")
        if kind == "function_call_output" and "output" in item:
            result = {
                "kind": "tool_result",
                "callId": item.get("call_id"),
                "output": item["output"],
            }
            return self._turn("user", [result], item, "call_id", "output")
        if kind == "reasoning" and isinstance(item.get("summary"), list):
            return self._turn("assistant", self.blocks_of(item["summary"]), item, "summary")
        return None

    def _turn(self, role: str, blocks: list[Item] | None, item: Item, *mapped: str) -> Item | None:
        if blocks is None:
            return None
        rest = {key: value for key, value in item.items() if key not in mapped}
        return {"role": role, "blocks": blocks, self.fmt: rest}

    def untyped(self, turn: Mapping[str, Any], rest: Item) -> Item:
        blocks = turn["blocks"]
        kind = rest.get("type", "message")
        if kind == "function_call":
            call = blocks[0]
            rest.update(call_id=call["id"], name=call["name"], arguments=tool_arguments(call))
        elif kind == "function_call_output":
            rest.update(call_id=blocks[0]["callId"], output=blocks[0].get("output"))
        elif kind == "reasoning":
            rest["summary"] = [self.part_of(block) for block in blocks]
        else:
            rest["content"] = self.content_of(blocks)
        return rest

    def opaque_role(self, item: Item) -> str:
        kind = item.get("type")
        if isinstance(kind, str) and kind.endswith("_output"):
            return "user"
        return super().opaque_role(item)

    def native(self, turn: Mapping[str, Any]) -> list[Item]:
        """Text and images as one message per run of them, tool calls as `function_call`, tool
        results as `function_call_output`; thinking and unknown blocks are not sent."""
        items: list[Item] = []
        parts: list[Item] = []
        role = turn["role"]
        for block in turn["blocks"]:
            kind = block.get("kind")
            if kind == "text":
                text_type = "output_text" if role == "assistant" else "input_text"
                parts.append({"type": text_type, "text": block["text"]})
                continue
            if kind == "image" and role == "user":
                parts.append({"type": "input_image", "image_url": data_url(block)})
                continue
            if parts:
                items.append({"role": role, "content": parts})
                parts = []
            if kind == "tool_call":
                arguments = tool_arguments(block)
                items.append(
                    {
                        "type": "function_call",
                        "call_id": block["id"],
                        "name": block["name"],
                        "arguments": arguments,
                    }
                )
            elif kind == "tool_result":
                output = as_text(block.get("output"))
                items.append(
                    {"type": "function_call_output", "call_id": block["callId"], "output": output}
                )
        if parts:
            items.append({"role": role, "content": parts})
        return items


RESPONSES = ResponsesConverter()
item_to_turn = RESPONSES.to_turn
turn_to_items = RESPONSES.to_items
