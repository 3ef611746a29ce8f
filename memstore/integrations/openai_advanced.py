"""The OpenAI Agents SDK's `AdvancedSQLiteSession` on a memstore store, SQLite or PostgreSQL,
sync or async; needs the `openai-agents` extra. Replacing the import is the migration:

```python
from memstore.integrations.openai_advanced import MemstoreAdvancedSession as AdvancedSQLiteSession

session = AdvancedSQLiteSession(session_id="user-42", db_path="conversations.db")
```

Each item is a turn; the branch `main` of session `s` is the memstore session `s` (what
`MemstoreSession` reads and writes), any other branch `b` the session `s@b`, forked from `s`'s
path before the turn it branches from. Turn numbers are derived from the path; nothing is
deleted (a deleted or cleared branch starts again from a `cleared` marker and keeps its name
reserved); a turn's usage is kept beside its first node: its tokens in `node_usage` (where
memstore's totals read them), the SDK's own fields in its branch session's metadata.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstore.errors import (
    BranchError,
    MissingExtraError,
)

try:
    from agents import _debug
    from agents.logger import log_model_action_error
    from agents.memory import SessionSettings
    from agents.memory.session_settings import resolve_session_limit
except ImportError as exc:
    raise MissingExtraError(__name__, "openai-agents", exc) from exc

from memstore.convert.responses import RESPONSES
from memstore.integrations import _advanced_turns as structure
from memstore.integrations import _history
from memstore.integrations._advanced_base import (
    MAIN,
    USAGE_KEY,
    AdvancedBase,
    bump_clears,
    clear_count,
    merge,
    node_usage,
    path_nodes,
    recorded_turn_usage,
    settled,
)
from memstore.integrations._history import AnyStore
from memstore.integrations.openai_agents import plain_items
from memstore.store.plans import now_ms
from memstore.types import validate_session_id

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["MAIN", "MemstoreAdvancedSession"]


class MemstoreAdvancedSession(AdvancedBase):
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
        nodes = await self._run(path_nodes(self._sid(branch), last))
        items = [item for node in nodes for item in RESPONSES.to_items(node.turn)]
        if limit is not None and limit > 0:
            items = items[-limit:]
        return items  # type: ignore[return-value]

    async def add_items(self, items: Sequence[TResponseInputItem]) -> None:
        """Append `items` to the current branch as one atomic batch."""
        self._check_open()
        if not items:
            return
        plain = plain_items(items)
        branch, generation = self._state

        async def add() -> None:
            target = await self._write_branch(branch, generation)
            turns = RESPONSES.to_turns(plain)
            await self._run(_history.add(self._sid(target), turns))

        await settled(self._ordered(add))

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

        return await settled(self._ordered(pop))

    async def clear_session(self) -> None:
        """Empty every branch and move to `main`; branch names stay reserved, and the old
        history stays in the store as other branches of the memstore sessions."""
        self._check_open()

        async def clear() -> None:
            sessions = [self.session_id] + [row[0] for row in await self._branch_sessions()]
            for sid in sessions:
                await self._run(_history.clear(sid, now_ms()))
                await self._run(merge(sid, {USAGE_KEY: None}))
            generation = await self._run(bump_clears(self.session_id))
            self._state = (MAIN, generation)

        await settled(self._ordered(clear))

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
            entries = structure.entries(await self._run(path_nodes(self._sid(source_branch), None)))
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
            clears = await self._run(clear_count(self.session_id))
            if clears == self._state[1]:
                self._state = (name, clears)
            return name, source_branch, entries[start].item.get("content", "")

        name, source_branch, content = await settled(self._ordered(create))
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
        nodes = await self._run(path_nodes(self._sid(branch_id), 1))
        if not nodes:
            raise BranchError(f"Branch '{branch_id}' does not exist")
        old = self._state[0]
        self._state = (branch_id, await self._run(clear_count(self.session_id)))
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
            if not await self._run(path_nodes(self._sid(branch_id), 1)):
                raise BranchError(f"Branch '{branch_id}' does not exist")
            await self.switch_to_branch(MAIN)

        async def delete() -> None:
            sid = self._sid(branch_id)
            if not await self._run(path_nodes(sid, 1)):
                raise BranchError(f"Branch '{branch_id}' does not exist")
            await self._run(_history.clear(sid, now_ms()))
            await self._run(merge(sid, {USAGE_KEY: None}))

        await settled(self._ordered(delete))
        self._logger.info("Deleted branch '%s'", branch_id)

    async def list_branches(self) -> list[dict[str, Any]]:
        """The session's branches that hold items, oldest first: `branch_id`,
        `message_count`, `user_turns`, `is_current` and `created_at` (UTC,
        `YYYY-MM-DD HH:MM:SS`)."""
        current = await self._read_branch(None)
        found: list[tuple[int, str, list[structure.Entry]]] = []
        for sid, name, made in [(self.session_id, MAIN, None), *await self._branch_sessions()]:
            entries = structure.entries(await self._run(path_nodes(sid, None)))
            if entries:  # main: since its first item; a branch: since it was made
                found.append((entries[0].node.created_at if made is None else made, name, entries))
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
        return structure.tool_usage(await self._branch_entries(branch_id))

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

            await settled(self._ordered(store))
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
        """Set a turn's usage on a branch, anchored to the turn's first node (the SDK's fields in
        the branch session's metadata, the tokens in `node_usage` beside that node, in one
        transaction); nothing for a branch without turns (None). The SDK's name of this step,
        which its tests replace."""
        if turn_anchor is None:
            self._logger.debug("Skipping usage store: no turn on branch %r", branch_id)
            return
        row = {**structure.usage_row(usage), "anchor": turn_anchor}
        await self._run(
            recorded_turn_usage(self._sid(branch_id), user_turn_number, row, node_usage(usage))
        )

    async def get_session_usage(self, branch_id: str | None = None) -> dict[str, int] | None:
        """The usage summed over the turns of one branch, or of all (None): `requests`,
        `input_tokens`, `output_tokens`, `total_tokens`, `total_turns`; None without any."""
        sessions = [(self.session_id, MAIN), *[row[:2] for row in await self._branch_sessions()]]
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
