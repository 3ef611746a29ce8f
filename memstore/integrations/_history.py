"""A framework's linear history kept as a memstore session's current branch, written once for
sync and async stores: each operation is a generator of store calls (like the store's own plans),
driven by `run` on a SessionStore or by `arun` on either store.

Nothing is deleted: popping moves the head back to the parent (re-appending a stored node moves
the head to it), and clearing starts a new root, a `CLEARED` marker turn, so the cleared
conversation stays in the session as another branch.

`arun` runs on asyncio and on any other event loop anyio runs (trio): there a sync store works in
a worker thread, and an async store (asyncio's) on an asyncio loop of its own, in a thread.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from memstore.errors import HeadMovedError, StoreError
from memstore.hashing import hash_node
from memstore.store import SessionStore
from memstore.store.keyed import Revise
from memstore.types import SessionNode, Turn, TurnLike, parse_turn

if TYPE_CHECKING:
    from memstore.store.aio import AsyncSessionStore

__all__ = ["AnyStore", "History", "Revise", "arun", "on_store_loop", "run"]

AnyStore: TypeAlias = "SessionStore | AsyncSessionStore"
Call: TypeAlias = tuple[str, tuple[Any, ...], dict[str, Any]]
"""A store method's name, its positional and its keyword arguments."""
T = TypeVar("T")
History: TypeAlias = Generator[Call, Any, T]

CLEARED: dict[str, Any] = {"role": "user", "blocks": [], "memstore": {"cleared": True}}
"""The root turn that starts a session's history again after a clear."""


def is_cleared(turn: Turn) -> bool:
    """Whether `turn` is the marker of a cleared history."""
    return bool(turn.to_json().get("memstore") == CLEARED["memstore"])


def turns(session_id: str, limit: int | None = None) -> History[list[Turn]]:
    """The current branch's turns after the last clear; the newest `limit` of them with one."""
    if limit is not None and limit <= 0:
        return []
    last = None if limit is None else limit + 1  # one more: the marker may be among them
    nodes: list[SessionNode] = yield "load_path_nodes", (session_id,), {"last": last}
    found = [node.turn for node in nodes]
    if found and is_cleared(found[0]):
        found = found[1:]
    return found if limit is None else found[-limit:]


def add(session_id: str, new: Sequence[TurnLike]) -> History[list[SessionNode]]:
    """Append `new` at the head as one chain, in one transaction; the new nodes."""
    if not new:
        return []
    nodes: list[SessionNode] = yield "append_many", (session_id, list(new)), {}
    return nodes


def head(session_id: str) -> History[str | None]:
    """The session's head node id."""
    found: str | None = yield "head", (session_id,), {}
    return found


def pop(session_id: str, clock_ms: int) -> History[Turn | None]:
    """Move the head to the parent of the newest turn and return that turn (None if empty)."""
    while True:
        nodes: list[SessionNode] = yield "load_path_nodes", (session_id,), {"last": 2}
        if not nodes or is_cleared(nodes[-1].turn):
            return None
        top = nodes[-1]
        parent = nodes[-2] if len(nodes) > 1 else None
        target = parent if parent is not None else cleared_root(clock_ms)
        try:
            yield "append_node", (session_id, target), {"expected_head": top.id}
        except HeadMovedError:
            continue  # another writer moved the head: pop what is newest now
        return top.turn


def clear(session_id: str, clock_ms: int) -> History[None]:
    """Start the history again from a new root, keeping the old one as another branch."""
    while True:
        nodes: list[SessionNode] = yield "load_path_nodes", (session_id,), {"last": 1}
        if not nodes or is_cleared(nodes[-1].turn):
            return
        try:
            yield (
                "append_node",
                (session_id, cleared_root(clock_ms)),
                {"expected_head": nodes[-1].id},
            )
        except HeadMovedError:
            continue
        return


def cleared_root(clock_ms: int) -> SessionNode:
    """A new root node holding the `CLEARED` marker."""
    turn = parse_turn(CLEARED)
    return SessionNode(
        id=hash_node(None, turn, clock_ms), parent=None, turn=turn, created_at=clock_ms
    )


def run(store: SessionStore, history: History[T]) -> T:
    """Drive `history` on a sync store."""
    step = _send(history, None)
    while not isinstance(step, _Done):
        name, args, kwargs = step
        try:
            result = getattr(store, name)(*args, **kwargs)
        except StoreError as exc:  # thrown in: the history may handle it
            step = _throw(history, exc)
        else:
            step = _send(history, result)
    return step.value  # type: ignore[no-any-return]


async def arun(store: AnyStore, history: History[T]) -> T:
    """Drive `history` on an async store, or on a sync one in a worker thread; on asyncio or
    on another event loop of anyio's (trio)."""
    if isinstance(store, SessionStore):
        if _on_asyncio():
            return await asyncio.to_thread(run, store, history)
        import anyio.to_thread

        return await anyio.to_thread.run_sync(run, store, history)
    return await on_store_loop(store, lambda: _arun_async(store, history))


async def on_store_loop(store: AsyncSessionStore, make: Callable[[], Awaitable[T]]) -> T:
    """Await `make()` where the async `store` may run: here under asyncio; under another event
    loop (trio), on an asyncio loop that is the store's alone, in a thread of its own."""
    if _on_asyncio():
        return await make()
    import anyio.to_thread

    loop = _store_loop(store)

    async def made() -> T:
        return await make()

    def wait() -> T:
        return asyncio.run_coroutine_threadsafe(made(), loop).result()

    return await anyio.to_thread.run_sync(wait)


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


_STORE_LOOPS: weakref.WeakKeyDictionary[Any, asyncio.AbstractEventLoop] = (
    weakref.WeakKeyDictionary()
)
_STORE_LOOPS_LOCK = threading.Lock()


def _store_loop(store: AsyncSessionStore) -> asyncio.AbstractEventLoop:
    """The asyncio loop an async store runs on when called from outside asyncio (made once,
    running in a daemon thread; the store binds to it, see `EventLoopError`)."""
    with _STORE_LOOPS_LOCK:
        loop = _STORE_LOOPS.get(store)
        if loop is None:
            loop = asyncio.new_event_loop()
            name = "memstore-async-store-loop"
            threading.Thread(target=loop.run_forever, name=name, daemon=True).start()
            _STORE_LOOPS[store] = loop
        return loop


async def _arun_async(store: AsyncSessionStore, history: History[T]) -> T:
    step = _send(history, None)
    while not isinstance(step, _Done):
        name, args, kwargs = step
        try:
            result = await getattr(store, name)(*args, **kwargs)
        except StoreError as exc:  # thrown in: the history may handle it
            step = _throw(history, exc)
        else:
            step = _send(history, result)
    return step.value  # type: ignore[no-any-return]


class _Done:
    def __init__(self, value: Any) -> None:
        self.value = value


def _send(history: History[Any], result: Any) -> Call | _Done:
    try:
        return history.send(result)
    except StopIteration as stop:
        return _Done(stop.value)


def _throw(history: History[Any], exc: BaseException) -> Call | _Done:
    try:
        return history.throw(exc)
    except StopIteration as stop:
        return _Done(stop.value)
