"""pi's session files (`@mariozechner/pi-coding-agent`): `~/.pi/agent/sessions/<cwd>/*.jsonl`.

A header (`type: session`) then one entry per line. Format 3 entries carry `id` and `parentId`
(a tree; the leaf is the last entry); format 1 entries carry neither and form one list, which
becomes a chain (ids `line-<n>`, as pi itself chains them when it migrates). Messages (roles
`user`, `assistant`, `toolResult`, `bashExecution`, `custom`, ...) and `custom_message` entries
become turns; `compaction` and `branch_summary` entries become summary turns; the others
(`model_change`, `thinking_level_change`, `label`, `session_info`, `custom`) stay records and
feed the session's metadata, title and tags.
"""

from __future__ import annotations

import functools
from typing import Any

from memstore.foreign._common import (
    Entry,
    Problem,
    SessionFacts,
    Tree,
    Unmapped,
    UsageRow,
    as_float,
    as_int,
    checked_turn,
    condensed_turn,
    content_blocks,
    epoch_ms,
    lenient,
    need,
    shared_block,
)

__all__ = ["PiReader", "looks_like_pi"]

_NOT_NODES = frozenset({"model_change", "thinking_level_change", "label", "session_info", "custom"})


def looks_like_pi(value: dict[str, Any]) -> bool:
    """Whether a file's first line is a pi session header."""
    return value.get("type") == "session" and "cwd" in value and "uuid" not in value


class PiReader:
    """Reads a pi session file a line at a time (see the module docstring)."""

    def __init__(self) -> None:
        self.facts = SessionFacts("pi")
        self.tree = Tree()
        self.previous: str | None = None  # format 1: the entry a new entry follows
        self.number = 0
        self.labels: dict[str, str] = {}

    def read(self, value: Any) -> Entry:
        """The entry one parsed line makes; Problem for a line pi would not have written."""
        self.number += 1
        kind = need(value.get("type"), str, '"type"')
        if kind == "session":
            self._header(value)
            return Entry()
        entry_id, parent = self._place(value)
        if entry_id in self.tree:
            raise Problem(f"entry id {entry_id!r} appears twice")
        anchor = self.tree.anchor_of_parent(entry_id, parent)
        entry = self._entry(kind, value, entry_id, anchor)
        if entry.node_id is not None:
            anchor = entry.node_id
        self.tree.add(entry_id, anchor)
        self.facts.head = anchor
        return entry

    def _place(self, value: dict[str, Any]) -> tuple[str, str | None]:
        """An entry's id and its parent's: its own (format 2+), or the list's order (format 1)."""
        if "id" in value:
            entry_id = need(value["id"], str, '"id"')
            parent = need(value.get("parentId"), (str, type(None)), '"parentId"')
        else:
            entry_id, parent = f"line-{self.number}", self.previous
        self.previous = entry_id
        return entry_id, parent

    def _header(self, value: dict[str, Any]) -> None:
        facts = self.facts.meta
        for key in (
            "id",
            "cwd",
            "version",
            "provider",
            "modelId",
            "thinkingLevel",
            "parentSession",
        ):
            if key in value:
                facts["sessionId" if key == "id" else key] = value[key]

    def _entry(self, kind: str, value: dict[str, Any], entry_id: str, anchor: str | None) -> Entry:
        created = epoch_ms(value.get("timestamp"))
        if kind == "message":
            message = need(value.get("message"), dict, '"message"')
            created = epoch_ms(message.get("timestamp"), created)
            turn, usage = message_turn(message, self.facts.notes)
            return Entry(entry_id, anchor, created, checked_turn(turn), usage)
        if kind == "custom_message":
            turn = {"role": "user", "blocks": _content(value.get("content"), self.facts.notes)}
            return Entry(entry_id, anchor, created, checked_turn(turn))
        if kind == "compaction":
            summary = need(value.get("summary"), str, "compaction summary")
            record = {
                "fromNodeId": anchor,
                "cutNodeId": value.get("firstKeptEntryId"),
                "tokensBefore": value.get("tokensBefore"),
                "source": "pi",
            }
            return Entry(entry_id, anchor, created, condensed_turn(summary, record))
        if kind == "branch_summary":
            summary = need(value.get("summary"), str, "branch summary")
            turn = {"role": "user", "blocks": [{"kind": "text", "text": summary}]}
            turn["memstore"] = {"branchSummary": {"fromNodeId": value.get("fromId")}}
            return Entry(entry_id, anchor, created, turn)
        self._fact(kind, value)
        if kind not in _NOT_NODES:
            self.facts.meta.setdefault("unknownEntryTypes", [])
            if kind not in self.facts.meta["unknownEntryTypes"]:
                self.facts.meta["unknownEntryTypes"].append(kind)
        return Entry()

    def _fact(self, kind: str, value: dict[str, Any]) -> None:
        """What a non-message entry says about the session."""
        if kind == "model_change":
            self.facts.meta["provider"] = value.get("provider")
            self.facts.meta["modelId"] = value.get("modelId")
        elif kind == "thinking_level_change":
            self.facts.meta["thinkingLevel"] = value.get("thinkingLevel")
        elif kind == "session_info" and isinstance(value.get("name"), str):
            self.facts.title = value["name"]
        elif kind == "label":
            target = need(value.get("targetId"), str, "label targetId")
            label = value.get("label")
            if isinstance(label, str) and label:
                self.labels[target] = label
            else:
                self.labels.pop(target, None)
            self.facts.meta["labels"] = dict(self.labels)
            self.facts.tags = set(self.labels.values())


