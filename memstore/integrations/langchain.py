"""A LangChain `BaseChatMessageHistory` on a memstore store; needs the `langchain` extra.

```python
RunnableWithMessageHistory(
    chain, lambda session_id: MemstoreChatMessageHistory(session_id, store), ...
)
```

Each message is one turn (`memstore.convert.langchain`). `add_messages` appends its messages as
one chain in one transaction; `clear` deletes nothing: it starts a new root and the old history
stays in the session as another branch. A sync `SessionStore` answers both the sync and the
async methods (the async ones in a worker thread); an `AsyncSessionStore` only the async ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from memstore.errors import InvalidArgumentError, MissingExtraError

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import BaseMessage
except ImportError as exc:
    raise MissingExtraError(__name__, "langchain", exc) from exc

from memstore.convert.langchain import LANGCHAIN
from memstore.integrations import _history
from memstore.integrations._history import AnyStore, History, T
from memstore.store import SessionStore
from memstore.store.plans import now_ms
from memstore.types import validate_session_id

__all__ = ["MemstoreChatMessageHistory"]


class MemstoreChatMessageHistory(BaseChatMessageHistory):
    """The messages of one LangChain conversation, kept as the memstore session `session_id`."""

    def __init__(self, session_id: str, store: AnyStore) -> None:
        self.session_id = validate_session_id(session_id)
        self.store = store

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The conversation, oldest first."""
        return LANGCHAIN.turns_to_messages(self._run(_history.turns(self.session_id)))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append `messages` as one atomic batch."""
        turns = LANGCHAIN.messages_to_turns(messages)
        self._run(_history.add(self.session_id, turns))

    def clear(self) -> None:
        """Empty the conversation (the old one stays in the session as another branch)."""
        self._run(_history.clear(self.session_id, now_ms()))

    async def aget_messages(self) -> list[BaseMessage]:
        """The conversation, oldest first."""
        found = await _history.arun(self.store, _history.turns(self.session_id))
        return LANGCHAIN.turns_to_messages(found)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append `messages` as one atomic batch."""
        turns = LANGCHAIN.messages_to_turns(messages)
        await _history.arun(self.store, _history.add(self.session_id, turns))

    async def aclear(self) -> None:
        """Empty the conversation (the old one stays in the session as another branch)."""
        await _history.arun(self.store, _history.clear(self.session_id, now_ms()))

    def _run(self, history: History[T]) -> T:
        if not isinstance(self.store, SessionStore):
            raise InvalidArgumentError(
                "an AsyncSessionStore answers the async methods only (aget_messages, "
                "aadd_messages, aclear, ainvoke); give a SessionStore for the sync ones"
            )
        return _history.run(self.store, history)
