"""The OpenAI Agents SDK's advanced session on memstore (`MemstoreAdvancedSession`): what the
SDK's own tests (tests/frameworks/openai_agents/test_advanced_sqlite_session.py) do not check: where
branches and usage live in memstore, that other instances and a reopened store see them, the
errors it raises, and the constructor that takes the SDK's arguments."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from agents.usage import Usage
from openai.types.responses.response_usage import (
    InputTokensDetails,
    InputTokensDetailsCacheWriteTokensDetails,
    OutputTokensDetails,
)

from memstore import BranchError, MemstoreError, SessionClosedError, SessionStore
from memstore.integrations._history import AnyStore
from memstore.integrations.openai_advanced import MemstoreAdvancedSession
from memstore.integrations.openai_agents import MemstoreSession
from tests.framework_stores import Body, maybe, run_on_store, runner_on_migrated
from tests.templates import Templates

ITEMS: list[Any] = [
    {"role": "user", "content": "Plan a trip to Kyoto"},
    {"role": "assistant", "content": "Day one: temples"},
    {"role": "user", "content": "Make it cheaper"},
    {"role": "assistant", "content": "Hostels and buses"},
]


@pytest.fixture(params=["sync", "async"])
def with_store(
    request: pytest.FixtureRequest, database_url: str, migrated_templates: Templates
) -> Callable[[Body], None]:
    """Runs an async test body with a SessionStore or an AsyncSessionStore on this database."""
    return runner_on_migrated(request.param, database_url, migrated_templates)


class _Result:
    """What `store_run_usage` reads of a `RunResult`: its context's usage."""

    def __init__(self, usage: Usage) -> None:
        self.context_wrapper = type("Context", (), {"usage": usage})()


def test_main_is_the_memstore_session_and_a_branch_is_session_at_branch(
    with_store: Callable[[Body], None],
) -> None:
    async def body(store: AnyStore) -> None:
        session = MemstoreAdvancedSession("trip", store)
        await session.add_items(ITEMS)
        assert await MemstoreSession("trip", store).get_items() == ITEMS
        assert await session.create_branch_from_turn(2, "cheap") == "cheap"
        assert session.current_branch_id == "cheap"
        await session.add_items([{"role": "user", "content": "Fly instead"}])
        path = await maybe(store.load_path("trip@cheap"), store)
        assert [turn.to_json()["blocks"][0]["text"] for turn in path] == [
            "Plan a trip to Kyoto",
            "Day one: temples",
            "Fly instead",
        ]
        forked = await maybe(store.load_path_nodes("trip@cheap"), store)
        main = await maybe(store.load_path_nodes("trip"), store)
        assert [node.id for node in forked[:2]] == [node.id for node in main[:2]]  # shared

    with_store(body)


def test_a_second_instance_and_a_reopened_store_see_branches_and_usage(
    with_store: Callable[[Body], None],
) -> None:
    async def body(store: AnyStore) -> None:
        first = MemstoreAdvancedSession("trip", store)
        await first.add_items(ITEMS)
        await first.store_run_usage(_Result(Usage(requests=2, input_tokens=7, total_tokens=9)))
        await first.create_branch_from_turn(2, "cheap")
        second = MemstoreAdvancedSession("trip", store)
        assert second.current_branch_id == "main"
        assert [b["branch_id"] for b in await second.list_branches()] == ["main", "cheap"]
        assert await second.get_items(branch_id="cheap") == ITEMS[:2]
        usage = await second.get_turn_usage(2)
        assert isinstance(usage, dict)
        assert usage == {
            "requests": 2,
            "input_tokens": 7,
            "output_tokens": 0,
            "total_tokens": 9,
            "input_tokens_details": usage["input_tokens_details"],
            "output_tokens_details": usage["output_tokens_details"],
        }
        assert await second.get_session_usage(branch_id="cheap") is None

    with_store(body)


def test_another_instances_clear_moves_this_one_back_to_main(
    with_store: Callable[[Body], None],
) -> None:
    async def body(store: AnyStore) -> None:
        mine = MemstoreAdvancedSession("trip", store)
        await mine.add_items(ITEMS)
        await mine.create_branch_from_turn(2, "cheap")
        await MemstoreAdvancedSession("trip", store).clear_session()
        assert await mine.get_items() == []
        await mine.add_items([{"role": "user", "content": "Start over"}])
        assert mine.current_branch_id == "main"
        assert await mine.get_items(branch_id="main") == [{"role": "user", "content": "Start over"}]
        assert await mine.get_items(branch_id="cheap") == []
        with pytest.raises(BranchError, match="already been used"):
            await mine.create_branch_from_turn(1, "cheap")  # the name stays reserved

    with_store(body)