def message_turn(
    message: dict[str, Any], notes: list[str]
) -> tuple[dict[str, Any], UsageRow | None]:
    """The turn (and provider usage) of a pi message, by its role; what its content could not
    keep whole goes to `notes`."""
    role = message.get("role")
    if role == "assistant":
        return {"role": "assistant", "blocks": _content(message.get("content"), notes)}, _usage(
            message
        )
    if role == "toolResult":
        call_id = need(message.get("toolCallId"), str, "toolResult toolCallId")
        parts = _content(message.get("content"), notes)
        output = "\n".join(part["text"] for part in parts if part["kind"] == "text")
        result = {"kind": "tool_result", "callId": call_id, "output": output}
        if isinstance(message.get("isError"), bool):
            result["isError"] = message["isError"]
        images = [part for part in parts if part["kind"] == "image"]
        return {"role": "user", "blocks": [result, *images]}, None
    if role == "bashExecution":
        text = f"$ {message.get('command', '')}\n{message.get('output', '')}"
        return {"role": "user", "blocks": [{"kind": "text", "text": text}]}, None
    return {"role": "user", "blocks": _content(message.get("content"), notes)}, None


def _content(content: Any, notes: list[str]) -> list[dict[str, Any]]:
    """memstore blocks from pi content: a string, or text/thinking/toolCall/image parts."""
    return content_blocks(content, _block, notes)


@functools.partial(lenient, prefix="pi")
def _block(part: Any) -> dict[str, Any]:
    part = need(part, dict, "a content part")
    if (shared := shared_block(part, "toolCall", "arguments")) is not None:
        return shared
    kind = part.get("type")
    if kind == "image":
        media = need(part.get("mimeType"), str, "image mimeType")
        return {
            "kind": "image",
            "mediaType": media,
            "dataBase64": need(part.get("data"), str, "image data"),
        }
    raise Unmapped("not a content part memstore maps")


def _usage(message: dict[str, Any]) -> UsageRow:
    usage = _object(message.get("usage"))
    cost = _object(usage.get("cost"))
    return UsageRow(
        provider=message.get("provider") if isinstance(message.get("provider"), str) else None,
        model=message.get("model") if isinstance(message.get("model"), str) else None,
        input_tokens=as_int(usage.get("input")),
        output_tokens=as_int(usage.get("output")),
        cache_read_tokens=as_int(usage.get("cacheRead")),
        cache_write_tokens=as_int(usage.get("cacheWrite")),
        cost_usd=as_float(cost.get("total")),
    )


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
