"""The Claude Agent SDK session store: the SDK's own conformance suite on both backends, sync
and async stores; entries searchable, deduplicated by uuid, and keyed onto readable sessions."""

from __future__ import annotations

from typing import Any

import pytest
from claude_agent_sdk.testing import run_session_store_conformance
from claude_agent_sdk.types import SessionKey

from memstore.integrations.claude_agent_sdk import MemstoreSessionStore, memstore_session_id
from tests.framework_stores import maybe, run_on_store


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_the_sdks_conformance_suite_passes(flavour: str, database_url: str) -> None:
    async def body(store: Any) -> None:
        async def make_store() -> MemstoreSessionStore:
            for session_id in await maybe(store.list_sessions()):  # each contract: empty
                await maybe(store.delete_session(session_id))
            return MemstoreSessionStore(store)

        await run_session_store_conformance(make_store)  # type: ignore[arg-type]

    run_on_store(flavour, database_url, body)


_KEY: SessionKey = {"project_key": "-home-ann~work/app", "session_id": "5f0c"}


def _entry(uuid: str, role: str, content: Any) -> Any:
    message = {"role": role, "content": content}
    return {"type": role, "uuid": uuid, "parentUuid": None, "message": message}


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_entries_are_deduplicated_searchable_and_in_readable_sessions(
    flavour: str, database_url: str
) -> None:
    call = [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]
    entries: list[Any] = [
        _entry("u1", "user", "list the zanzibar files"),
        _entry("u2", "assistant", call),
        {"type": "summary", "summary": "listing", "leafUuid": "u2"},
    ]

    async def body(store: Any) -> None:
        adapter = MemstoreSessionStore(store)
        await adapter.append(_KEY, entries)
        await adapter.append(_KEY, [entries[1], _entry("u3", "user", "thanks")])
        assert await adapter.load(_KEY) == [*entries, _entry("u3", "user", "thanks")]
        session_id = memstore_session_id(_KEY)
        assert session_id == "-home-ann%7Ework%2Fapp~5f0c"
        hits = await maybe(store.search("zanzibar"))
        assert [hit.session_id for hit in hits] == [session_id]
        rows = await maybe(store.read_only_query("SELECT tool_name FROM node_blocks"))
        assert ("Bash",) in [tuple(row) for row in rows.rows]
        info = await maybe(store.session_info(session_id))
        assert info.metadata["project_key"] == _KEY["project_key"]
        query = (
            "SELECT session_id, nodes, updated_at FROM session_stats JOIN session_sources "
            "USING (session_id) WHERE agent = 'claude-agent-sdk' ORDER BY updated_at DESC"
        )  # the docs' (docs/frameworks.md)
        rows = await maybe(store.read_only_query(query))
        assert [tuple(row)[:2] for row in rows.rows] == [(session_id, 4)]

    run_on_store(flavour, database_url, body)


def test_a_key_too_long_for_a_session_id_hashes_its_project() -> None:
    key: SessionKey = {"project_key": "p" * 300, "session_id": "s", "subpath": "subagents/a-1"}
    session_id = memstore_session_id(key)
    assert len(session_id) < 255
    assert session_id.endswith("~s~subagents%2Fa-1")