def test_popping_a_turn_forgets_its_usage_and_a_new_turn_starts_without(
    with_store: Callable[[Body], None],
) -> None:
    async def body(store: AnyStore) -> None:
        session = MemstoreAdvancedSession("trip", store)
        await session.add_items(ITEMS[:2])
        await session.store_run_usage(_Result(Usage(requests=1, input_tokens=3, total_tokens=3)))
        await session.pop_item()
        assert await session.get_turn_usage(1) != {}  # the turn keeps its user message
        await session.pop_item()
        assert await session.get_turn_usage(1) == {}
        await session.add_items(ITEMS[:1])
        assert await session.get_turn_usage(1) == {}  # a new turn 1, not the popped one
        assert await session.get_session_usage() is None

    with_store(body)


def test_refusals_are_memstore_errors_and_value_errors(sqlite_url: str) -> None:
    async def body(store: AnyStore) -> None:
        session = MemstoreAdvancedSession("trip", store)
        await session.add_items(ITEMS)
        for call, message in [
            (session.create_branch_from_turn(7), "Turn 7 does not contain a user message"),
            (session.switch_to_branch("nowhere"), "Branch 'nowhere' does not exist"),
            (session.delete_branch("main"), "Cannot delete the 'main' branch"),
            (session.create_branch_from_turn(1, "main"), "already been used"),
        ]:
            with pytest.raises(BranchError, match=message) as caught:
                await call
            assert isinstance(caught.value, MemstoreError)
            assert isinstance(caught.value, ValueError)
        assert await session.get_items() == ITEMS  # nothing written
        assert [b["branch_id"] for b in await session.list_branches()] == ["main"]

    run_on_store("sync", sqlite_url, body)


def test_the_sdk_constructor_opens_a_file_and_close_closes_it(tmp_path: Path) -> None:
    async def body() -> None:
        path = tmp_path / "conversations.db"
        session = MemstoreAdvancedSession(
            session_id="trip", db_path=path, create_tables=True, sessions_table="ignored"
        )
        await session.add_items(ITEMS)
        session.close()
        with pytest.raises(SessionClosedError, match="AdvancedSQLiteSession is closed"):
            await session.add_items([])
        store = SessionStore(f"sqlite:///{path}")
        try:
            assert await MemstoreAdvancedSession("trip", store).get_items() == ITEMS
        finally:
            store.close()
        in_memory = MemstoreAdvancedSession(session_id="scratch")
        await in_memory.add_items(ITEMS[:1])
        assert await in_memory.get_items() == ITEMS[:1]
        in_memory.close()

    asyncio.run(body())


