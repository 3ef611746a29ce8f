"""Converters between memstore turns and the messages of the agent frameworks, lossless both ways.

- `memstore.convert.responses`: OpenAI Responses input items (the OpenAI Agents SDK's items);
- `memstore.convert.chat`: OpenAI Chat Completions messages;
- `memstore.convert.anthropic`: Anthropic Messages API messages.

Each maps what memstore's turn contract can say onto its blocks (so text, tool calls and tool
results reach `node_blocks` and the search index) and keeps the rest in an extra key named after
the format, so `to_items(to_turn(item)) == [item]` for every item (see `_core`).
"""

from memstore.convert._core import FOREIGN, OPAQUE, Converter, Item
from memstore.convert.anthropic import ANTHROPIC, AnthropicConverter
from memstore.convert.chat import CHAT, ChatConverter
from memstore.convert.responses import RESPONSES, ResponsesConverter

__all__ = [
    "ANTHROPIC",
    "CHAT",
    "FOREIGN",
    "OPAQUE",
    "RESPONSES",
    "AnthropicConverter",
    "ChatConverter",
    "Converter",
    "Item",
    "ResponsesConverter",
]
