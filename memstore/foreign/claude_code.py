"""Claude Code transcripts: `~/.claude/projects/<project>/<session>.jsonl`.

One record per line. `user` and `assistant` records carry an Anthropic `message` and are chained
by `uuid` / `parentUuid`; they become turns under their parent's node. `system`, `progress`,
`attachment` and the like also sit in the chain but stay records (an entry under one hangs from
the nearest message above it). A `compact_boundary` system record starts a new root
(`parentUuid` null, like the Claude Code readers); the `isCompactSummary` user record under it
becomes a condensed summary turn. `custom-title`, `ai-title` and `summary` records (no uuid)
give the session its title, `tag` records its tag.
Sidechain records (`isSidechain`) are kept in the same session; subagent transcripts
(`<session>/subagents/agent-<id>.jsonl`) become sessions of their own that name their parent.
"""

from __future__ import annotations

import functools
from typing import Any

from memstore.foreign._common import (
    Entry,
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

__all__ = ["ClaudeCodeReader", "looks_like_claude_code"]

_MESSAGE_TYPES = frozenset({"user", "assistant"})
_SESSION_KEYS = ("sessionId", "cwd", "gitBranch", "version", "agentId", "slug")
_TITLE_KEYS = ("customTitle", "aiTitle", "summary")  # the first wins over the others


def looks_like_claude_code(value: dict[str, Any]) -> bool:
    """Whether a line is a Claude Code transcript record."""
    if "uuid" in value or "sessionId" in value or "leafUuid" in value:
        return True
    return value.get("type") in ("file-history-snapshot", "queue-operation")


class ClaudeCodeReader:
    """Reads a Claude Code transcript a line at a time (see the module docstring)."""

    def __init__(self) -> None:
        self.facts = SessionFacts("claude-code")
        self.tree = Tree(orphans=self.facts.notes)
        self.sidechain_nodes = 0
        self.nodes: set[str] = set()
        self.title_rank = len(_TITLE_KEYS)
        self.main_head: str | None = None
        self.condensed_from: dict[str, str | None] = {}  # compact boundary -> the last node before
        self.run_of: dict[str, str] = {}  # a response's records and results -> its message id
        self.run_tip: dict[str, str] = {}  # a response's message id -> its last placed record

    def read(self, value: Any) -> Entry:
        """The entry one parsed line makes; Problem for a record that breaks the format."""
        kind = value.get("type")
        if self._title_or_tag(value):
            return Entry()
        entry_id = value.get("uuid")
        if entry_id is None:
            return Entry()
        entry_id = need(entry_id, str, '"uuid"')
        parent = need(value.get("parentUuid"), (str, type(None)), '"parentUuid"')
        if entry_id in self.nodes:  # the same message again (a resumed session repeats some)
            self._place_head(value, entry_id)  # where it is now, as the SDK's reader takes it
            return Entry()
        anchor = self.tree.anchor_of_parent(entry_id, parent)
        self._facts(value)
        if kind not in _MESSAGE_TYPES or not isinstance(value.get("message"), dict):
            self.tree.add(entry_id, anchor)
            if value.get("subtype") == "compact_boundary":
                self.condensed_from[entry_id] = self._anchor(value.get("logicalParentUuid"))
            return Entry()
        anchor = self._in_parallel_turn(value, entry_id, parent, anchor)
        condensed_from = self.condensed_from.get(parent) if parent is not None else None
        if condensed_from is None:  # older transcripts put it on the summary itself
            condensed_from = self._anchor(value.get("logicalParentUuid"))
        turn, usage = _turn(value, condensed_from, self.facts.notes)
        self.tree.add(entry_id, entry_id)
        self.nodes.add(entry_id)
        if value.get("isSidechain"):
            self.sidechain_nodes += 1
            self.facts.meta["sidechainNodes"] = self.sidechain_nodes
        self._place_head(value, entry_id)
        created = epoch_ms(value.get("timestamp"))
        return Entry(entry_id, anchor, created, checked_turn(turn), usage)

    def _place_head(self, value: dict[str, Any], entry_id: str) -> None:
        """The head is the last main-chain message; a subagent's transcript, all sidechain,
        ends at its last message (as the SDK picks its leaf)."""
        if value.get("isMeta") or value.get("teamName"):
            return
        if not value.get("isSidechain"):
            self.main_head = entry_id
        self.facts.head = self.main_head or entry_id

    def _in_parallel_turn(
        self, value: dict[str, Any], entry_id: str, parent: str | None, anchor: str | None
    ) -> str | None:
        """The node a message hangs from, given the parallel turns so far. Claude Code writes
        one assistant record per part of a response, chained, and each tool result under its
        own call's record, so a response with several calls forks; the SDK's reader puts the
        results back after the response's last part, and so does this: a result under a part
        of a response hangs from the last record placed in that response's run."""
        message = value["message"]
        if value.get("type") == "assistant" and isinstance(message.get("id"), str):
            self.run_of[entry_id] = message["id"]
            self.run_tip[message["id"]] = entry_id
            return anchor
        if parent not in self.run_of or not _is_tool_result(message):
            return anchor
        response = self.run_of[parent]
        self.run_of[entry_id] = response
        anchor, self.run_tip[response] = self.run_tip[response], entry_id
        return anchor

    def _anchor(self, entry_id: Any) -> str | None:
        """The node at or nearest above an entry (None for an unknown one)."""
        return self.tree.anchors.get(entry_id) if isinstance(entry_id, str) else None

    def _title_or_tag(self, value: dict[str, Any]) -> bool:
        """Whether a record (without a uuid) names the session: its title (a user's
        `customTitle` over an `aiTitle` over a `summary` record's, the last non-empty one of
        each winning, as the SDK reads them) or its tag (an empty one clears it)."""
        if "uuid" in value:
            return False
        for rank, key in enumerate(_TITLE_KEYS):
            if key in value and (key != "summary" or value.get("type") == "summary"):
                title = value[key]
                if isinstance(title, str) and title and rank <= self.title_rank:
                    self.title_rank, self.facts.title = rank, title
                return True
        if value.get("type") == "tag":
            tag = value.get("tag")
            self.facts.tags = {tag} if isinstance(tag, str) and tag else set()
            self.facts.meta["tag"] = tag or None
            return True
        return False

    def _facts(self, value: dict[str, Any]) -> None:
        for key in _SESSION_KEYS:
            if isinstance(value.get(key), str):
                if key == "cwd":  # where the session started, as the SDK reports it
                    self.facts.meta.setdefault(key, value[key])
                else:
                    self.facts.meta[key] = value[key]
        message = value.get("message")
        if isinstance(message, dict) and isinstance(message.get("model"), str):
            self.facts.meta["model"] = message["model"]


def _turn(
    value: dict[str, Any], condensed_from: str | None, notes: list[str]
) -> tuple[dict[str, Any], UsageRow | None]:
    """A message's turn and usage; a compact summary (under its boundary) names the node the
    conversation it condenses ended at. What its content could not keep whole goes to `notes`."""
    message = value["message"]
    blocks = content_blocks(message.get("content"), _block, notes)
    if value.get("isCompactSummary"):
        text = "\n".join(block["text"] for block in blocks if block["kind"] == "text")
        record = {"fromNodeId": condensed_from, "source": "claude-code"}
        return condensed_turn(text, record), None
    if value["type"] == "user":
        return {"role": "user", "blocks": blocks}, None
    return {"role": "assistant", "blocks": blocks}, _usage(value, message)


@functools.partial(lenient, prefix="claude")
def _block(part: Any) -> dict[str, Any]:
    part = need(part, dict, "a content block")
    if (shared := shared_block(part, "tool_use", "input")) is not None:
        return shared
    kind = part.get("type")
    if kind == "tool_result":
        call_id = need(part.get("tool_use_id"), str, "tool_result tool_use_id")
        block = {"kind": "tool_result", "callId": call_id, "output": _output(part.get("content"))}
        if isinstance(part.get("is_error"), bool):
            block["isError"] = part["is_error"]
        return block
    if kind == "image" and isinstance(part.get("source"), dict):
        source = part["source"]
        if source.get("type") == "base64":
            media = need(source.get("media_type"), str, "image media_type")
            data = need(source.get("data"), str, "image data")
            return {"kind": "image", "mediaType": media, "dataBase64": data}
    raise Unmapped("not a content block memstore maps")


def _is_tool_result(message: dict[str, Any]) -> bool:
    """Whether a message carries a tool result."""
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") == "tool_result" for part in content
    )


def _output(content: Any) -> Any:
    """A tool result's output: its text (text parts joined), or the content as it is."""
    if isinstance(content, list) and all(
        isinstance(part, dict) and part.get("type") == "text" for part in content
    ):
        return "\n".join(str(part.get("text", "")) for part in content)
    return content


def _usage(value: dict[str, Any], message: dict[str, Any]) -> UsageRow:
    usage = _object(message.get("usage"))
    return UsageRow(
        provider="anthropic",
        model=message.get("model") if isinstance(message.get("model"), str) else None,
        input_tokens=as_int(usage.get("input_tokens")),
        output_tokens=as_int(usage.get("output_tokens")),
        cache_read_tokens=as_int(usage.get("cache_read_input_tokens")),
        cache_write_tokens=as_int(usage.get("cache_creation_input_tokens")),
        cost_usd=as_float(value.get("costUSD")),
    )


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
