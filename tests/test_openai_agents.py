"""The OpenAI Agents SDK session: the SDK's own Runner through it against a loopback server,
the Session protocol's operations, branches kept, and concurrent writers on both backends."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast
from unittest.mock import AsyncMock, MagicMock

import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import (
    OpenAIResponsesCompactionSession,
    Session,
    SessionSettings,
    SQLiteSession,
    is_openai_responses_compaction_aware_session,
)
from agents.testing import ScriptedModel
from openai import AsyncOpenAI

from memstore import CompactionPolicy, MemstoreError, ModelCard, SessionStore
from memstore.integrations import _history
from memstore.integrations._history import AnyStore
from memstore.integrations.openai_agents import MemstoreSession, SessionCompaction
from memstore.invokers import extractive
from tests.framework_stores import Body, maybe, runner_on_migrated
from tests.frameworks.openai_agents.responses import get_text_message
from tests.invoker_servers import Reply, error, serve
from tests.templates import Templates

set_tracing_disabled(True)  # the SDK would send traces to OpenAI


@pytest.fixture(params=["sync", "async"])
def with_store(
    request: pytest.FixtureRequest, database_url: str, migrated_templates: Templates
) -> Callable[[Body], None]:
    """Runs an async test body with a SessionStore or an AsyncSessionStore on this database."""
    return runner_on_migrated(request.param, database_url, migrated_templates)


def _completion(message: dict[str, Any]) -> Reply:
    """A (non-streamed) Chat Completions answer holding `message`."""
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m"}
    return error(200, {**body, "choices": [choice], "usage": usage})


_SCRIPT = [
    _completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                }
            ],
        }
    ),
    _completion({"role": "assistant", "content": "2 + 3 = 5"}),
    _completion({"role": "assistant", "content": "5 * 4 = 20"}),
    _completion({"role": "assistant", "content": "You are welcome"}),
]


@function_tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def _converse(session: Session, url: str) -> None:
    client = AsyncOpenAI(base_url=f"{url}/v1", api_key="test", max_retries=0)
    model = OpenAIChatCompletionsModel(model="m", openai_client=client)
    agent = Agent(name="calc", instructions="You add numbers.", model=model, tools=[add])
    for prompt in ("What is 2 + 3?", "Times 4?", "Thanks"):
        await Runner.run(agent, prompt, session=session)


def test_the_runner_sends_turn_3_what_the_sdks_own_sqlite_session_sends(
    with_store: Callable[[Body], None], tmp_path: Path
) -> None:
    async def body(store: AnyStore) -> None:
        with serve(*_SCRIPT) as server:
            await _converse(SQLiteSession("s", str(tmp_path / "sdk.db")), server.url)
        with serve(*_SCRIPT) as ours:
            session = MemstoreSession("s", store)
            assert isinstance(session, Session)
            await _converse(session, ours.url)
        assert len(ours.received) == len(server.received) == 4
        assert ours.received[-1].body["messages"] == server.received[-1].body["messages"]
        assert (
            len(ours.received[-1].body["messages"]) == 8
        )  # system, 3 user, call, result, 2 answers
        assert (
            await session.get_items()
            == await SQLiteSession("s", str(tmp_path / "sdk.db")).get_items()
        )
        query = (
            "SELECT tool_name, count(*) FROM tool_calls WHERE session_id = 's' GROUP BY tool_name"
        )
        rows = await maybe(store.read_only_query(query))  # the docs' query (docs/frameworks.md)
        assert [tuple(row) for row in rows.rows] == [("add", 1)]

    with_store(body)


@pytest.mark.parametrize("where", ["session", "run_config"])
def test_dict_session_settings_limit_what_the_runner_sends_as_the_sdks_sessions_do(
    where: str, with_store: Callable[[Body], None], tmp_path: Path
) -> None:
    """`{"limit": 2}` wherever the SDK takes settings: the session's constructor (the Runner
    raised AttributeError: 'dict' object has no attribute 'limit') or the RunConfig."""
    settings = {"limit": 2}

    async def converse(make: Callable[..., Session], url: str) -> list[Any]:
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="test", max_retries=0)
        model = OpenAIChatCompletionsModel(model="m", openai_client=client)
        agent = Agent(name="calc", instructions="You add numbers.", model=model, tools=[add])
        session = make(session_settings=settings) if where == "session" else make()
        config = RunConfig(session_settings=settings) if where == "run_config" else None
        for prompt in ("What is 2 + 3?", "Times 4?", "Thanks"):
            await Runner.run(agent, prompt, session=session, run_config=config)
        return await session.get_items()

    async def body(store: AnyStore) -> None:
        sdk_db = str(tmp_path / f"sdk-{where}.db")
        with serve(*_SCRIPT) as server:
            theirs = await converse(functools.partial(SQLiteSession, "s", sdk_db), server.url)
        with serve(*_SCRIPT) as ours:
            mine = await converse(functools.partial(MemstoreSession, "s", store), ours.url)
        assert len(ours.received) == len(server.received) == 4
        sent = [request.body["messages"] for request in ours.received]
        assert sent == [request.body["messages"] for request in server.received]
        assert len(sent[-1]) == 4  # system, the 2 newest items, the new prompt
        assert mine == theirs

    with_store(body)


def test_session_settings_given_as_a_dict_are_the_sdks_settings(sqlite_url: str) -> None:
    with SessionStore(sqlite_url) as store:
        session = MemstoreSession("s", store, session_settings={"limit": 3})
        assert session.session_settings == SessionSettings(limit=3)
        session.session_settings = None
        assert session.session_settings == SessionSettings()


def _message(text: str) -> Any:
    return {"role": "user", "content": text}


def test_get_add_pop_and_clear_follow_the_protocol_and_keep_branches(
    with_store: Callable[[Body], None],
) -> None:
    async def body(store: AnyStore) -> None:
        session = MemstoreSession("s", store, session_settings=SessionSettings(limit=2))
        assert await session.get_items() == []
        assert await session.pop_item() is None
        call: Any = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
        output: Any = {"type": "function_call_output", "call_id": "c", "output": "ok"}
        await session.add_items([_message("one"), call, output])
        await session.add_items([])
        assert await session.get_items() == [call, output]  # the settings' limit
        assert await session.get_items(limit=1) == [output]
        assert await session.get_items(limit=10) == [_message("one"), call, output]
        assert await session.pop_item() == output
        assert await session.get_items(limit=10) == [_message("one"), call]
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None
        await session.add_items([_message("two")])
        assert await session.get_items() == [_message("two")]
        assert await session.pop_item() == _message("two")
        assert await session.get_items() == []
        graph = await maybe(store.load_session("s"))
        texts = {json.dumps(node.turn.to_json()) for node in graph.all()}
        assert any('"one"' in text for text in texts)  # nothing was deleted
        assert any('"ok"' in text for text in texts)

    with_store(body)


def test_concurrent_add_items_lose_nothing_and_make_one_linear_chain(
    with_store: Callable[[Body], None],
) -> None:
    async def body(store: AnyStore) -> None:
        session = MemstoreSession("s", store)

        async def writer(n: int) -> None:
            for batch in range(3):
                await session.add_items([_message(f"w{n} b{batch} i{i}") for i in range(4)])

        await asyncio.gather(*(writer(n) for n in range(6)))
        items: list[Any] = await session.get_items()
        assert len(items) == 6 * 3 * 4
        texts = [item["content"] for item in items]
        assert sorted(texts) == sorted(f"w{n} b{b} i{i}" for n in range(6) for b in range(3)
                                       for i in range(4))  # fmt: skip
        for start in range(0, len(texts), 4):  # each batch stayed together, in order
            first = texts[start].rsplit(" ", 1)[0]
            assert texts[start : start + 4] == [f"{first} i{i}" for i in range(4)]
        graph = await maybe(store.load_session("s"))
        assert graph.size == len(items)
        children = [node.parent for node in graph.all()]
        assert len(set(children)) == len(children)  # no node has two children: one chain

    with_store(body)


def test_run_compaction_condenses_onto_a_new_branch_with_memstores_summarizer(
    with_store: Callable[[Body], None],
) -> None:
    settings = SessionCompaction(
        ModelCard(id="any", context_window=100_000), extractive(), CompactionPolicy(keep_recent=2)
    )

    async def body(store: AnyStore) -> None:
        session = MemstoreSession("s", store, compaction=settings)
        assert is_openai_responses_compaction_aware_session(session)
        items = [_message(f"question {n} about quokkas") for n in range(6)]
        await session.add_items(items)
        await session.run_compaction({"response_id": "r1"})  # far below the trigger
        assert await session.get_items() == items
        await session.run_compaction({"response_id": "r1", "force": True})
        summary, *kept = cast(list[Any], await session.get_items())
        assert kept == items[-2:]
        assert summary["role"] == "user"
        assert summary["content"][0]["text"].startswith("[condensed earlier context]")
        graph = await maybe(store.load_session("s"))
        assert graph.size == 6 + 3  # the old branch stays
        await MemstoreSession("s", store).run_compaction({"force": True})  # no settings: no-op
        assert graph.size == (await maybe(store.load_session("s"))).size

    with_store(body)


def test_each_session_object_sees_what_the_others_wrote(
    with_store: Callable[[Body], None],
) -> None:
    async def body(store: AnyStore) -> None:
        first, second = MemstoreSession("s", store), MemstoreSession("s", store)
        await first.add_items([_message("a")])
        assert await first.get_items() == [_message("a")]
        assert await second.get_items() == [_message("a")]
        await second.add_items([_message("b")])
        assert await first.get_items() == [_message("a"), _message("b")]
        await first.add_items([_message("c")])
        assert await second.pop_item() == _message("c")
        assert await first.get_items() == [_message("a"), _message("b")]
        items: list[Any] = await first.get_items()
        items[0]["content"] = "changed"  # the caller's copy
        assert await first.get_items(limit=1) == [_message("b")]
        assert (await first.get_items())[0] == _message("a")

    with_store(body)


def _said(role: str, text: str) -> Any:
    return {"role": role, "content": text}


def test_the_compaction_snapshot_replaces_a_suffix_as_a_new_branch(
    with_store: Callable[[Body], None],
) -> None:
    """The SDK's private hook for `OpenAIResponsesCompactionSession`'s native path (pinned to
    SNAPSHOT_TESTED_VERSIONS): a bounded read, and a compare-and-set suffix replacement."""
    history = [_said("user" if n % 2 == 0 else "assistant", f"item {n}") for n in range(6)]

    async def body(store: AnyStore) -> None:
        session = MemstoreSession("c", store)
        await session.add_items(history)
        partial = await session._get_compaction_snapshot(3)
        assert not partial.complete
        assert partial.items == history[-len(partial.items) :]
        assert len(partial.items) >= 3
        whole = await session._get_compaction_snapshot(10)
        assert (whole.complete, whole.items) == (True, history)
        summary = _said("assistant", "a summary of items 4 and 5")
        assert await partial.replace_suffix(len(partial.items) - 2, [summary])
        assert await session.get_items() == [*history[:4], summary]
        assert not await whole.replace_suffix(0, [summary])  # stale: the head moved since
        assert await session.get_items() == [*history[:4], summary]
        fresh = await session._get_compaction_snapshot(10)
        assert await fresh.replace_suffix(0, [summary])  # the whole history: a new root
        assert await session.get_items() == [summary]
        nodes = (await maybe(store.load_session("c"))).all()
        assert len(nodes) == len(history) + 2  # nothing deleted: the old items are branches

    with_store(body)


@pytest.mark.parametrize("limit", [None, 2], ids=["no-limit", "limit-2"])
def test_the_sdks_compaction_wrapper_takes_its_native_path_inside_runner_run(
    with_store: Callable[[Body], None], limit: int | None
) -> None:
    """`OpenAIResponsesCompactionSession` over MemstoreSession compacts through the snapshot
    inside `Runner.run`, the compaction client faked as the SDK's own tests fake it. Its other
    path would clear the history and re-add it (a cleared marker) without a limit, and skip
    compaction with one (a partial history): here the compaction is awaited once and written
    as a new branch, the items before the compacted suffix kept."""
    history = [_said("user" if n % 2 == 0 else "assistant", f"item {n}") for n in range(6)]
    summary = {"type": "compaction", "id": "cmp", "encrypted_content": "summary"}

    async def body(store: AnyStore) -> None:
        settings = None if limit is None else {"limit": limit}
        session = MemstoreSession("native", store, session_settings=settings)
        await session.add_items(history)
        client = MagicMock()
        client.responses.compact = AsyncMock(return_value=SimpleNamespace(output=[summary]))
        wrapper = OpenAIResponsesCompactionSession(
            "native", session, client=client, should_trigger_compaction=lambda _: True
        )
        agent = Agent(name="worker", model=ScriptedModel(steps=[[get_text_message("done")]]))
        await Runner.run(agent, "continue", session=wrapper)
        client.responses.compact.assert_awaited_once()
        kept = [] if limit is None else history[:-limit]
        assert await session.get_items(limit=100) == [*kept, summary]
        nodes = (await maybe(store.load_session("native"))).all()
        assert not any(_history.is_cleared(node.turn) for node in nodes)
        assert len(nodes) == len(history) + 3  # the run's two items stay, as another branch

    with_store(body)


def test_the_compaction_snapshot_refuses_an_untested_sdk_version(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agents

    monkeypatch.setattr(agents, "__version__", "0.99.0")
    with SessionStore(sqlite_url) as store:
        session = MemstoreSession("c", store)
        with pytest.raises(MemstoreError, match=r"openai-agents 0\.99\.0, which may have changed"):
            asyncio.run(session._get_compaction_snapshot(3))


def test_an_item_that_is_no_mapping_is_refused_by_position_and_nothing_is_written(
    with_store: Callable[[Body], None],
) -> None:
    """`add_items` of both sessions refuses a batch holding something that is no item (a
    string, a number) naming its position, as an `InvalidTurnError`, and writes none of it."""
    from memstore.errors import InvalidTurnError
    from memstore.integrations.openai_advanced import MemstoreAdvancedSession

    async def body(store: AnyStore) -> None:
        for session in (MemstoreSession("s", store), MemstoreAdvancedSession("adv", store)):
            await session.add_items([_message("one")])
            for bad in ("not an item", 42):
                with pytest.raises(InvalidTurnError, match=r"items\[1\] is a (str|int), not an"):
                    await session.add_items([_message("two"), cast(Any, bad)])
            assert await session.get_items() == [_message("one")]

    with_store(body)
