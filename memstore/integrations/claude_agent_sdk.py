"""A Claude Agent SDK `SessionStore` on a memstore store; needs the `claude-agent-sdk` extra.

```python
options = ClaudeAgentOptions(session_store=MemstoreSessionStore(store))
```

Each transcript (a project's session, or one of its subagents' under a `subpath`) is a memstore
session whose metadata names its `project_key`, `session_id` and `subpath`; each entry is one turn
(`memstore.convert.claude_code`), so messages, tool calls and results are searchable. Entries are
deduplicated by their `uuid` and load in append order; an entry whose message reports usage
(tokens, model) has it stored beside its node (`node_usage`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from memstore.errors import MissingExtraError

try:
    from claude_agent_sdk.types import (
        SessionKey,
        SessionListSubkeysKey,
        SessionStoreEntry,
        SessionStoreListEntry,
    )
except ImportError as exc:
    raise MissingExtraError(__name__, "claude-agent-sdk", exc) from exc

from memstore.convert.claude_code import CLAUDE_CODE
from memstore.integrations import _history
from memstore.integrations._history import AnyStore, Call, History
from memstore.store.plans import SessionInfo
from memstore.types import Turn
from memstore.usage import NodeUsage, from_anthropic

__all__ = ["MemstoreSessionStore", "memstore_session_id"]

_MAX_ID = 255


def memstore_session_id(key: Mapping[str, Any]) -> str:
    """The memstore session of a transcript: `project~session[~subpath]`, each part
    percent-encoded, or a hash of the project when that would be too long."""
    parts = [key["project_key"], key["session_id"], *([key["subpath"]] if "subpath" in key else [])]
    encoded = [quote(part, safe="").replace("~", "%7E") for part in parts]
    name = "~".join(encoded)
    if len(name) > _MAX_ID:
        digest = hashlib.sha256(key["project_key"].encode("utf-8", "surrogatepass")).hexdigest()
        name = "~".join([digest[:32], *encoded[1:]])
    return name


class MemstoreSessionStore:
    """Claude Agent SDK transcripts kept as memstore sessions (see the module's docstring)."""

    def __init__(self, store: AnyStore) -> None:
        self.store = store

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Append `entries` in order, skipping those whose `uuid` is stored already."""
        if entries:
            await _history.arun(self.store, _append(key, [dict(entry) for entry in entries]))

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """Every entry of a transcript in append order; None for one never written."""
        turns = await _history.arun(self.store, _history.turns(memstore_session_id(key)))
        return CLAUDE_CODE.to_items_of(turns) or None  # type: ignore[return-value]

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The project's main transcripts and when each was last written (epoch ms)."""
        found = await _history.arun(self.store, _listed(project_key))
        return [
            {"session_id": info.metadata["session_id"], "mtime": info.updated_at}
            for info in found
            if "subpath" not in info.metadata
        ]

    async def delete(self, key: SessionKey) -> None:
        """Delete a transcript; a main one takes its subagents' with it."""
        await _history.arun(self.store, _delete(key))

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths of a session's subagent transcripts."""
        found = await _history.arun(self.store, _listed(key["project_key"], key["session_id"]))
        return sorted(info.metadata["subpath"] for info in found if "subpath" in info.metadata)


def _metadata(key: Mapping[str, Any]) -> dict[str, Any]:
    fields = ("project_key", "session_id", "subpath")
    return {"agent": "claude-agent-sdk", **{name: key[name] for name in fields if name in key}}


def _append(key: SessionKey, entries: list[dict[str, Any]]) -> History[None]:
    session_id = memstore_session_id(key)
    stored: list[Turn] = yield from _history.turns(session_id)
    seen = {entry.get("uuid") for entry in CLAUDE_CODE.to_items_of(stored)} - {None}
    new: list[dict[str, Any]] = []
    for entry in entries:
        uuid = entry.get("uuid")
        if uuid is not None:
            if uuid in seen:
                continue
            seen.add(uuid)
        new.append(entry)
    turns = CLAUDE_CODE.to_turns(new)
    usage = [_usage(entry) for entry in new] if len(turns) == len(new) else []
    yield from _history.add(session_id, turns, usage if any(usage) else None)
    if not stored and new:
        yield _call("update_session", session_id, metadata=_metadata(key))


def _usage(entry: Mapping[str, Any]) -> NodeUsage | None:
    """What the model call behind an entry cost, when the entry's message says."""
    message = entry.get("message")
    if not isinstance(message, Mapping):
        return None
    return from_anthropic(message.get("usage"), message.get("model"))


def _listed(project_key: str, session_id: str | None = None) -> History[list[SessionInfo]]:
    wanted: dict[str, Any] = {"agent": "claude-agent-sdk", "project_key": project_key}
    if session_id is not None:
        wanted["session_id"] = session_id
    found: list[SessionInfo] = yield _call("sessions", metadata=wanted)
    return found


def _delete(key: SessionKey) -> History[None]:
    doomed = [memstore_session_id(key)]
    if "subpath" not in key:
        subagents = yield from _listed(key["project_key"], key["session_id"])
        doomed += [info.id for info in subagents if "subpath" in info.metadata]
    for session_id in doomed:
        yield _call("delete_session", session_id)


def _call(name: str, *args: Any, **kwargs: Any) -> Call:
    return name, args, kwargs