def test_a_failed_usage_write_is_logged_not_raised(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def body(store: AnyStore) -> None:
        session = MemstoreAdvancedSession("trip", store)
        await session.add_items(ITEMS[:1])
        with caplog.at_level(logging.ERROR):
            await session.store_run_usage(object())  # no context_wrapper
        assert "Failed to store session usage" in caplog.text
        assert await session.get_session_usage() is None

    run_on_store("sync", sqlite_url, body)


def test_branches_are_listed_in_the_order_they_were_made(
    with_store: Callable[[Body], None],
) -> None:
    async def body(store: AnyStore) -> None:
        session = MemstoreAdvancedSession("trip", store)
        await session.add_items(ITEMS)
        for name in ("zeta", "alpha", "mid"):  # same fork point, made one after the other
            await session.switch_to_branch("main")
            await session.create_branch_from_turn(2, name)
            await asyncio.sleep(0.002)  # distinct creation times (epoch ms)
        branches = await session.list_branches()
        assert [b["branch_id"] for b in branches] == ["main", "zeta", "alpha", "mid"]
        assert [b["is_current"] for b in branches] == [False, False, False, True]
        assert [b["message_count"] for b in branches] == [4, 2, 2, 2]

    with_store(body)


def test_a_branch_is_made_and_named_in_one_write_transaction(database_url: str) -> None:
    """The fork and the metadata that names it a branch commit together: no half-made branch
    (a session that holds the name but is not listed) can be left by a failure between them."""
    writes: list[int] = []

    def count_writes(connection: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            transaction = id(connection.get_transaction())
            if transaction not in writes:
                writes.append(transaction)

    async def body(store: AnyStore) -> None:
        assert isinstance(store, SessionStore)
        session = MemstoreAdvancedSession("trip", store)
        await session.add_items(ITEMS)
        sqlalchemy.event.listen(store.engine, "before_cursor_execute", count_writes)
        try:
            assert await session.create_branch_from_turn(2, "cheap") == "cheap"
        finally:
            sqlalchemy.event.remove(store.engine, "before_cursor_execute", count_writes)
        assert len(writes) == 1
        assert [b["branch_id"] for b in await session.list_branches()] == ["main", "cheap"]

    run_on_store("sync", database_url, body)


def test_run_usage_is_in_node_usage_so_memstore_totals_count_it(
    with_store: Callable[[Body], None],
) -> None:
    async def body(store: AnyStore) -> None:
        session = MemstoreAdvancedSession("trip", store)
        await session.add_items(ITEMS[:2])
        first = Usage(requests=1, input_tokens=50, output_tokens=30, total_tokens=80)
        await session.store_run_usage(_Result(first))
        again = Usage(requests=2, input_tokens=70, output_tokens=40, total_tokens=110)
        await session.store_run_usage(_Result(again))  # the same turn's: replaces it
        await session.add_items(ITEMS[2:])
        await session.store_run_usage(_Result(first))
        await session.create_branch_from_turn(2, "cheap")
        await session.add_items([{"role": "user", "content": "Fly instead"}])
        await session.store_run_usage(_Result(Usage(requests=1, input_tokens=9, total_tokens=9)))
        info = await maybe(store.session_info("trip"), store)
        assert (info.input_tokens, info.output_tokens) == (70 + 50, 40 + 30)
        branch = await maybe(store.session_info("trip@cheap"), store)
        assert (branch.input_tokens, branch.output_tokens) == (70 + 9, 40)  # turn 1 forked
        rows = await maybe(
            store.read_only_query(
                "SELECT session_id, input_tokens FROM usage ORDER BY session_id, input_tokens"
            ),
            store,
        )
        assert [tuple(row) for row in rows.rows] == [
            ("trip", 50),
            ("trip", 70),
            ("trip@cheap", 9),
            ("trip@cheap", 70),
        ]
        assert await session.get_session_usage() == {  # the SDK's view is as before
            "requests": 2 + 1 + 1,
            "input_tokens": 70 + 50 + 9,
            "output_tokens": 40 + 30,
            "total_tokens": 110 + 80 + 9,
            "total_turns": 3,
        }

    with_store(body)


def test_token_details_read_back_as_the_sdk_writes_them(
    with_store: Callable[[Body], None],
) -> None:
    """Every field of the details, an unset one as null, as the SDK's AdvancedSQLiteSession
    writes `details.__dict__`; a nested object given (which the reference cannot write, and so
    keeps no details) as its fields."""
    plain = InputTokensDetails(cached_tokens=10, cache_write_tokens=0)
    nested = InputTokensDetails(
        cached_tokens=4,
        cache_write_tokens=6,
        cache_write_tokens_details=InputTokensDetailsCacheWriteTokensDetails(
            ttl_12h_tokens=1, ttl_30m_tokens=5
        ),
    )

    async def body(store: AnyStore) -> None:
        session = MemstoreAdvancedSession("trip", store)
        await session.add_items(ITEMS[:2])
        usage = Usage(
            requests=1,
            input_tokens=50,
            output_tokens=30,
            total_tokens=80,
            input_tokens_details=plain,
            output_tokens_details=OutputTokensDetails(reasoning_tokens=5),
        )
        await session.store_run_usage(_Result(usage))
        await session.add_items(ITEMS[2:])
        await session.store_run_usage(_Result(Usage(requests=1, input_tokens_details=nested)))
        first, second = await session.get_turn_usage(1), await session.get_turn_usage(2)
        assert isinstance(first, dict)
        assert isinstance(second, dict)
        assert first["input_tokens_details"] == {
            "cache_write_tokens": 0,
            "cached_tokens": 10,
            "cache_write_tokens_details": None,
        }
        assert first["output_tokens_details"] == {"reasoning_tokens": 5}
        assert second["input_tokens_details"] == {
            "cache_write_tokens": 6,
            "cached_tokens": 4,
            "cache_write_tokens_details": {"ttl_12h_tokens": 1, "ttl_30m_tokens": 5},
        }

    with_store(body)
