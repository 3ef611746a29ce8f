"""The Claude Agent SDK session store: the SDK's own conformance suite on both backends, sync
and async stores; entries searchable, deduplicated by uuid, and keyed onto readable sessions."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from claude_agent_sdk import (
    list_sessions_from_store,
    project_key_for_directory,
    rename_session_via_store,
    tag_session_via_store,
)
from claude_agent_sdk.testing import run_session_store_conformance
from claude_agent_sdk.testing.session_store_conformance import _has_optional
from claude_agent_sdk.types import SessionKey
from typer.testing import CliRunner

from memstore import SessionStore
from memstore.cli import app
from memstore.integrations.claude_agent_sdk import MemstoreSessionStore, memstore_session_id
from tests.framework_stores import maybe, run_on_store


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_the_sdks_conformance_suite_passes_all_14_contracts(
    flavour: str, backend: str, database_url: str
) -> None:
    async def body(store: Any) -> None:
        async def make_store() -> MemstoreSessionStore:
            for session_id in await maybe(store.list_sessions(), store):  # each contract: empty
                await maybe(store.delete_session(session_id), store)
            return MemstoreSessionStore(store)

        probe = await make_store()
        for optional in ("list_sessions", "list_session_summaries", "delete", "list_subkeys"):
            assert _has_optional(probe, optional, frozenset()), optional  # none is skipped
        await run_session_store_conformance(make_store)

    run_on_store(flavour, database_url, body, backend)


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


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_four_concurrent_appends_of_the_same_five_entries_store_five(
    flavour: str, database_url: str
) -> None:
    """The uuid check runs inside the writing transaction: before, each append read the stored
    entries first, outside it, and four racing appends of the same 5 entries stored 20."""
    entries = [_entry(f"u{n}", "user", f"message {n}") for n in range(5)]

    async def body(store: Any) -> None:
        adapters = [MemstoreSessionStore(store) for _ in range(4)]
        await asyncio.gather(*(adapter.append(_KEY, entries) for adapter in adapters))
        assert await adapters[0].load(_KEY) == entries
        assert len(await maybe(store.load_path(memstore_session_id(_KEY)))) == 5

    run_on_store(flavour, database_url, body)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_transcripts_written_in_one_millisecond_list_newest_first(
    flavour: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK orders transcripts by their write time alone, and its in-memory store promises
    that back-to-back appends never tie; a session's `updated_at` (in ms) did, and the SDK's
    paging test then failed now and then."""
    import memstore.integrations.claude_agent_sdk as adapter_module
    import memstore.store.plans.contract as contract

    frozen = SimpleNamespace(time=lambda: 1_700_000_000.0, time_ns=lambda: 1_700_000_000 * 10**9)
    monkeypatch.setattr(contract, "time", frozen)
    monkeypatch.setattr(adapter_module, "time", frozen)
    keys = [{"project_key": "p", "session_id": f"s{n}"} for n in range(6)]

    async def body(store: Any) -> None:
        adapter = MemstoreSessionStore(store)
        for n, key in enumerate(keys):
            await adapter.append(cast("SessionKey", key), [_entry(f"u{n}", "user", "hi")])
        listed = await adapter.list_sessions("p")
        summaries = await adapter.list_session_summaries("p")
        newest_first = sorted(listed, key=lambda entry: entry["mtime"], reverse=True)
        assert [entry["session_id"] for entry in newest_first] == [f"s{n}" for n in range(6)][::-1]
        assert {s["session_id"]: s["mtime"] for s in summaries} == {
            entry["session_id"]: entry["mtime"] for entry in listed
        }

    run_on_store(flavour, database_url, body)


