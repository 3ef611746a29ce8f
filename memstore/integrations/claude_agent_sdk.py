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
`sdk_summary`), stamps the session with its write time (`sdk_mtime`: later than every earlier
append through the same adapter, so two never tie, as the SDK's ordering expects) and sets the
session's title and tag from the titles and tags the SDK appends, in the same transaction; an
entry whose message reports usage (tokens, model) has it stored beside its node (`node_usage`).
Works under asyncio and trio (see `memstore.integrations._history`).

The SDK's docs call a `project_key` "a tenant ID" where an application serves many customers:
`MemstoreSessionStore(store, tenant_of=...)` maps each project key to a memstore tenant
(docs/tenants.md), and keeps each project's transcripts in its tenant's rows, on `store`'s
engine; without `tenant_of`, every project is in `store`'s own tenant.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
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
from memstore.store.tenancy import valid_tenant
from memstore.types import Turn
from memstore.usage import NodeUsage, from_anthropic

__all__ = ["MemstoreSessionStore", "memstore_session_id"]

_MAX_ID = 255
SUMMARY = "sdk_summary"
"""The metadata key of a main transcript's session that holds the SDK's folded summary."""
WRITTEN = "sdk_mtime"
"""The metadata key of a main transcript's session that holds its last append's write time."""


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

    def __init__(self, store: AnyStore, *, tenant_of: Callable[[str], str] | None = None) -> None:
        """`tenant_of`: the tenant of a project's transcripts, from its `project_key` (e.g.
        `lambda key: key.split("/")[0]`); None keeps every project in `store`'s tenant.
        A name that is not a tenant's fails the call with InvalidArgumentError."""
        self.store = store
        self.tenant_of = tenant_of
        self._tenants: dict[str, AnyStore] = {}
        self._last_write = 0

    def _store_of(self, project_key: str) -> AnyStore:
        """The store a project's transcripts live in: `store`, or its tenant's (`tenant_of`),
        made once on `store`'s engine and options."""
        if self.tenant_of is None:
            return self.store
        tenant = valid_tenant(self.tenant_of(project_key))
        if tenant == self.store.tenant:
            return self.store
        if tenant not in self._tenants:
            self._tenants[tenant] = type(self.store)(
                self.store.engine,  # type: ignore[arg-type]
                migrators=self.store.migrators,
                read_only=self.store.read_only,
                redact=self.store.redact,
                tenant=tenant,
            )
        return self._tenants[tenant]

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Append `entries` in order, skipping those whose `uuid` is stored already."""
        if entries:
            appended = _append(key, [dict(entry) for entry in entries], self._write_time)
            await _history.arun(self._store_of(key["project_key"]), appended)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """Every entry of a transcript in append order; None for one never written."""
        store = self._store_of(key["project_key"])
        turns = await _history.arun(store, _history.turns(memstore_session_id(key)))
        return CLAUDE_CODE.to_items_of(turns) or None  # type: ignore[return-value]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The project's main transcripts' summaries, as each append folded them (`data` is the
        SDK's, kept verbatim), stamped with the session's last write (as `list_sessions`)."""
        found = await _history.arun(self._store_of(project_key), _listed(project_key))
        return [
            {
                "session_id": info.metadata["session_id"],
                "mtime": _mtime(info),
                "data": info.metadata[SUMMARY],
            }
            for info in found
            if "subpath" not in info.metadata and isinstance(info.metadata.get(SUMMARY), dict)
        ]

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The project's main transcripts and when each was last written (epoch ms)."""
        found = await _history.arun(self._store_of(project_key), _listed(project_key))
        return [
            {"session_id": info.metadata["session_id"], "mtime": _mtime(info)}
            for info in found
            if "subpath" not in info.metadata
        ]

    async def delete(self, key: SessionKey) -> None:
        """Delete a transcript; a main one takes its subagents' with it."""
        await _history.arun(self._store_of(key["project_key"]), _delete(key))

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths of a session's subagent transcripts."""
        listed = _listed(key["project_key"], key["session_id"])
        found = await _history.arun(self._store_of(key["project_key"]), listed)
        return sorted(info.metadata["subpath"] for info in found if "subpath" in info.metadata)

    def _write_time(self) -> int:
        """Now in epoch ms, later than every earlier append's through this store: the SDK orders
        transcripts by it, and two appends in one millisecond must not tie (as the SDK's own
        in-memory store promises)."""
        self._last_write = max(int(time.time() * 1000), self._last_write + 1)
        return self._last_write


def _mtime(info: SessionInfo) -> int:
    """When a main transcript was last written: its last append's write time, or a later change
    made outside the SDK."""
    written = info.metadata.get(WRITTEN)
    return max(written, info.updated_at) if isinstance(written, int) else info.updated_at


def _metadata(key: Mapping[str, Any]) -> dict[str, Any]:
    fields = ("project_key", "session_id", "subpath")
    return {"agent": "claude-agent-sdk", **{name: key[name] for name in fields if name in key}}


def _entry_key(entry: Mapping[str, Any]) -> str | None:
    """An entry's node key: its `uuid` (a digest of it when no short string)."""
    uuid = entry.get("uuid")
    if uuid is None or (isinstance(uuid, str) and 0 < len(uuid) <= _MAX_ID):
        return uuid
    return "sha256:" + hashlib.sha256(repr(uuid).encode("utf-8", "surrogatepass")).hexdigest()


def _reviser(key: SessionKey, write_time: Callable[[], int]) -> _history.Revise:
    """What an append sets in its transaction: the metadata naming the transcript, and for a
    main one its write time and the SDK's summary folded over the new entries, with the title and
    tag it gives."""

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
        meta[WRITTEN] = write_time()
        change: dict[str, Any] = {"metadata": meta}
        old = before if isinstance(before, dict) else {}
        title = data.get("custom_title") or data.get("ai_title") or None
        if title != (old.get("custom_title") or old.get("ai_title") or None):
            change["title"] = title
        if data.get("tag") != old.get("tag"):
            change["tags"] = [data["tag"]] if data.get("tag") else []
        return change

    return revise


def _append(
    key: SessionKey, entries: list[dict[str, Any]], write_time: Callable[[], int]
) -> History[None]:
    session_id = memstore_session_id(key)
    turns = CLAUDE_CODE.to_turns(entries)
    keys = [_entry_key(entry) for entry in entries]
    usage = [_usage(entry) for entry in entries]
    extra = {"usage": usage} if any(usage) else {}
    yield _call("append_keyed", session_id, turns, keys, revise=_reviser(key, write_time), **extra)


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
