"""Usage through the framework adapters (issue 30): the OpenAI Agents SDK session records a
run's usage in the SDK's own shape; the Claude Agent SDK store keeps the usage its entries
carry. Both backends, sync and async stores."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from agents.usage import Usage
from openai.types.responses.response_usage import InputTokensDetails

from memstore import InvalidArgumentError
from memstore.integrations.claude_agent_sdk import MemstoreSessionStore, memstore_session_id
from memstore.integrations.openai_agents import MemstoreSession
from tests.framework_stores import Body, maybe, runner_on_migrated
from tests.templates import Templates


@pytest.fixture(params=["sync", "async"])
def with_store(
    request: pytest.FixtureRequest, database_url: str, migrated_templates: Templates
) -> Callable[[Body], None]:
    return runner_on_migrated(request.param, database_url, migrated_templates)


async def usage_of(store: Any, session_id: str) -> list[tuple[Any, ...]]:
    result = await maybe(
        store.read_only_query(
            "SELECT node_id, provider, model, input_tokens, output_tokens, cache_read_tokens,"
            f" cache_write_tokens, cost_usd FROM usage WHERE session_id = '{session_id}'"
        )
    )
    return [tuple(row) for row in result.rows]


def test_an_agents_run_usage_is_recorded_against_its_last_item(
    with_store: Callable[[Body], None],
) -> None:
    async def body(store: Any) -> None:
        session = MemstoreSession("run", store)
        with pytest.raises(Exception, match="no turns"):
            await session.add_usage(Usage(requests=1, input_tokens=1, output_tokens=1))
        await session.add_items(
            [
                {"role": "user", "content": "What is 2 + 3?"},
                {"role": "assistant", "content": "5"},
            ]
        )
        usage = Usage(
            requests=2,
            input_tokens=1500,
            input_tokens_details=InputTokensDetails(cached_tokens=1024, cache_write_tokens=100),
            output_tokens=12,
            total_tokens=1512,
        )
        node = await session.add_usage(usage, model="gpt-4.1", cost_usd=0.002)
        assert node == await maybe(store.head("run"))
        assert await usage_of(store, "run") == [
            (node, "openai", "gpt-4.1", 376, 12, 1024, 100, 0.002)
        ]
        assert len(await session.get_items()) == 2  # the items are untouched
        with pytest.raises(InvalidArgumentError, match="OpenAI Agents SDK's Usage"):
            await session.add_usage({"input_tokens": 3})

    with_store(body)


def test_claude_agent_sdk_entries_that_carry_usage_keep_it(
    with_store: Callable[[Body], None],
) -> None:
    key: Any = {"project_key": "proj", "session_id": "s1"}
    usage = {
        "input_tokens": 12,
        "output_tokens": 30,
        "cache_read_input_tokens": 2000,
        "cache_creation_input_tokens": 100,
    }
    entries: list[Any] = [
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}},
        {
            "type": "assistant",
            "uuid": "u2",
            "message": {
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "hello"}],
                "usage": usage,
            },
        },
    ]

    async def body(store: Any) -> None:
        adapter = MemstoreSessionStore(store)
        await adapter.append(key, entries)
        await adapter.append(key, entries)  # deduplicated: nothing new, no usage twice
        session_id = memstore_session_id(key)
        head = await maybe(store.head(session_id))
        assert await usage_of(store, session_id) == [
            (head, "anthropic", "claude-sonnet-4-5", 12, 30, 2000, 100, None)
        ]
        assert await adapter.load(key) == entries

    with_store(body)


def test_an_agents_sessions_compaction_can_decide_by_the_reported_usage(
    with_store: Callable[[Body], None],
) -> None:
    """`SessionCompaction(usage_aware=True)`: a short history whose last run reported 9,000
    input tokens fills a 10,000-token window's trigger; by the character rule (the default)
    it does not."""
    from memstore import CompactionPolicy, ModelCard
    from memstore.integrations.openai_agents import SessionCompaction
    from memstore.invokers import extractive

    card = ModelCard(id="any", context_window=10_000)
    policy = CompactionPolicy(keep_recent=1)

    async def body(store: Any) -> None:
        by_rule = MemstoreSession(
            "rule", store, compaction=SessionCompaction(card, extractive(), policy)
        )
        by_usage = MemstoreSession(
            "usage",
            store,
            compaction=SessionCompaction(card, extractive(), policy, usage_aware=True),
        )
        for session in (by_rule, by_usage):
            await session.add_items(
                [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
            )
            await session.run_compaction()
            assert len(await session.get_items()) == 2  # neither fills the window yet
            await session.add_usage(Usage(requests=1, input_tokens=9_000, output_tokens=5))
            await session.add_items([{"role": "user", "content": "and now?"}])
            await session.run_compaction()
        assert len(await by_rule.get_items()) == 3  # the character rule: a few tokens
        summary, kept = await by_usage.get_items()
        assert cast_text(summary).startswith("[condensed earlier context]")
        assert kept == {"role": "user", "content": "and now?"}

    with_store(body)


def cast_text(item: Any) -> str:
    return str(item["content"][0]["text"])
