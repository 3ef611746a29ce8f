"""LangChain messages (`langchain_core.messages`) <-> memstore turns; needs the `langchain` extra.

One message is one turn: AI messages (and their chunks) are assistant turns, every other type a
user turn. Content (a string, or a list of strings and content blocks: text, thinking/reasoning,
image URLs) and an AI message's `tool_calls` become blocks, a tool message a tool result block;
the message's type and every field that is not its default stay in the turn's `langchain` key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from memstore.convert._core import Converter, Item, PartCodec, UrlImageCodec, as_text
from memstore.types import Turn, TurnLike

__all__ = ["LANGCHAIN", "LangChainConverter", "message_to_turn", "turn_to_messages"]

_AI_TYPES = ("ai", "AIMessageChunk")


class LangChainConverter(Converter):
    """LangChain messages <-> turns (see the module's docstring). Its items are the messages'
    dicts (`message_to_dict`) without the fields that hold their defaults."""

    fmt = "langchain"
    codecs: ClassVar[Mapping[str, PartCodec]] = {
        "text": PartCodec("text", ("text", "text")),
        "thinking": PartCodec("thinking", ("thinking", "text")),
        "reasoning": PartCodec("thinking", ("reasoning", "text")),
        "image_url": UrlImageCodec("image_url", "url"),
    }

    def message_to_turn(self, message: BaseMessage) -> Turn:
        """The turn of one message; `turn_to_messages` of it gives an equal message back."""
        return self.to_turn(compact_dict(message))

    def turn_to_messages(self, turn: TurnLike) -> list[BaseMessage]:
        """The message a converted turn came from, or what a turn memstore wrote reads as."""
        return messages_from_dict(self.to_items(turn))

    def messages_to_turns(self, messages: Iterable[BaseMessage]) -> list[Turn]:
        """The turns of several messages, one each."""
        return [self.message_to_turn(message) for message in messages]

    def turns_to_messages(self, turns: Iterable[TurnLike]) -> list[BaseMessage]:
        """The messages of several turns, in order."""
        return messages_from_dict(self.to_items_of(turns))

    def block_of(self, part: Any) -> Item:
        if isinstance(part, str):  # a bare string in a content list
            return {"kind": "text", "text": part, self.fmt: None}
        return super().block_of(part)

    def part_of(self, block: Mapping[str, Any]) -> Any:
        if block["kind"] == "text" and self.fmt in block and block[self.fmt] is None:
            return block["text"]
        return super().part_of(block)

    def typed(self, item: Item) -> Item | None:
        kind, data = item.get("type"), item.get("data")
        if not isinstance(kind, str) or not isinstance(data, dict) or "content" not in data:
            return None
        rest = dict(data)
        content = rest.pop("content")
        if kind == "tool":
            call_id = rest.pop("tool_call_id", None)
            blocks = [{"kind": "tool_result", "callId": call_id, "output": content}]
        else:
            blocks = self.blocks_of(content) or []
        if kind in _AI_TYPES and "tool_calls" in rest:
            calls = rest.pop("tool_calls")
            if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
                return None
            blocks.extend(self._call_block(call) for call in calls)
        role = "assistant" if kind in _AI_TYPES else "user"
        return {"role": role, "blocks": blocks, self.fmt: {"type": kind, "data": rest}}

    def _call_block(self, call: Item) -> Item:
        rest = {key: value for key, value in call.items() if key not in ("id", "name", "args")}
        block = {"kind": "tool_call", "id": call.get("id"), "name": call.get("name")}
        return {**block, "input": call.get("args"), self.fmt: rest}

    def untyped(self, turn: Mapping[str, Any], rest: Item) -> Item:
        kind, data = rest["type"], dict(rest["data"])
        blocks = turn["blocks"]
        if kind == "tool":
            data.update(content=blocks[0]["output"], tool_call_id=blocks[0]["callId"])
            return {"type": kind, "data": data}
        calls = [block for block in blocks if block["kind"] == "tool_call"]
        data["content"] = self.content_of([b for b in blocks if b["kind"] != "tool_call"])
        if calls:
            data["tool_calls"] = [self._call(block) for block in calls]
        return {"type": kind, "data": data}

    def _call(self, block: Mapping[str, Any]) -> Item:
        rest = block.get(self.fmt) or {"type": "tool_call"}
        return {"name": block["name"], "args": block["input"], "id": block["id"], **rest}

    def native(self, turn: Mapping[str, Any]) -> list[Item]:
        """A user turn's text blocks as human messages and its tool results as tool messages; an
        assistant turn's text and tool calls as one AI message; other blocks are not sent."""
        texts = [block["text"] for block in turn["blocks"] if block.get("kind") == "text"]
        if turn["role"] == "assistant":
            calls = [self._call(b) for b in turn["blocks"] if b.get("kind") == "tool_call"]
            if not texts and not calls:
                return []
            return [{"type": "ai", "data": {"content": "".join(texts), "tool_calls": calls}}]
        items: list[Item] = []
        for block in turn["blocks"]:
            if block.get("kind") == "tool_result":
                data = {"content": as_text(block.get("output")), "tool_call_id": block["callId"]}
                items.append({"type": "tool", "data": data})
            elif block.get("kind") == "text":
                items.append({"type": "human", "data": {"content": block["text"]}})
        return items


def compact_dict(message: BaseMessage) -> Item:
    """`message_to_dict` of a message without the fields that hold their defaults (which
    `messages_from_dict` sets again), or the whole dict if that would not give it back."""
    item = message_to_dict(message)
    fields = type(message).model_fields
    data = {
        key: value
        for key, value in item["data"].items()
        if key not in fields
        or fields[key].is_required()
        or value != fields[key].get_default(call_default_factory=True)
    }
    compact = {"type": item["type"], "data": data}
    return compact if messages_from_dict([compact]) == [message] else item


LANGCHAIN = LangChainConverter()
message_to_turn = LANGCHAIN.message_to_turn
turn_to_messages = LANGCHAIN.turn_to_messages
