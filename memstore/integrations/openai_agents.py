"""An OpenAI Agents SDK `Session` on a memstore store; needs the `openai-agents` extra.

```python
session = MemstoreSession("user-42", store)          # a SessionStore or an AsyncSessionStore
await Runner.run(agent, "Hello", session=session)
```

Each item is one turn (`memstore.convert.responses`), so the conversation is searchable and
queryable like any session. `add_items` appends its items as one chain in one transaction at the
head, so concurrent writers make one linear history. `pop_item` and `clear_session` delete
nothing: `pop_item` moves the head back to the parent, `clear_session` starts a new root, and the
earlier turns stay in the session as other branches (`store.load_session(id)` shows them all;
re-appending a stored node with `store.append_node(id, node)` makes it the head again).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memstore.errors import HeadMovedError, InvalidTurnError, MemstoreError, MissingExtraError

try:
    import agents
    from agents.memory import OpenAIResponsesCompactionArgs, SessionSettings
    from agents.memory.session_settings import coerce_session_settings, resolve_session_limit
except ImportError as exc:
    raise MissingExtraError(__name__, "openai-agents", exc) from exc

from memstore import jsjson
from memstore.condense import fills_trigger, should_compact
from memstore.convert.responses import RESPONSES
from memstore.integrations import _history
from memstore.integrations._history import AnyStore
from memstore.store import SessionStore
from memstore.store.compaction import CompactionResult
from memstore.store.plans import now_ms
from memstore.types import (
    CompactionPolicy,
    ModelCard,
    ModelInvoker,
    SessionNode,
    Turn,
    validate_session_id,
)
from memstore.usage import from_openai_agents

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["SNAPSHOT_TESTED_VERSIONS", "MemstoreSession", "SessionCompaction"]

SNAPSHOT_TESTED_VERSIONS = frozenset({"0.24.0", "0.25.0"})
"""The openai-agents versions whose private compaction-snapshot hook (`_get_compaction_snapshot`,
`agents.memory.session._CompactionSnapshot`) `MemstoreSession` implements and was tested with.
0.24.0 stays: the SDK's adopted tests passed on it, and 0.25.0 left the hook as it was (the
dataclass's fields items, complete and replace_suffix, and `OpenAIResponsesCompactionSession`'s
calls of it, differ only in the default model's name)."""


@dataclass(frozen=True)
class SessionCompaction:
    """How `MemstoreSession.run_compaction` condenses: memstore's summarizer on any invoker."""

    model: ModelCard
    invoker: ModelInvoker
    policy: CompactionPolicy = field(default_factory=CompactionPolicy)
    usage_aware: bool = False
    """Decide by the usage-aware estimate (the input tokens the provider last reported on the
    path, as `add_usage` records them, plus the character rule for the items after them:
    `estimate_tokens(..., usage_aware=True)`) rather than by the character rule alone."""


