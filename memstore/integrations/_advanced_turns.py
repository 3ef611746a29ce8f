"""The OpenAI Agents SDK advanced session's view of a branch (`MemstoreAdvancedSession`):
each item with what the SDK's `message_structure` row says of it (its type, tool name and user
turn number), derived from the branch's path rather than stored, and the usage rows of turns."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memstore.convert.responses import RESPONSES
from memstore.types import SessionNode

TOOL_CALLS = frozenset(
    {
        "tool_call",
        "function_call",
        "computer_call",
        "file_search_call",
        "web_search_call",
        "code_interpreter_call",
        "tool_search_call",
        "custom_tool_call",
        "mcp_call",
        "mcp_approval_request",
        "shell_call",
        "apply_patch_call",
    }
)
_NAMED_BY_TYPE = frozenset(
    {
        "computer_call",
        "file_search_call",
        "web_search_call",
        "code_interpreter_call",
        "shell_call",
        "apply_patch_call",
    }
)


@dataclass(frozen=True)
class Entry:
    """One item of a branch with what the SDK's `message_structure` row says of it."""

    node: SessionNode
    item: dict[str, Any]
    kind: str
    tool: str | None
    turn: int

    @property
    def user(self) -> bool:
        return self.item.get("role") == "user"


def entries(nodes: Sequence[SessionNode]) -> list[Entry]:
    """The branch's items, each with its type, tool name and user turn number."""
    found: list[Entry] = []
    turn = 0
    for node in nodes:
        for item in RESPONSES.to_items(node.turn):
            plain = dict(item)
            if plain.get("role") == "user":
                turn += 1
            found.append(Entry(node, plain, kind_of(plain), tool_name(plain), turn))
    return found


def kind_of(item: Mapping[str, Any]) -> str:
    """The SDK's message type: the role of a user or assistant message, else the item type."""
    if item.get("role") in ("user", "assistant"):
        return str(item["role"])
    if item.get("type"):
        return str(item["type"])
    return "other"


def tool_name(item: Mapping[str, Any]) -> str | None:
    """The tool an item calls, as the SDK names it (`namespace.name`, an MCP server's label,
    or the built-in tool's type)."""
    kind = item.get("type")
    if kind in ("mcp_call", "mcp_approval_request") and "server_label" in item:
        label, name = item.get("server_label"), item.get("name")
        if name and label:
            return f"{label}.{name}"
        return str(label) if label else str(name) if name else None
    if kind in ("tool_search_call", "tool_search_output"):
        return "tool_search"
    if kind in _NAMED_BY_TYPE:
        return str(kind)
    if "name" in item:
        name, namespace = item.get("name"), item.get("namespace")
        if name is None:
            return None
        name_text = str(name)
        if isinstance(namespace, str) and namespace and namespace != name_text and name_text:
            return f"{namespace}.{name_text}"
        return name_text
    return None


def tool_usage(entries: Sequence[Entry]) -> list[tuple[str, int, int]]:
    """How often each tool was called in each turn, as `(tool_name, count, turn)`, by turn (a
    tool search's output counts when its call is not in the turn)."""
    searched = {(entry.turn, entry.tool) for entry in entries if entry.kind == "tool_search_call"}
    counts: dict[tuple[int, Any], int] = {}
    for entry in entries:
        if entry.kind in TOOL_CALLS or (
            entry.kind == "tool_search_output" and (entry.turn, entry.tool) not in searched
        ):
            key = (entry.turn, entry.tool)
            counts[key] = counts.get(key, 0) + 1
    ordered = sorted(counts.items(), key=lambda pair: (pair[0][0], str(pair[0][1])))
    return [(tool, count, turn) for (turn, tool), count in ordered]


def texts(content: Any) -> list[str] | None:
    """The text of a user message's content (a string, or its parts' texts)."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        return [str(part.get("text", "")) for part in content]
    return None


def preview(content: Any, length: int | None) -> str:
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    if length is not None and len(text) > length:
        return text[:length] + "..."
    return text


def turn_info(entry: Entry, length: int | None) -> dict[str, Any]:
    content = entry.item.get("content", "")
    return {
        "turn": entry.turn,
        "content": preview(content, length),
        "full_content": content,
        "timestamp": timestamp(entry.node.created_at),
        "can_branch": True,
    }


def timestamp(epoch_ms: int) -> str:
    """A time as SQLite's CURRENT_TIMESTAMP writes it (UTC), as the SDK's rows give it."""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def usage_row(usage: Any) -> dict[str, Any]:
    """The SDK's `Usage` as the JSON the turn keeps."""
    return {
        "requests": usage.requests or 0,
        "input_tokens": usage.input_tokens or 0,
        "output_tokens": usage.output_tokens or 0,
        "total_tokens": usage.total_tokens or 0,
        "input_tokens_details": _details(getattr(usage, "input_tokens_details", None)),
        "output_tokens_details": _details(getattr(usage, "output_tokens_details", None)),
    }


def _details(details: Any) -> Any:
    """A usage's token details as JSON, as the SDK's `AdvancedSQLiteSession` writes them: every
    field of the object, those the provider left unset as null (the openai package's
    `cache_write_tokens_details` among them, which the SDK's tests read back). Where the
    reference gives up (a nested object, such as `cache_write_tokens_details` given: it logs
    and keeps no details at all), the nested object is kept as its fields."""
    if not details:
        return None
    try:
        return json.loads(json.dumps(details.__dict__, default=_nested))
    except (TypeError, ValueError, AttributeError):
        return None


def _nested(value: Any) -> Any:
    """A nested pydantic object (the openai package's models) as its JSON fields."""
    dump = getattr(value, "model_dump", None)
    if dump is None:
        raise TypeError(f"{type(value).__name__} is not JSON")
    return dump(mode="json")


def usage_view(row: Mapping[str, Any]) -> dict[str, Any]:
    names = (
        "requests",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "input_tokens_details",
        "output_tokens_details",
    )
    return {name: row.get(name) for name in names}
