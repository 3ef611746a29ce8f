"""What a fork carries (issues 30 and 32): `fork_session` copies the usage (`node_usage`) and the
writers' keys (`node_keys`) of the nodes it copies, so a fork's costs count in its totals and a
keyed writer (the Claude Agent SDK adapter) re-appending the same entries to the fork stores
nothing new; `usage_stats` by model or day counts a forked model call once. SQLite and
PostgreSQL, sync and async stores."""

from __future__ import annotations

from typing import Any

import pytest

from memstore import InvalidArgumentError, NodeUsage
from memstore.store import SessionStore

_TOTALS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd")


def turn(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "blocks": [{"kind": "text", "text": text}]}


def cost(tokens: int, model: str = "m-1") -> NodeUsage:
    return NodeUsage(
        input_tokens=tokens,
        output_tokens=tokens // 10,
        cache_read_tokens=tokens // 2,
        cache_write_tokens=3,
        cost_usd=tokens / 1000,
        model=model,
    )


def totals(store: SessionStore, session_id: str) -> tuple[Any, ...]:
    info = store.session_info(session_id)
    return tuple(getattr(info, name) for name in _TOTALS)


def test_a_fork_keeps_the_usage_of_the_path_it_copies(store: SessionStore) -> None:
    root, answer = store.append_many(
        "src", [turn("user", "q"), turn("assistant", "a")], usage=[cost(100), cost(200)]
    )
    store.append("src", turn("assistant", "b"), usage=cost(4000), parent=answer.id)
    store.append("src", turn("assistant", "other"), usage=cost(7000), parent=root.id)
    store.append("path", turn("user", "q"), created_at=root.created_at, usage=cost(100))
    store.append("path", turn("assistant", "a"), created_at=answer.created_at, usage=cost(200))
    assert store.fork_session("src", answer.id, "copy") == answer.id
    assert totals(store, "copy") == totals(store, "path") != totals(store, "src")
    assert totals(store, "copy")[0] == 300  # the off-path branches' usage stays behind
    store.fork_session("src", None, "whole")  # the head: the last append's branch
    assert totals(store, "whole")[0] == 100 + 7000
    rows = store.read_only_query(
        "SELECT node_id, input_tokens, model FROM usage WHERE session_id = 'copy' ORDER BY node_id"
    ).rows
    assert sorted(tuple(row) for row in rows) == sorted(
        [(root.id, 100, "m-1"), (answer.id, 200, "m-1")]
    )


def test_a_fork_keeps_the_writers_keys_so_a_keyed_append_stores_nothing_new(
    store: SessionStore,
) -> None:
    turns = [turn("user", "one"), turn("assistant", "two"), turn("user", "three")]
    keys = ["k1", "k2", "k3"]
    first, second, _ = store.append_keyed("src", turns, keys)
    store.append_keyed("src", [turn("assistant", "aside")], ["k-aside"])
    store.fork_session("src", None, "whole")
    assert (
        store.append_keyed("whole", [*turns, turn("assistant", "aside")], [*keys, "k-aside"]) == []
    )
    assert len(store.load_path("whole")) == 4
    store.fork_session("src", second.id, "part")  # the keys of the copied nodes only
    held = store.read_only_query("SELECT key, node_id FROM node_keys WHERE session_id = 'part'")
    assert sorted(tuple(row) for row in held.rows) == [("k1", first.id), ("k2", second.id)]
    appended = store.append_keyed("part", [*turns, turn("assistant", "aside")], [*keys, "k-aside"])
    assert [node.turn.blocks[0].text for node in appended] == ["three", "aside"]  # type: ignore[union-attr]
    assert appended[0].parent == second.id
    assert store.head("src") != store.head("part")
    held = store.read_only_query("SELECT key FROM node_keys WHERE session_id = 'part'")
    assert sorted(row[0] for row in held.rows) == ["k-aside", "k1", "k2", "k3"]


