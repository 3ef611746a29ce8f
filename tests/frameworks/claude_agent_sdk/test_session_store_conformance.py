# Copyright (c) 2025 Anthropic, PBC. Licensed under the MIT License: see LICENSE in this directory.
#
# Adopted by memstore from claude-agent-sdk 0.2.190, tests/test_session_store_conformance.py (the
# source distribution on PyPI, claude_agent_sdk-0.2.190.tar.gz), under the MIT License above.
# Changed: the reference class, InMemorySessionStore, is swapped for memstore's
# MemstoreSessionStore through the `store_class` fixture (conftest.py and swap.py here:
# SessionStore and AsyncSessionStore, SQLite and PostgreSQL, under asyncio and trio); the
# conformance harness gets it through `emptied` (swap.py), since the harness expects each store
# it makes to be empty and the swapped class shares the test's database; the tests of the
# in-memory store's own helpers, of the harness on stores of their own, and those with no store
# are left out (EXCLUDED, with the reasons); annotated for mypy and formatted by ruff.
"""The Claude Agent SDK's own session-store conformance tests, run against
MemstoreSessionStore."""

from __future__ import annotations

from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    SessionKey,
    SessionStore,
)
from claude_agent_sdk._internal.session_store_validation import (
    validate_session_store_options,
)
from claude_agent_sdk.testing import run_session_store_conformance

from tests.frameworks.claude_agent_sdk.swap import emptied

_KEY: SessionKey = {"project_key": "proj", "session_id": "sess"}


# ---------------------------------------------------------------------------
# InMemorySessionStore tests
# ---------------------------------------------------------------------------


_HELPERS = (
    "tests InMemorySessionStore's own helpers for tests (get_entries, size, clear), which are not "
    "part of the SessionStore protocol"
)
_OWN_STORE = (
    "tests the harness or the options on a minimal store of its own: no InMemorySessionStore"
)
_NO_STORE = "involves no store (the options without one)"
_PURE = "tests project_key_for_directory, a pure function of the SDK: no store"
EXCLUDED = {
    "TestInMemorySessionStore::test_skip_optional_suppresses_contracts": _OWN_STORE,
    "TestInMemorySessionStore::test_auto_skips_unimplemented_optionals": _OWN_STORE,
    "TestInMemorySessionStore::test_get_entries_helper": _HELPERS,
    "TestInMemorySessionStore::test_size_helper_counts_main_transcripts_only": _HELPERS,
    "TestInMemorySessionStore::test_clear_helper": _HELPERS,
    "TestSessionStoreOptionsValidation::test_no_store_is_always_valid": _NO_STORE,
    "TestSessionStoreOptionsValidation::test_continue_conversation_requires_list_sessions": (
        _OWN_STORE
    ),
    "TestSessionStoreOptionsValidation::test_continue_with_resume_and_store_lacking_list_sessions": (  # noqa: E501
        _OWN_STORE
    ),
    "TestProjectKeyForDirectory::test_defaults_to_cwd": _PURE,
    "TestProjectKeyForDirectory::test_sanitizes_path": _PURE,
    "TestProjectKeyForDirectory::test_stable_for_same_path": _PURE,
    "TestProjectKeyForDirectory::test_relative_dir_resolved_to_absolute_before_hashing": _PURE,
    "TestProjectKeyForDirectory::test_nfc_normalizes_decomposed_unicode": _PURE,
    "TestProjectKeyForDirectory::test_long_path_uses_portable_djb2_suffix": _PURE,
}
"""The tests of the SDK's file left out (not copied), with the reason."""


class TestInMemorySessionStore:
    @pytest.mark.anyio
    async def test_conformance(self, store_class: Any) -> None:
        await run_session_store_conformance(emptied(store_class))

    @pytest.mark.anyio
    async def test_conformance_with_async_factory(self, store_class: Any) -> None:
        async def make() -> SessionStore:
            return await emptied(store_class)()

        await run_session_store_conformance(make)

    def test_store_implements_is_canonical_probe(self, store_class: Any) -> None:
        """SessionStore is intentionally not @runtime_checkable; capability
        detection goes through _store_implements()."""
        from claude_agent_sdk._internal.session_store_validation import (
            _store_implements,
        )

        store = store_class()
        assert _store_implements(store, "append")
        assert _store_implements(store, "list_sessions")
        with pytest.raises(TypeError):
            isinstance(store, SessionStore)  # type: ignore[misc]

    @pytest.mark.anyio
    async def test_load_returns_copy(self, store_class: Any) -> None:
        store = store_class()
        await store.append(_KEY, [{"n": 1}])
        loaded = await store.load(_KEY)
        assert loaded is not None
        loaded.append({"n": 999})
        assert await store.load(_KEY) == [{"n": 1}]


# ---------------------------------------------------------------------------
# Options validation
# ---------------------------------------------------------------------------


class TestSessionStoreOptionsValidation:
    def test_valid_store_passes(self, store_class: Any) -> None:
        validate_session_store_options(ClaudeAgentOptions(session_store=store_class()))

    def test_continue_conversation_ok_when_store_implements_list_sessions(
        self, store_class: Any
    ) -> None:
        # InMemorySessionStore implements list_sessions — should pass.
        validate_session_store_options(
            ClaudeAgentOptions(session_store=store_class(), continue_conversation=True)
        )

    def test_rejects_file_checkpointing_combo(self, store_class: Any) -> None:
        with pytest.raises(ValueError, match="enable_file_checkpointing"):
            validate_session_store_options(
                ClaudeAgentOptions(
                    session_store=store_class(),
                    enable_file_checkpointing=True,
                )
            )
