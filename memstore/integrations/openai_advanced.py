"""The OpenAI Agents SDK's `AdvancedSQLiteSession` on a memstore store, on SQLite and PostgreSQL;
needs the `openai-agents` extra.

```python
from memstore.integrations.openai_advanced import MemstoreAdvancedSession as AdvancedSQLiteSession

session = AdvancedSQLiteSession(session_id="user-42", db_path="conversations.db")
session = AdvancedSQLiteSession(session_id="user-42", store=store)  # any memstore store
```

The same public methods with the same meaning: branches from any user turn
(`create_branch_from_turn`, `create_branch_from_content`, `switch_to_branch`, `list_branches`,
`delete_branch`), items per branch, usage per turn and per session (`store_run_usage`,
`get_turn_usage`, `get_session_usage`), tool usage, turns found by content, conversation turns.

How it maps onto memstore: each item is a turn; the branch `main` of the session `s` is the
memstore session `s` (what `MemstoreSession("s", store)` reads and writes), and every other
branch `b` is the memstore session `s@b`, forked from `s`'s path before the turn it branches
from (its nodes are the same content addresses). A turn number is derived from the path (the
count of user messages up to an item), so nothing beside the turns needs keeping in step.
Like `MemstoreSession`, nothing is deleted: `pop_item`, `delete_branch` and `clear_session` move
heads (a deleted or cleared branch starts again from a `cleared` marker), and a branch's
session keeps its name reserved, as the SDK's reservations do. A run's usage per turn is kept
in the metadata of the branch's session, anchored to the turn's first node, so a turn that is
popped, cleared or replaced no longer counts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import re
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memstore.errors import (
    BranchError,
    InvalidSessionIdError,
    MissingExtraError,
    SessionClosedError,
    SessionExistsError,
    UnknownSessionError,
)

try:
    from agents import _debug
    from agents.logger import log_model_action_error
    from agents.memory import SessionSettings
    from agents.memory.session_settings import coerce_session_settings, resolve_session_limit
except ImportError as exc:
    raise MissingExtraError(__name__, "openai-agents", exc) from exc

from memstore.convert.responses import RESPONSES
from memstore.integrations import _advanced_turns as structure
from memstore.integrations import _history
from memstore.integrations._history import AnyStore, History
from memstore.store import SessionStore
from memstore.store.plans import now_ms
from memstore.types import SessionNode, validate_session_id

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["MAIN", "MemstoreAdvancedSession"]

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


class MemstoreAdvancedSession:
    """An OpenAI Agents SDK session with branches and usage analytics, kept in a memstore store:
    a drop-in for `agents.extensions.memory.AdvancedSQLiteSession`."""

    def __init__(
        self,
        session_id: str,
        store: AnyStore | None = None,
        *,
        db_path: str | Path | None = None,
        create_tables: bool = False,
        logger: logging.Logger | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Open the session `session_id` on `store`, or on a store of its own at `db_path`.

        Args:
            session_id: the session (its `main` branch is the memstore session of that id).
            store: a SessionStore or AsyncSessionStore (the caller closes it).
            db_path: without `store`: a SQLite file, or a database URL (`postgresql://...`);
                `:memory:` (the default, as the SDK's) is a temporary file removed by `close`.
            create_tables: accepted for compatibility: memstore creates and migrates its
                tables itself.
            logger: where branch changes and swallowed usage errors are logged.
            session_settings: `{"limit": N}` or a `SessionSettings`, as every SDK session.
            **kwargs: the SDK's `SQLiteSession` options (`sessions_table`, `messages_table`),
                accepted and unused: memstore's tables are its own.

        Raises:
            InvalidSessionIdError: an unusable session id.
        """
        del create_tables, kwargs
        self.session_id = validate_session_id(session_id)
        self._logger = logger if logger is not None else logging.getLogger(__name__)
        self.session_settings = session_settings
        self._temporary: tempfile.TemporaryDirectory[str] | None = None
        self._owns_store = store is None
        if store is None:
            store = self._open_own_store(":memory:" if db_path is None else db_path)
        self.store: AnyStore = store
        self.db_path = db_path
        self._closed = False
        self._state: tuple[str, int] = (MAIN, 0)
        self._order_lock = threading.Lock()
        self._tail: concurrent.futures.Future[None] | None = None

    # --- settings, closing ---------------------------------------------------------------

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

    # --- items ---------------------------------------------------------------------------

    async def get_items(
        self, limit: int | None = None, branch_id: str | None = None
    ) -> list[TResponseInputItem]:
        """The latest `limit` items of a branch (default: the current one), oldest first;
        `limit` defaults to the settings' limit, else all."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit == 0:
            return []
        last = limit + 1 if limit is not None and limit > 0 else None
        branch = await self._read_branch(branch_id)
        nodes = await self._run(_path_nodes(self._sid(branch), last))
        items = [item for node in nodes for item in RESPONSES.to_items(node.turn)]
        if limit is not None and limit > 0:
            items = items[-limit:]
        return items  # type: ignore[return-value]

    async def add_items(self, items: Sequence[TResponseInputItem]) -> None:
        """Append `items` to the current branch as one atomic batch."""
        self._check_open()
        if not items:
            return
        plain = [_plain(item) for item in items]
        branch, generation = self._state

        async def add() -> None:
            target = await self._write_branch(branch, generation)
            turns = RESPONSES.to_turns(plain)
            await self._run(_history.add(self._sid(target), turns))

        await _settled(self._ordered(add))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item of the current branch and return it (None if empty); the
        turn's usage stops counting once its last item is popped."""
        self._check_open()
        branch, generation = self._state

        async def pop() -> TResponseInputItem | None:
            target = await self._write_branch(branch, generation)
            turn = await self._run(_history.pop(self._sid(target), now_ms()))
            if turn is None:
                return None
            items = RESPONSES.to_items(turn)
            return items[-1] if items else None  # type: ignore[return-value]

        return await _settled(self._ordered(pop))

    async def clear_session(self) -> None:
        """Empty every branch and move to `main`; branch names stay reserved, and the old
        history stays in the store as other branches of the memstore sessions."""
        self._check_open()

        async def clear() -> None:
            sessions = [self.session_id] + [sid for sid, _ in await self._branch_sessions()]
            for sid in sessions:
                await self._run(_history.clear(sid, now_ms()))
                await self._run(_merge(sid, {USAGE_KEY: None}))
            generation = await self._run(_bump_clears(self.session_id))
            self._state = (MAIN, generation)

        await _settled(self._ordered(clear))

    # --- branches ------------------------------------------------------------------------

    async def create_branch_from_turn(
        self, turn_number: int, branch_name: str | None = None
    ) -> str:
        """Branch from a user turn of the current branch and switch to the new branch: it holds
        the items before that turn (its user message included: the new branch asks anew).

        Args:
            turn_number: the user turn to branch from (`get_conversation_turns`' `turn`).
            branch_name: the new branch's name (default `branch_from_turn_<n>_<time>`); a name
                used before in this session, even by a deleted branch, is refused.

        Returns:
            The new branch's name.

        Raises:
            BranchError: the turn holds no user message, or the name is blank or used.
        """
        self._check_open()
        if branch_name is not None and not branch_name.strip():
            raise BranchError("Branch name cannot be empty")
        source, generation = self._state

        async def create() -> tuple[str, str, Any]:
            source_branch = await self._write_branch(source, generation)
            entries = structure.entries(
                await self._run(_path_nodes(self._sid(source_branch), None))
            )
            start = next(
                (
                    index
                    for index, entry in enumerate(entries)
                    if entry.user and entry.turn == turn_number
                ),
                None,
            )
            if start is None:
                raise BranchError(
                    f"Turn {turn_number} does not contain a user message "
                    f"in branch '{source_branch}'"
                )
            leaf = entries[start - 1].node.id if start else None
            name = await self._reserve(source_branch, leaf, branch_name, turn_number)
            clears = await self._run(_clears(self.session_id))
            if clears == self._state[1]:
                self._state = (name, clears)
            return name, source_branch, entries[start].item.get("content", "")

        name, source_branch, content = await _settled(self._ordered(create))
        if _debug.DONT_LOG_MODEL_DATA:
            self._logger.debug(
                "Created branch '%s' from turn %s in '%s'", name, turn_number, source_branch
            )
        else:
            self._logger.debug(
                "Created branch '%s' from turn %s ('%s') in '%s'",
                name,
                turn_number,
                structure.preview(content, 50),
                source_branch,
            )
        return name

    async def create_branch_from_content(
        self, search_term: str, branch_name: str | None = None
    ) -> str:
        """Branch from the first user turn of the current branch that contains `search_term`
        (as `find_turns_by_content`); see `create_branch_from_turn`.

        Raises:
            BranchError: no user turn contains it, or the name is blank or used.
        """
        if branch_name is not None and not branch_name.strip():
            raise BranchError("Branch name cannot be empty")
        matching = await self.find_turns_by_content(search_term)
        if not matching:
            raise BranchError(f"No user turns found containing '{search_term}'")
        return await self.create_branch_from_turn(matching[0]["turn"], branch_name)

    async def switch_to_branch(self, branch_id: str) -> None:
        """Make `branch_id` the current branch.

        Raises:
            BranchError: the branch has no items (it does not exist).
        """
        nodes = await self._run(_path_nodes(self._sid(branch_id), 1))
        if not nodes:
            raise BranchError(f"Branch '{branch_id}' does not exist")
        old = self._state[0]
        self._state = (branch_id, await self._run(_clears(self.session_id)))
        self._logger.info("Switched from branch '%s' to '%s'", old, branch_id)

    async def delete_branch(self, branch_id: str, force: bool = False) -> None:
        """Empty a branch; its name stays reserved and its turns stay in the store.

        Args:
            branch_id: the branch; not `main`.
            force: allow deleting the current branch (the session moves to `main` first).

        Raises:
            BranchError: the branch is blank, `main`, missing, or current without `force`.
        """
        if not branch_id or not branch_id.strip():
            raise BranchError("Branch ID cannot be empty")
        if branch_id == MAIN:
            raise BranchError("Cannot delete the 'main' branch")
        if branch_id == self._state[0]:
            if not force:
                raise BranchError(
                    f"Cannot delete current branch '{branch_id}'. "
                    "Use force=True or switch branches first"
                )
            if not await self._run(_path_nodes(self._sid(branch_id), 1)):
                raise BranchError(f"Branch '{branch_id}' does not exist")
            await self.switch_to_branch(MAIN)

        async def delete() -> None:
            sid = self._sid(branch_id)
            if not await self._run(_path_nodes(sid, 1)):
                raise BranchError(f"Branch '{branch_id}' does not exist")
            await self._run(_history.clear(sid, now_ms()))
            await self._run(_merge(sid, {USAGE_KEY: None}))

        await _settled(self._ordered(delete))
        self._logger.info("Deleted branch '%s'", branch_id)

    async def list_branches(self) -> list[dict[str, Any]]:
        """The session's branches that hold items, oldest first: `branch_id`,
        `message_count`, `user_turns`, `is_current` and `created_at` (UTC,
        `YYYY-MM-DD HH:MM:SS`)."""
        current = await self._read_branch(None)
        found: list[tuple[int, str, list[structure.Entry]]] = []
        for sid, name in [(self.session_id, MAIN), *await self._branch_sessions()]:
            entries = structure.entries(await self._run(_path_nodes(sid, None)))
            if entries:
                created = entries[0].node.created_at
                found.append((created, name, entries))
        found.sort(key=lambda row: (row[0], row[1] != MAIN))
        return [
            {
                "branch_id": name,
                "message_count": len(entries),
                "user_turns": sum(entry.user for entry in entries),
                "is_current": name == current,
                "created_at": structure.timestamp(created),
            }
            for created, name, entries in found
        ]

    # --- turns ---------------------------------------------------------------------------

    async def get_conversation_turns(self, branch_id: str | None = None) -> list[dict[str, Any]]:
        """The user turns of a branch (default: current): `turn`, `content` (a preview of 100
        characters), `full_content`, `timestamp` and `can_branch` (always True)."""
        entries = await self._branch_entries(branch_id)
        return [structure.turn_info(entry, 100) for entry in entries if entry.user]

    async def find_turns_by_content(
        self, search_term: str, branch_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The user turns of a branch (default: current) whose text contains `search_term`
        (ASCII letters in any case, as SQLite's LIKE), as `get_conversation_turns` gives them
        but with the whole content as the preview."""
        pattern = re.compile(re.escape(search_term), re.IGNORECASE | re.ASCII)
        matches = []
        for entry in await self._branch_entries(branch_id):
            if entry.user:
                texts = structure.texts(entry.item.get("content", ""))
                if texts is not None and any(pattern.search(text) for text in texts):
                    matches.append(structure.turn_info(entry, None))
        return matches

    async def get_conversation_by_turns(
        self, branch_id: str | None = None
    ) -> dict[int, list[dict[str, str | None]]]:
        """A branch's items (default: current) by turn: each item's `type` and `tool_name`."""
        turns: dict[int, list[dict[str, str | None]]] = {}
        for entry in await self._branch_entries(branch_id):
            turns.setdefault(entry.turn, []).append({"type": entry.kind, "tool_name": entry.tool})
        return turns

    async def get_tool_usage(self, branch_id: str | None = None) -> list[tuple[str, int, int]]:
        """How often each tool was called in each turn of a branch (default: current), as
        `(tool_name, count, turn)`, by turn (a tool search's output counts when its call is not
        in the turn)."""
        entries = await self._branch_entries(branch_id)
        searched = {
            (entry.turn, entry.tool) for entry in entries if entry.kind == "tool_search_call"
        }
        counts: dict[tuple[int, Any], int] = {}
        for entry in entries:
            if entry.kind in structure.TOOL_CALLS or (
                entry.kind == "tool_search_output" and (entry.turn, entry.tool) not in searched
            ):
                key = (entry.turn, entry.tool)
                counts[key] = counts.get(key, 0) + 1
        ordered = sorted(counts.items(), key=lambda pair: (pair[0][0], str(pair[0][1])))
        return [(tool, count, turn) for (turn, tool), count in ordered]

    # --- usage ---------------------------------------------------------------------------

    async def store_run_usage(self, result: Any) -> None:
        """Keep a run's usage (`result.context_wrapper.usage`) as the current turn's of the
        current branch, replacing what it had; after `Runner.run`. Errors are logged (under
        the SDK's policy for model data), not raised, as the SDK's session does."""
        try:
            usage = result.context_wrapper.usage
            if usage is None:
                return
            branch, generation = self._state

            async def store() -> None:
                target = await self._write_branch(branch, generation)
                if self._state[1] != generation:
                    return  # a clear since the call: the turn is gone
                entries = await self._branch_entries(target)
                turn = entries[-1].turn if entries else 0
                anchor = next((entry.node.id for entry in entries if entry.turn == turn), None)
                await self._update_turn_usage_internal(
                    turn, usage, branch_id=target, turn_anchor=anchor
                )

            await _settled(self._ordered(store))
        except Exception as exc:
            session_id = self.session_id
            log_model_action_error(
                self._logger,
                "Failed to store session usage",
                exc,
                diagnostic_extra=lambda: {"session_id": session_id},
            )

    async def _update_turn_usage_internal(
        self, user_turn_number: int, usage: Any, *, branch_id: str, turn_anchor: str | None
    ) -> None:
        """Set a turn's usage on a branch, anchored to the turn's first node; nothing for a
        branch without turns (None). The SDK's name of this step, which its tests replace."""
        if turn_anchor is None:
            self._logger.debug("Skipping usage store: no turn on branch %r", branch_id)
            return
        row = {**structure.usage_row(usage), "anchor": turn_anchor}
        await self._run(_merge(self._sid(branch_id), {USAGE_KEY: {str(user_turn_number): row}}))

    async def get_session_usage(self, branch_id: str | None = None) -> dict[str, int] | None:
        """The usage summed over the turns of one branch, or of all (None): `requests`,
        `input_tokens`, `output_tokens`, `total_tokens`, `total_turns`; None without any."""
        sessions = [(self.session_id, MAIN), *await self._branch_sessions()]
        if branch_id:
            sessions = [(self._sid(branch_id), branch_id)]
        rows: list[dict[str, Any]] = []
        for sid, _name in sessions:
            rows.extend((await self._turn_usage(sid)).values())
        if not rows:
            return None
        totals = {
            name: sum(int(row.get(name) or 0) for row in rows)
            for name in ("requests", "input_tokens", "output_tokens", "total_tokens")
        }
        return {**totals, "total_turns": len(rows)}

    async def get_turn_usage(
        self, user_turn_number: int | None = None, branch_id: str | None = None
    ) -> list[dict[str, Any]] | dict[str, Any]:
        """The usage of one turn of a branch (default: current) as a dict ({} if none), or of
        every turn as a list (with `user_turn_number`): `requests`, `input_tokens`,
        `output_tokens`, `total_tokens`, `input_tokens_details`, `output_tokens_details`."""
        branch = await self._read_branch(branch_id)
        usage = await self._turn_usage(self._sid(branch))
        if user_turn_number is not None:
            row = usage.get(user_turn_number)
            return {} if row is None else structure.usage_view(row)
        return [
            {"user_turn_number": turn, **structure.usage_view(usage[turn])}
            for turn in sorted(usage)
        ]

    # --- helpers -------------------------------------------------------------------------

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
        clears = await self._run(_clears(self.session_id))
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
        return structure.entries(await self._run(_path_nodes(self._sid(branch), None)))

    async def _branch_sessions(self) -> list[tuple[str, str]]:
        """The memstore sessions of the branches other than `main`, with their names."""
        infos = await self._run(_listed(self.session_id))
        return [(info.id, str(info.metadata[BRANCH_KEY])) for info in infos]

    async def _turn_usage(self, sid: str) -> dict[int, dict[str, Any]]:
        """The usage of the turns still on the branch (anchored to their first node)."""
        metadata = await self._run(_metadata(sid))
        stored = (metadata or {}).get(USAGE_KEY)
        if not stored:
            return {}
        first: dict[int, str] = {}
        for entry in structure.entries(await self._run(_path_nodes(sid, None))):
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
            if name == MAIN or not await self._run(_created(self, source, leaf, name)):
                raise BranchError(
                    f"Branch ID '{name}' has already been used. Choose a new branch ID."
                )
            return name
        base = f"branch_from_turn_{turn_number}_{int(time.time())}"
        candidate, suffix = base, 1
        while not await self._run(_created(self, source, leaf, candidate)):
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


def _path_nodes(sid: str, last: int | None) -> History[list[SessionNode]]:
    """The nodes of a branch's items (the newest `last` at least), after its last clear."""
    nodes: list[SessionNode] = yield "load_path_nodes", (sid,), {"last": last}
    if nodes and _history.is_cleared(nodes[0].turn):
        nodes = nodes[1:]
    return nodes


def _metadata(sid: str) -> History[Mapping[str, Any] | None]:
    """A session's metadata; None if there is no such session."""
    found: dict[str, Any] = yield "session_metadata", ([sid],), {}
    stored = found.get(sid)
    return None if stored is None else stored.metadata


def _listed(session_id: str) -> History[list[Any]]:
    infos: list[Any] = yield "sessions", (), {"metadata": {SESSION_KEY: session_id}, "order": "id"}
    return [info for info in infos if isinstance(info.metadata.get(BRANCH_KEY), str)]


def _clears(session_id: str) -> History[int]:
    metadata = yield from _metadata(session_id)
    return int((metadata or {}).get(CLEARS_KEY) or 0)


def _merge(sid: str, values: Mapping[str, Any], *, exists: bool | None = True) -> History[None]:
    """Merge `values` into a session's metadata in one transaction (a mapping into the object
    at its key, anything else replacing it); with `exists`, only into a session that exists."""
    try:
        yield "append_merging_metadata", (sid, [], {sid: dict(values)}), {"exists": exists}
    except UnknownSessionError:
        return


def _bump_clears(session_id: str) -> History[int]:
    clears = (yield from _clears(session_id)) + 1
    yield from _merge(session_id, {CLEARS_KEY: clears}, exists=None)
    return clears


def _created(
    session: MemstoreAdvancedSession, source: str, leaf: str | None, name: str
) -> History[bool]:
    """Create the branch `name`'s session from the source's path to `leaf` (None: empty);
    False if its session exists (the name was used)."""
    sid = session._sid(name)
    names = {SESSION_KEY: session.session_id, BRANCH_KEY: name}
    try:
        if leaf is None:
            call = (sid, [_history.CLEARED], {sid: names})
            yield "append_merging_metadata", call, {"exists": False}
            return True
        yield "fork_session", (session._sid(source), leaf, sid), {}
    except SessionExistsError:
        return False
    yield from _merge(sid, names)
    return True


def _plain(item: Any) -> dict[str, Any]:
    """An item as a JSON dict (the SDK may hand over pydantic models)."""
    if hasattr(item, "model_dump"):
        return item.model_dump(mode="json", exclude_unset=True)  # type: ignore[no-any-return]
    return dict(item)


async def _settled(awaitable: Awaitable[T]) -> T:
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
