"""The state and store calls of `MemstoreAdvancedSession` (openai_advanced.py): its branch
pointer, the memstore session of each branch, the ordering of its operations, and the store
calls it makes, written once for sync and async stores (generators, as `_history`'s)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar

from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings

from memstore.errors import (
    BranchError,
    InvalidArgumentError,
    InvalidSessionIdError,
    SessionClosedError,
    SessionExistsError,
    UnknownSessionError,
)
from memstore.integrations import _advanced_turns as structure
from memstore.integrations import _history
from memstore.integrations._history import AnyStore, History
from memstore.store import SessionStore
from memstore.types import SessionNode, validate_session_id
from memstore.usage import NodeUsage, from_openai_agents

T = TypeVar("T")

MAIN = "main"
"""The branch every session starts on; its memstore session is the session id itself."""

SESSION_KEY = "openai_agents_session"
"""Metadata of a branch's memstore session: the session it is a branch of."""
BRANCH_KEY = "openai_agents_branch"
"""Metadata of a branch's memstore session: the branch's name."""
USAGE_KEY = "openai_agents_turn_usage"
"""Metadata of a branch's memstore session: the runs' usage by turn number."""
CLEARS_KEY = "openai_agents_clears"
"""Metadata of the main session: how many times `clear_session` ran (other instances on a
branch move back to `main` when it changes)."""


