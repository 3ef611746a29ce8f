# Copyright (c) 2025 Anthropic, PBC. Licensed under the MIT License: see LICENSE in this directory.
#
# Adopted by memstore from claude-agent-sdk 0.2.190, tests/test_session_store_anyio.py (the
# source distribution on PyPI, claude_agent_sdk-0.2.190.tar.gz), under the MIT License above: the
# tests of the transcript mirror's batcher, which appends to a session store, under asyncio and
# trio. Changed: their store, the tests' `_RecordingStore`, passes each append on to memstore's
# MemstoreSessionStore (the `store_class` fixture: conftest.py and swap.py here), where it recorded
# them only, so the batcher writes to memstore on each store and database under both event loops;
# it still records each append as the batcher makes it, before memstore's write, so the tests'
# short waits (50 ms) time the batcher, not the database; the tests with no store or with a store
# that fails on purpose are left out
# (EXCLUDED, with the reasons); formatted by ruff.
"""The Claude Agent SDK's own anyio tests of its transcript batcher, writing to
MemstoreSessionStore."""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest
from claude_agent_sdk._internal.transcript_mirror_batcher import (
    TranscriptMirrorBatcher,
)
from claude_agent_sdk.types import SessionKey, SessionStore, SessionStoreEntry

from memstore.integrations.claude_agent_sdk import MemstoreSessionStore

pytestmark = pytest.mark.anyio

EXCLUDED = {
    "test_with_timeout_times_out": "tests a helper of the SDK's session_resume module: no store",
    "test_rmtree_with_retry_under_cancelled_scope": (
        "tests a helper of the SDK's session_resume module: no store"
    ),
    "test_list_sessions_from_store_one_load_fails": (
        "its store fails one load on purpose (a test double): the test's meaning is the SDK's "
        "handling of that failure"
    ),
}
"""The tests of the SDK's file left out (not copied), with the reason."""


class _RecordingStore:
    def __init__(self, store: MemstoreSessionStore, delay: float = 0.0) -> None:
        self.calls: list[tuple[SessionKey, list[SessionStoreEntry]]] = []
        self._delay = delay
        self._store = store

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        if self._delay:
            await anyio.sleep(self._delay)
        self.calls.append((key, list(entries)))  # when the batcher calls, as the original
        await self._store.append(key, entries)


def _batcher(store: _RecordingStore, **kw: Any) -> TranscriptMirrorBatcher:
    async def _on_error(_key: SessionKey | None, _msg: str) -> None:
        return None

    return TranscriptMirrorBatcher(
        store=cast(SessionStore, store),
        projects_dir="/tmp/p",
        on_error=_on_error,
        **kw,
    )


def _entry(uid: str) -> SessionStoreEntry:
    return cast(SessionStoreEntry, {"uuid": uid, "type": "user"})


# ---------------------------------------------------------------------------
# TranscriptMirrorBatcher
# ---------------------------------------------------------------------------


async def test_batcher_eager_flush_via_spawn_detached(store_class: Any) -> None:
    store = _RecordingStore(store_class())
    b = _batcher(store, max_pending_entries=0)
    # Threshold 0 triggers the spawn_detached eager-flush path from a
    # sync call site — this is where the asyncio-under-trio crash lived.
    b.enqueue("/tmp/p/proj/sid.jsonl", [_entry("a")])
    await anyio.sleep(0.05)
    assert len(store.calls) == 1


async def test_batcher_eager_flush_preserves_order(store_class: Any) -> None:
    store = _RecordingStore(store_class(), delay=0.02)
    b = _batcher(store, max_pending_entries=0)
    b.enqueue("/tmp/p/proj/sid.jsonl", [_entry("a")])
    await anyio.sleep(0)
    b.enqueue("/tmp/p/proj/sid.jsonl", [_entry("b")])
    await anyio.sleep(0)
    b.enqueue("/tmp/p/proj/sid.jsonl", [_entry("c")])
    await b.flush()
    await anyio.sleep(0.1)
    seen = [e.get("uuid") for _k, entries in store.calls for e in entries]
    assert seen == ["a", "b", "c"]


async def test_batcher_timeout_reports_via_on_error(store_class: Any) -> None:
    store = _RecordingStore(store_class(), delay=10.0)
    errors: list[str] = []

    async def _on_error(_key: SessionKey | None, msg: str) -> None:
        errors.append(msg)

    b = TranscriptMirrorBatcher(
        store=cast(SessionStore, store),
        projects_dir="/tmp/p",
        on_error=_on_error,
        send_timeout=0.05,
    )
    b.enqueue("/tmp/p/proj/sid.jsonl", [_entry("a")])
    await b.flush()
    assert len(errors) == 1


async def test_batcher_close_flushes_under_cancelled_scope(store_class: Any) -> None:
    """``close()`` shields its final flush so the last batch reaches the
    store even when teardown runs under a cancelled scope.
    """
    store = _RecordingStore(store_class())
    b = _batcher(store)
    b.enqueue("/tmp/p/proj/sid.jsonl", [_entry("a")])
    with anyio.CancelScope() as scope:
        scope.cancel()
        await b.close()
    assert len(store.calls) == 1


# ---------------------------------------------------------------------------
# session_resume helpers
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# sessions.list_sessions_from_store
# ---------------------------------------------------------------------------