class MemstoreSession:
    """The items of one OpenAI Agents SDK session, kept as the memstore session `session_id`."""

    def __init__(
        self,
        session_id: str,
        store: AnyStore,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        compaction: SessionCompaction | None = None,
    ) -> None:
        self.session_id = validate_session_id(session_id)
        self.store = store
        self.session_settings = session_settings
        self.compaction = compaction
        self._seen: _Seen | None = None

    @property
    def session_settings(self) -> SessionSettings:
        """The settings (`{"limit": 2}` or a `SessionSettings`; None: the defaults), as the
        SDK's sessions keep them: a `SessionSettings`, which the Runner reads."""
        return self._settings

    @session_settings.setter
    def session_settings(self, value: SessionSettings | dict[str, Any] | None) -> None:
        self._settings = SessionSettings() if value is None else coerce_session_settings(value)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The latest `limit` items (default: the settings' limit, else all), oldest first."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit <= 0:
            return []
        head = await _history.arun(self.store, _history.head(self.session_id))
        if self._seen is None or self._seen.head != head:
            found = await _history.arun(self.store, _history.turns(self.session_id))
            self._seen = _Seen.of(head, RESPONSES.to_items_of(found))
        return self._seen.items(limit)

    async def add_items(self, items: Sequence[TResponseInputItem]) -> None:
        """Append `items` as one atomic batch."""
        plain = plain_items(items)
        nodes = await _history.arun(
            self.store, _history.add(self.session_id, RESPONSES.to_turns(plain))
        )
        seen = self._seen
        if nodes and seen is not None and nodes[0].parent == seen.head:
            self._seen = seen.extended(nodes[-1].id, plain)

    async def add_usage(
        self, usage: Any, *, model: str | None = None, cost_usd: float | None = None
    ) -> str:
        """Record a run's usage, in the SDK's own shape (`result.context_wrapper.usage`),
        against the newest item (the run's last); returns that node's id. Cached input
        tokens are counted as cache reads, not input.

        Raises:
            InvalidArgumentError: `usage` is not the SDK's `Usage`.
            UnknownSessionError: the session has no items yet.
        """
        node_usage = from_openai_agents(usage, model=model, cost_usd=cost_usd)
        if isinstance(self.store, SessionStore):
            return await asyncio.to_thread(self.store.record_usage, self.session_id, node_usage)
        return await self.store.record_usage(self.session_id, node_usage)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item from the history and return it (it stays as a branch)."""
        turn = await _history.arun(self.store, _history.pop(self.session_id, now_ms()))
        if turn is None:
            return None
        items = RESPONSES.to_items(turn)
        return items[-1] if items else None  # type: ignore[return-value]

    async def clear_session(self) -> None:
        """Empty the history (the old one stays in the session as another branch)."""
        await _history.arun(self.store, _history.clear(self.session_id, now_ms()))

    async def run_compaction(self, args: OpenAIResponsesCompactionArgs | None = None) -> None:
        """Condense the history onto a new branch (a summary, then the newest turns) once it
        fills the policy's share of the model's window, or at once with `force`; the SDK calls
        this after each turn. Without `compaction` settings it does nothing."""
        settings = self.compaction
        if settings is None:
            return
        if not (args or {}).get("force"):
            if settings.usage_aware:
                tokens = await self._usage_aware_tokens()
                if not fills_trigger(tokens, settings.model, settings.policy):
                    return
            else:
                found = await _history.arun(self.store, _history.turns(self.session_id))
                if not should_compact(found, settings.model, settings.policy):
                    return
        await self._compact(settings)

    async def _get_compaction_snapshot(
        self, limit: int, *, prune_prefix: Callable[[Any], bool] | None = None
    ) -> Any:
        """The SDK's private hook (`OpenAIResponsesCompactionSession` calls it for its native
        path): the newest `limit` items at least, whether they are the whole history, and a
        compare-and-set replacement of a suffix of them, a new branch from the item before it.
        With `prune_prefix` (the SDK's EncryptedSession: is an item expired), the replacement
        also leaves off the history's oldest items while they are expired, up to the suffix.
        Implemented for `SNAPSHOT_TESTED_VERSIONS` only: another version raises MemstoreError.
        None (the SDK's slower path) for a turn that is not one item."""
        snapshot_type = _snapshot_type()
        if limit <= 0:
            return None
        nodes, complete = await _history.arun(self.store, _snapshot_nodes(self.session_id, limit))
        items = [RESPONSES.to_items(node.turn) for node in nodes]
        if any(len(found) != 1 for found in items):
            return None
        head = nodes[-1].id if nodes else None

        async def replace_suffix(start: int, output: list[Any]) -> bool:
            if not 0 <= start < len(nodes):
                return False
            base = nodes[start - 1].id if start else nodes[0].parent
            turns = RESPONSES.to_turns(plain_items(output))
            if prune_prefix is None:
                replaced = _replaced(self.session_id, turns, head, base, now_ms())
            else:
                replaced = _pruned(self.session_id, turns, head, base, prune_prefix, now_ms())
            try:
                await _history.arun(self.store, replaced)
            except HeadMovedError:
                return False  # another writer appended since the snapshot: nothing written
            return True

        return snapshot_type([found[0] for found in items], complete, replace_suffix)

    async def _usage_aware_tokens(self) -> int:
        if isinstance(self.store, SessionStore):
            return await asyncio.to_thread(
                self.store.estimate_tokens, self.session_id, usage_aware=True
            )
        return await self.store.estimate_tokens(self.session_id, usage_aware=True)

    async def _compact(self, settings: SessionCompaction) -> CompactionResult:
        if isinstance(self.store, SessionStore):
            return await asyncio.to_thread(
                self.store.compact_session,
                self.session_id,
                settings.model,
                settings.invoker,
                settings.policy,
            )
        return await self.store.compact_session(
            self.session_id, settings.model, settings.invoker, settings.policy
        )


def _snapshot_type() -> Any:
    """The SDK's `_CompactionSnapshot`, if this is a version the hook was tested with."""
    version = getattr(agents, "__version__", "unknown")
    snapshot_type: Any = None
    try:
        from agents.memory.session import _CompactionSnapshot
    except ImportError:
        pass
    else:
        snapshot_type = _CompactionSnapshot
    fields = []
    if dataclasses.is_dataclass(snapshot_type):
        fields = [field.name for field in dataclasses.fields(snapshot_type)]
    if version not in SNAPSHOT_TESTED_VERSIONS or fields != ["items", "complete", "replace_suffix"]:
        raise MemstoreError(
            f"MemstoreSession's compaction snapshot implements a private hook of openai-agents "
            f"{', '.join(sorted(SNAPSHOT_TESTED_VERSIONS))}; this is openai-agents {version}, "
            "which may have changed it: install a tested version, or upgrade memstore"
        )
    return snapshot_type


def _snapshot_nodes(
    session_id: str, limit: int
) -> _history.History[tuple[list[SessionNode], bool]]:
    """The newest `limit` nodes at least (after the last clear), and whether they are all."""
    nodes: list[SessionNode] = yield "load_path_nodes", (session_id,), {"last": limit + 1}
    if not nodes or nodes[0].parent is None:
        return (nodes[1:] if nodes and _history.is_cleared(nodes[0].turn) else nodes), True
    return nodes, False


def _replaced(
    session_id: str, turns: list[Turn], head: str | None, base: str | None, clock_ms: int
) -> _history.History[None]:
    """`turns` chained from `base` (None: a new root), if the head is still `head`; no turns
    (a compaction that kept nothing of the suffix): the head moved back to `base` (None: a
    cleared history)."""
    if turns:
        yield "append_many", (session_id, turns), {"expected_head": head, "parent": base}
        return
    target = _history.cleared_root(clock_ms)
    if base is not None:
        found: list[SessionNode] = yield "load_path_nodes", (session_id, base), {"last": 1}
        target = found[-1]
    yield "append_node", (session_id, target), {"expected_head": head}


def _pruned(
    session_id: str,
    turns: list[Turn],
    head: str | None,
    base: str | None,
    expired: Callable[[Any], bool],
    clock_ms: int,
) -> _history.History[None]:
    """`_replaced`, the path's oldest items before `base` (inclusive) left off while they are
    `expired` (as the SDK's SQLiteSession deletes them): the kept ones and `turns` then start
    a new root, in the same compare-and-set on the head."""
    prefix: list[SessionNode] = []
    if base is not None:
        prefix = yield "load_path_nodes", (session_id, base), {}
        if prefix and _history.is_cleared(prefix[0].turn):
            prefix = prefix[1:]
    dropped = 0
    for node in prefix:
        items = RESPONSES.to_items(node.turn)
        if len(items) != 1 or not expired(items[0]):
            break
        dropped += 1
    if not dropped:
        yield from _replaced(session_id, turns, head, base, clock_ms)
        return
    kept = [node.turn for node in prefix[dropped:]]
    yield from _replaced(session_id, kept + turns, head, None, clock_ms)


@dataclass(frozen=True)
class _Seen:
    """The items on the path to `head`, as JSON text. A node id names its whole path (ids are
    content addresses), so while the head is the same, so are the items: `get_items` then
    reads only the head, and parses the items as the SDK's own SQLiteSession does."""

    head: str | None
    texts: tuple[str, ...]

    @classmethod
    def of(cls, head: str | None, items: Sequence[Any]) -> _Seen:
        return cls(head, tuple(jsjson.dumps(item) for item in items))

    def extended(self, head: str, items: Sequence[Any]) -> _Seen:
        return _Seen(head, self.texts + tuple(jsjson.dumps(item) for item in items))

    def items(self, limit: int | None) -> list[Any]:
        texts = self.texts if limit is None else self.texts[-limit:]
        return [jsjson.loads(text) for text in texts]


def plain_items(items: Sequence[Any]) -> list[dict[str, Any]]:
    """Items as JSON dicts (the SDK may hand over pydantic models).

    Raises:
        InvalidTurnError: an item is neither a mapping nor a pydantic model (named by its
            position), before anything is written.
    """
    plain = []
    for index, item in enumerate(items):
        if hasattr(item, "model_dump"):
            plain.append(item.model_dump(mode="json", exclude_unset=True))
        elif isinstance(item, Mapping):
            plain.append(dict(item))
        else:
            raise InvalidTurnError(
                f"items[{index}] is a {type(item).__name__}, not an item: a Responses input item"
                " is a mapping (or the SDK's pydantic model), such as"
                ' {"role": "user", "content": "hi"}'
            )
    return plain
