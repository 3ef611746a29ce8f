"""A Claude Agent SDK `SessionStore` on a memstore store; needs the `claude-agent-sdk` extra.

```python
options = ClaudeAgentOptions(session_store=MemstoreSessionStore(store))
```

Each transcript (a project's session, or one of its subagents' under a `subpath`) is a memstore
session whose metadata names its `project_key`, `session_id` and `subpath`; each entry is one turn
(`memstore.convert.claude_code`), so messages, tool calls and results are searchable. Entries are
deduplicated by their `uuid` (a key of the node, looked up by index inside the append's
transaction: `append_keyed`) and load in append order. Each append also folds its entries into
the session's summary (the SDK's `fold_session_summary`, kept in the session's metadata under
`sdk_summary`) and sets the session's title and tag from the titles and tags the SDK appends,
in the same transaction. Works under asyncio and trio (see `memstore.integrations._history`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import quote

from memstore.errors import MissingExtraError

try:
    from claude_agent_sdk._internal.session_summary import fold_session_summary
    from claude_agent_sdk.types import (
        SessionKey,
        SessionListSubkeysKey,
        SessionStoreEntry,
        SessionStoreListEntry,
        SessionSummaryEntry,
    )
except ImportError as exc:
    raise MissingExtraError(__name__, "claude-agent-sdk", exc) from exc

from memstore.convert.claude_code import CLAUDE_CODE
from memstore.integrations import _history
from memstore.integrations._history import AnyStore, Call, History
from memstore.store.plans import SessionInfo
from memstore.types import Turn

__all__ = ["MemstoreSessionStore", "memstore_session_id"]

_MAX_ID = 255
SUMMARY = "sdk_summary"
"""The metadata key of a main transcript's session that holds the SDK's folded summary."""


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

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The project's main transcripts' summaries, as each append folded them (`data` is the
        SDK's, kept verbatim), stamped with the session's last write (as `list_sessions`)."""
        found = await _history.arun(self.store, _listed(project_key))
        return [
            {
                "session_id": info.metadata["session_id"],
                "mtime": info.updated_at,
                "data": info.metadata[SUMMARY],
            }
            for info in found
            if "subpath" not in info.metadata and isinstance(info.metadata.get(SUMMARY), dict)
        ]

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


def _entry_key(entry: Mapping[str, Any]) -> str | None:
    """An entry's node key: its `uuid` (a digest of it when no short string)."""
    uuid = entry.get("uuid")
    if uuid is None or (isinstance(uuid, str) and 0 < len(uuid) <= _MAX_ID):
        return uuid
    return "sha256:" + hashlib.sha256(repr(uuid).encode("utf-8", "surrogatepass")).hexdigest()


def _reviser(key: SessionKey) -> _history.Revise:
    """What an append sets in its transaction: the metadata naming the transcript, and for a
    main one the SDK's summary folded over the new entries, with the title and tag it gives."""

    def revise(metadata: Mapping[str, Any], added: list[Turn]) -> dict[str, Any]:
        meta = {**metadata, **_metadata(key)}
        if "subpath" in key:
            return {} if meta == metadata else {"metadata": meta}
        before = metadata.get(SUMMARY)
        previous: Any = None
        if isinstance(before, dict):
            previous = {"session_id": key["session_id"], "mtime": 0, "data": before}
        entries = cast("list[SessionStoreEntry]", CLAUDE_CODE.to_items_of(added))
        data = fold_session_summary(previous, key, entries)["data"]
        meta[SUMMARY] = data
        change: dict[str, Any] = {"metadata": meta}
        old = before if isinstance(before, dict) else {}
        title = data.get("custom_title") or data.get("ai_title") or None
        if title != (old.get("custom_title") or old.get("ai_title") or None):
            change["title"] = title
        if data.get("tag") != old.get("tag"):
            change["tags"] = [data["tag"]] if data.get("tag") else []
        return change

    return revise


def _append(key: SessionKey, entries: list[dict[str, Any]]) -> History[None]:
    session_id = memstore_session_id(key)
    turns = CLAUDE_CODE.to_turns(entries)
    keys = [_entry_key(entry) for entry in entries]
    yield _call("append_keyed", session_id, turns, keys, revise=_reviser(key))


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