def test_concurrent_appends_from_threads_store_each_entry_once(database_url: str) -> None:
    entries = [_entry(f"u{n}", "user", f"message {n}") for n in range(5)]
    with SessionStore(database_url) as store:
        adapter = MemstoreSessionStore(store)
        start = threading.Barrier(4)

        def append() -> None:
            start.wait(timeout=30)
            asyncio.run(adapter.append(_KEY, entries))

        threads = [threading.Thread(target=append) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert asyncio.run(adapter.load(_KEY)) == entries


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_titles_and_tags_set_through_the_sdk_reach_memstores_sessions(
    flavour: str, backend: str, database_url: str
) -> None:
    directory = "/home/ann/app"
    session = "0b6f5e2c-3c1d-4a8e-9a43-6d5f0c2e1a7b"
    key: SessionKey = {"project_key": project_key_for_directory(directory), "session_id": session}

    async def body(store: Any) -> None:
        adapter = MemstoreSessionStore(store)
        first: Any = {
            **_entry("u1", "user", "fix the flaky build"),
            "timestamp": "2026-01-01T00:00:00Z",
        }
        await adapter.append(key, [first])
        await rename_session_via_store(adapter, session, "Flaky build", directory=directory)
        await tag_session_via_store(adapter, session, "ci", directory=directory)
        info = await maybe(store.session_info(memstore_session_id(key)), store)
        assert (info.title, info.tags) == ("Flaky build", ("ci",))
        (listed,) = await list_sessions_from_store(adapter, directory=directory)
        assert (listed.session_id, listed.custom_title, listed.tag) == (
            session,
            "Flaky build",
            "ci",
        )
        assert listed.first_prompt == "fix the flaky build"
        (summary,) = await adapter.list_session_summaries(key["project_key"])
        (entry,) = await adapter.list_sessions(key["project_key"])
        assert summary["mtime"] == entry["mtime"] >= info.updated_at  # the clock list_sessions has
        await tag_session_via_store(adapter, session, None, directory=directory)  # clears it
        await maybe(store.update_session(memstore_session_id(key), tags=["mine"]), store)
        await adapter.append(key, [_entry("u2", "user", "and the docs")])  # no tag change
        info = await maybe(store.session_info(memstore_session_id(key)), store)
        assert (info.title, info.tags) == ("Flaky build", ("mine",))

    run_on_store(flavour, database_url, body, backend)


def test_memstore_sessions_shows_the_title_set_through_the_sdk(sqlite_url: str) -> None:
    session = "0b6f5e2c-3c1d-4a8e-9a43-6d5f0c2e1a7b"
    with SessionStore(sqlite_url) as store:
        adapter = MemstoreSessionStore(store)
        key: SessionKey = {"project_key": project_key_for_directory("/w"), "session_id": session}
        asyncio.run(adapter.append(key, [_entry("u1", "user", "hello")]))
        asyncio.run(rename_session_via_store(adapter, session, "Release notes", directory="/w"))
    result = CliRunner().invoke(app, ["--db", sqlite_url, "sessions", "--json"])
    assert result.exit_code == 0, result.output
    (listed,) = json.loads(result.stdout)
    assert listed["title"] == "Release notes"


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_transcript_exported_and_imported_again_still_deduplicates_by_uuid(
    flavour: str, database_url: str, tmp_path: Path
) -> None:
    """The entries' uuids (the nodes' keys) travel in the JSONL export: a transcript imported
    again takes only the entries it does not hold."""
    entries = [_entry(f"u{n}", "user", f"message {n}") for n in range(3)]
    later = _entry("u3", "user", "message 3")

    async def body(store: Any) -> None:
        adapter = MemstoreSessionStore(store)
        await adapter.append(_KEY, entries)
        session_id = memstore_session_id(_KEY)
        exported = tmp_path / "transcript.jsonl"
        await maybe(store.export_jsonl(session_id, exported))
        assert await maybe(store.delete_session(session_id))
        await maybe(store.import_jsonl(exported, session_id=session_id))
        await adapter.append(_KEY, [*entries, later])
        assert await adapter.load(_KEY) == [*entries, later]

    run_on_store(flavour, database_url, body)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_project_key_can_name_a_tenant(flavour: str, database_url: str) -> None:
    """Two customers' projects with the same session id and entries: each in its own tenant,
    neither seen through the other's project, and nothing in the store's own tenant."""
    tenants = {"acme/app": "acme", "globex/app": "globex"}

    async def body(store: Any) -> None:
        sdk = MemstoreSessionStore(store, tenant_of=tenants.__getitem__)
        for project in tenants:
            key: SessionKey = {"project_key": project, "session_id": "5f0c"}
            await sdk.append(key, [_entry("u1", "user", f"hello from {project}")])
        await sdk.append(
            {"project_key": "globex/app", "session_id": "5f0c"},
            [_entry("u2", "assistant", "only globex")],
        )
        acme = await sdk.load({"project_key": "acme/app", "session_id": "5f0c"})
        globex = await sdk.load({"project_key": "globex/app", "session_id": "5f0c"})
        assert [entry["uuid"] for entry in acme or []] == ["u1"]
        assert [entry["uuid"] for entry in globex or []] == ["u1", "u2"]
        assert [row["session_id"] for row in await sdk.list_sessions("acme/app")] == ["5f0c"]
        assert await maybe(store.list_sessions(), store) == []  # the store's own tenant
        with SessionStore(database_url, tenant="acme") as theirs:
            assert len(theirs.list_sessions()) == 1
            (session_id,) = theirs.list_sessions()
            assert len(theirs.load_path(session_id)) == 1
        await sdk.delete({"project_key": "acme/app", "session_id": "5f0c"})
        assert await sdk.load({"project_key": "globex/app", "session_id": "5f0c"})

    run_on_store(flavour, database_url, body)