def test_a_forked_model_call_counts_in_each_session_and_once_by_model_and_day(
    store: SessionStore,
) -> None:
    day = 1_767_225_600_000  # 2026-01-01 UTC
    store.append("src", turn("user", "q"), created_at=day)
    store.append("src", turn("assistant", "a"), created_at=day + 1, usage=cost(1000, "m-1"))
    store.fork_session("src", None, "copy")
    store.append("copy", turn("assistant", "more"), created_at=day + 2, usage=cost(50, "m-2"))
    by_session = {row.key: (row.nodes, row.input_tokens) for row in store.usage_stats("session")}
    assert by_session == {"src": (1, 1000), "copy": (2, 1050)}
    by_model = {
        row.key: (row.nodes, row.input_tokens, row.cost_usd) for row in store.usage_stats("model")
    }
    assert by_model == {"m-1": (1, 1000, 1.0), "m-2": (1, 50, 0.05)}
    (by_day,) = store.usage_stats("day")
    assert (by_day.key, by_day.nodes, by_day.input_tokens) == ("2026-01-01", 2, 1050)
    store.delete_session("src")  # the copy that is left counts
    by_model = {
        row.key: (row.nodes, row.input_tokens, row.cost_usd) for row in store.usage_stats("model")
    }
    assert by_model == {"m-1": (1, 1000, 1.0), "m-2": (1, 50, 0.05)}


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_forked_claude_transcript_takes_the_same_entries_once(
    flavour: str, database_url: str
) -> None:
    """The Claude Agent SDK adapter never forks; a memstore fork of one of its transcripts, under
    the session id of another SDK key, takes the SDK's re-sent entries without duplicating them."""
    pytest.importorskip("claude_agent_sdk")
    from memstore.integrations.claude_agent_sdk import MemstoreSessionStore, memstore_session_id
    from tests.framework_stores import maybe, run_on_store

    key: Any = {"project_key": "-home-ann-app", "session_id": "5f0c"}
    fork: Any = {"project_key": "-home-ann-app", "session_id": "7a1d"}

    def entry(uuid: str, role: str, text: str) -> Any:
        message: dict[str, Any] = {"role": role, "content": text}
        if role == "assistant":
            message["model"] = "claude-test"
            message["usage"] = {"input_tokens": 900, "output_tokens": 40}
        return {"type": role, "uuid": uuid, "parentUuid": None, "message": message}

    entries = [entry("u1", "user", "hello"), entry("u2", "assistant", "hi")]

    async def body(store: Any) -> None:
        adapter = MemstoreSessionStore(store)
        await adapter.append(key, entries)
        await maybe(store.fork_session(memstore_session_id(key), None, memstore_session_id(fork)))
        await adapter.append(fork, [*entries, entry("u3", "user", "and then?")])
        assert await adapter.load(fork) == [*entries, entry("u3", "user", "and then?")]
        info = await maybe(store.session_info(memstore_session_id(fork)))
        assert (info.input_tokens, info.output_tokens) == (900, 40)

    run_on_store(flavour, database_url, body)


def test_a_fork_takes_its_metadata_in_the_same_transaction(store: SessionStore) -> None:
    root, _answer = store.append_many("src", [turn("user", "q"), turn("assistant", "a")])
    store.fork_session("src", root.id, "copy", metadata={"of": "src", "n": {"k": 1}})
    assert store.session_info("copy").metadata == {"of": "src", "n": {"k": 1}}
    assert store.sessions(metadata={"of": "src"})[0].id == "copy"
    with pytest.raises(InvalidArgumentError, match="metadata of session 'bad'"):
        store.fork_session("src", None, "bad", metadata={1: "x"})  # type: ignore[dict-item]
    assert "bad" not in store.list_sessions()  # nothing half-written


def test_a_forks_export_carries_the_usage_and_key_lines_of_the_path_it_copies(
    store: SessionStore, tmp_path: Any
) -> None:
    """The fork's log gets the source's usage and key lines of the nodes it copies (before, only
    the tables did, and the fork's JSONL export dropped them), and an import of that export
    gives them back."""
    first, second, third = store.append_keyed(
        "s",
        [turn("user", "a"), turn("assistant", "b"), turn("user", "c")],
        ["k1", "k2", "k3"],
        usage=[None, cost(50), cost(70)],
    )
    store.append("s", turn("assistant", "d"), usage=cost(90))
    store.fork_session("s", second.id, "f")
    store.export_session("f", tmp_path / "f.jsonl")
    text = (tmp_path / "f.jsonl").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if '"type":"key"' in line or '"usage"' in line]
    assert len(lines) == 3  # first's key; second's key and usage
    assert all(first.id in line or second.id in line for line in lines)
    assert third.id not in text
    store.delete_session("f")
    store.import_jsonl(tmp_path / "f.jsonl", session_id="f")
    assert store.append_keyed("f", [turn("user", "a")], ["k1"]) == []  # its key came back
    store.export_session("f", tmp_path / "again.jsonl")
    assert (tmp_path / "again.jsonl").read_text(encoding="utf-8") == text
