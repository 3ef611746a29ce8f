"""KeyedAppends: the append that skips turns whose key the session holds (see `StoreBase`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from memstore.store.core import StoreCore
from memstore.store.operation import Program, operation
from memstore.store.plans.appends import UsagesLike
from memstore.store.plans.keyed import Revise, append_keyed
from memstore.types import SessionNode, TurnLike

__all__ = ["KeyedAppends", "Revise"]


class KeyedAppends(StoreCore):
    """Keyed appends, as an operation of both stores."""

    @operation
    def append_keyed(
        self,
        session_id: str,
        turns: Sequence[TurnLike],
        keys: Sequence[str | None],
        *,
        revise: Revise | None = None,
        usage: UsagesLike = None,
    ) -> Program[list[SessionNode]]:
        """Append at the head, in one transaction, the turns whose key the session does not
        hold, and keep their keys: a framework's entry ids (the Claude Agent SDK's `uuid`).

        The keys are looked up by index inside the writing transaction, whose first statement
        locks the session: an append costs the same in a session of 10,000 turns as in an empty
        one, and concurrent appends of the same keyed turns store each turn once.

        Args:
            session_id: the session (created if missing).
            turns: Turn models or wire dicts, oldest first.
            keys: one per turn: a string of 1 to 255 characters, or None (always appended);
                a key repeated in `turns` keeps its first turn.
            revise: called in the transaction with the session's metadata and the turns
                appended (not called when none was); it returns `update_session`'s `title`,
                `tags` or `metadata` to set, or None.
            usage: one per turn (`NodeUsage`, a mapping or None), stored for the turns
                appended, as `append_many` takes it.

        Returns:
            The nodes appended, oldest first ([] when every key was held).

        Raises:
            InvalidArgumentError: `keys` is not one per turn, or a key is no such string.
            InvalidTurnError: a turn breaks the contract; nothing was written.
        """
        redacted = cast(Sequence[TurnLike], self._redacted(turns))
        plan = append_keyed(self.backend, session_id, redacted, keys, revise, usage)
        return (yield from self._write(plan, f"appending to session {session_id!r}"))