class AdvancedBase:
    """What `MemstoreAdvancedSession`'s methods share: the store, the branch pointer (the
    current branch, and the count of clears it was set under), and their helpers."""

    session_id: str
    store: AnyStore
    _logger: Any
    _owns_store: bool
    _temporary: tempfile.TemporaryDirectory[str] | None
    _closed: bool
    _state: tuple[str, int]
    _order_lock: threading.Lock
    _tail: concurrent.futures.Future[None] | None

    @property
    def session_settings(self) -> SessionSettings:
        """The settings (`{"limit": 2}` or a `SessionSettings`; None: the defaults)."""
        return self._settings

    @session_settings.setter
    def session_settings(self, value: SessionSettings | dict[str, Any] | None) -> None:
        self._settings = SessionSettings() if value is None else coerce_session_settings(value)

    @property
    def current_branch_id(self) -> str:
        """The branch `get_items`, `add_items` and the other calls without `branch_id` use."""
        return self._state[0]

    @property
    def _current_branch_id(self) -> str:
        """The SDK's private name of `current_branch_id` (its own tests read it)."""
        return self._state[0]

    def _open_own_store(self, db_path: str | Path) -> AnyStore:
        text = str(db_path)
        if "://" in text:
            return SessionStore(text)
        if text == ":memory:":
            self._temporary = tempfile.TemporaryDirectory(prefix="memstore-advanced-")
            text = str(Path(self._temporary.name) / "session.db")
        return SessionStore(f"sqlite:///{text}")

    def close(self) -> None:
        """Close the session; a store it opened itself (from `db_path`) is closed too."""
        self._closed = True
        if self._owns_store and isinstance(self.store, SessionStore):
            self.store.close()
        if self._temporary is not None:
            self._temporary.cleanup()
            self._temporary = None

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(
                f"this AdvancedSQLiteSession is closed (MemstoreAdvancedSession "
                f"{self.session_id!r}): open a new one"
            )

    def _sid(self, branch: str) -> str:
        """The memstore session of a branch: the session itself for `main`, else `s@branch`
        (a branch name no session id can hold is replaced by its hash)."""
        if branch == MAIN:
            return self.session_id
        try:
            return validate_session_id(f"{self.session_id}@{branch}")
        except InvalidSessionIdError:
            digest = hashlib.sha256(branch.encode("utf-8", "surrogatepass")).hexdigest()[:32]
            return validate_session_id(f"{self.session_id[:200]}@#{digest}")

    async def _run(self, history: History[T]) -> T:
        return await _history.arun(self.store, history)

    async def _clears_changed(self, generation: int) -> tuple[bool, int]:
        clears = await self._run(clear_count(self.session_id))
        return clears != generation, clears

    async def _write_branch(self, branch: str, generation: int) -> str:
        """The branch a write captured at `branch` goes to: `main` if the session was cleared
        since (by this instance or another)."""
        if branch == MAIN and self._state[0] == MAIN:
            return MAIN
        changed, clears = await self._clears_changed(self._state[1])
        if changed:
            self._state = (MAIN, clears)
        if self._state[1] != generation:
            return self._state[0]
        return branch

    async def _read_branch(self, branch_id: str | None) -> str:
        if branch_id is not None:
            return branch_id
        branch, generation = self._state
        if branch == MAIN:
            return MAIN
        changed, clears = await self._clears_changed(generation)
        if changed:
            self._state = (MAIN, clears)
            return MAIN
        return branch

    async def _branch_entries(self, branch_id: str | None) -> list[structure.Entry]:
        branch = await self._read_branch(branch_id)
        return structure.entries(await self._run(path_nodes(self._sid(branch), None)))

    async def _branch_sessions(self) -> list[tuple[str, str, int]]:
        """The memstore sessions of the branches other than `main`, with their names and
        creation times (epoch ms: when the branch was made)."""
        infos = await self._run(listed(self.session_id))
        return [(info.id, str(info.metadata[BRANCH_KEY]), info.created_at) for info in infos]

    async def _turn_usage(self, sid: str) -> dict[int, dict[str, Any]]:
        """The usage of the turns still on the branch (anchored to their first node)."""
        metadata = await self._run(metadata_of(sid))
        stored = (metadata or {}).get(USAGE_KEY)
        if not stored:
            return {}
        first: dict[int, str] = {}
        for entry in structure.entries(await self._run(path_nodes(sid, None))):
            first.setdefault(entry.turn, entry.node.id)
        return {
            int(turn): row
            for turn, row in stored.items()
            if first.get(int(turn)) == row.get("anchor")
        }

    async def _reserve(
        self, source: str, leaf: str | None, name: str | None, turn_number: int
    ) -> str:
        """Create the new branch's session (a fork of the source's path to `leaf`), which
        reserves its name; the name."""
        if name is not None:
            if name == MAIN or not await self._run(created(self, source, leaf, name)):
                raise BranchError(
                    f"Branch ID '{name}' has already been used. Choose a new branch ID."
                )
            return name
        base = f"branch_from_turn_{turn_number}_{int(time.time())}"
        candidate, suffix = base, 1
        while not await self._run(created(self, source, leaf, candidate)):
            suffix += 1
            candidate = f"{base}_{suffix}"
        return candidate

    def _ordered(self, make: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        """Run `make()` after the operations this instance was asked for before it: the
        order is taken now, before the caller first awaits (as the SDK's session does)."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self._order_lock:
            before, self._tail = self._tail, done

        async def run() -> T:
            try:
                if before is not None:
                    await asyncio.wrap_future(before)
                return await make()
            finally:
                done.set_result(None)
                with self._order_lock:
                    if self._tail is done:
                        self._tail = None

        return run()


# --- the store calls (generators of store calls, as `_history`'s) ----------------------------


def path_nodes(sid: str, last: int | None) -> History[list[SessionNode]]:
    """The nodes of a branch's items (the newest `last` at least), after its last clear."""
    nodes: list[SessionNode] = yield "load_path_nodes", (sid,), {"last": last}
    if nodes and _history.is_cleared(nodes[0].turn):
        nodes = nodes[1:]
    return nodes


def metadata_of(sid: str) -> History[Mapping[str, Any] | None]:
    """A session's metadata; None if there is no such session."""
    found: dict[str, Any] = yield "session_metadata", ([sid],), {}
    stored = found.get(sid)
    return None if stored is None else stored.metadata


def listed(session_id: str) -> History[list[Any]]:
    infos: list[Any] = yield "sessions", (), {"metadata": {SESSION_KEY: session_id}, "order": "id"}
    return [info for info in infos if isinstance(info.metadata.get(BRANCH_KEY), str)]


def clear_count(session_id: str) -> History[int]:
    metadata = yield from metadata_of(session_id)
    return int((metadata or {}).get(CLEARS_KEY) or 0)


def merge(sid: str, values: Mapping[str, Any], *, exists: bool | None = True) -> History[None]:
    """Merge `values` into a session's metadata in one transaction (a mapping into the object
    at its key, anything else replacing it); with `exists`, only into a session that exists."""
    try:
        yield "append_merging_metadata", (sid, [], {sid: dict(values)}), {"exists": exists}
    except UnknownSessionError:
        return


def recorded_turn_usage(
    sid: str, turn: int, row: Mapping[str, Any], usage: NodeUsage | None
) -> History[None]:
    """Keep a turn's usage in its branch session: the SDK's row in the metadata, and its tokens
    (`usage`) in `node_usage` beside the turn's first node (the row's `anchor`), together."""
    merges = {sid: {USAGE_KEY: {str(turn): dict(row)}}}
    recorded = {} if usage is None else {str(row["anchor"]): usage}
    try:
        yield "append_merging_metadata", (sid, [], merges), {"exists": True, "usage": recorded}
    except UnknownSessionError:
        return


def node_usage(usage: Any) -> NodeUsage | None:
    """The SDK's `Usage` as memstore's `NodeUsage` (cached input as cache reads); None if it
    has no whole token counts (the SDK's row still keeps what it has)."""
    try:
        return from_openai_agents(usage)
    except InvalidArgumentError:
        return None


def bump_clears(session_id: str) -> History[int]:
    clears = (yield from clear_count(session_id)) + 1
    yield from merge(session_id, {CLEARS_KEY: clears}, exists=None)
    return clears


def created(session: AdvancedBase, source: str, leaf: str | None, name: str) -> History[bool]:
    """Create the branch `name`'s session from the source's path to `leaf` (None: empty), named
    as a branch of the session in the same transaction; False if its session exists (the name
    was used)."""
    sid = session._sid(name)
    names = {SESSION_KEY: session.session_id, BRANCH_KEY: name}
    try:
        if leaf is None:
            call = (sid, [_history.CLEARED], {sid: names})
            yield "append_merging_metadata", call, {"exists": False}
        else:
            yield "fork_session", (session._sid(source), leaf, sid), {"metadata": names}
    except SessionExistsError:
        return False
    return True


async def settled(awaitable: Awaitable[T]) -> T:
    """Await a mutation that, once started, finishes even if the caller is cancelled (the
    cancellation is raised after it, so its outcome is known)."""
    task = asyncio.ensure_future(awaitable)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with suppress(asyncio.CancelledError):
                await asyncio.wait({task})
        raise
