"""A statement alone (`memstore.store.standalone`): on PostgreSQL an append that writes nothing
else is one round trip to the server (the call of `memstore_append`, no BEGIN or COMMIT), on the
sync and the async store, on an engine the store made and on one handed in; the connection goes
back to the pool as it was lent; an append inside a caller's transaction joins it."""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy import Engine, event

from memstore import AsyncSessionStore, SessionStore
from memstore.errors import DatabaseError, HeadMovedError
from memstore.store import create_store_engine, plans
from memstore.store.aio import create_async_store_engine
from memstore.store.sync import drive
from memstore.store.tenancy import scoped

from .test_append import say, table_counts


class RoundTrips:
    """The round trips an engine's connections make to the server, read from libpq's trace
    (each request ends when the server says ReadyForQuery), while checked out."""

    def __init__(self, engine: Engine) -> None:
        self._file = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed in `close`
        self._prepared: dict[str, str] = {}
        self._engine = engine
        event.listen(engine, "checkout", self._start)
        event.listen(engine, "checkin", self._stop)

    def _start(self, _dbapi: Any, record: Any, _proxy: Any) -> None:
        import psycopg

        pgconn = record.driver_connection.pgconn
        pgconn.trace(self._file.fileno())
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE)

    def _stop(self, _dbapi: Any, record: Any) -> None:
        if record.driver_connection is not None:
            record.driver_connection.pgconn.untrace()

    def take(self) -> list[str]:
        """Since the last `take`, each round trip's statement (its SQL's start)."""
        self._file.seek(0)
        lines = self._file.read().splitlines()
        self._file.seek(0)
        self._file.truncate()
        trips: list[str] = []
        opening = True
        for line in lines:
            if line[:2] not in ("F\t", "B\t"):  # a statement's text goes on over lines
                continue
            direction, _, kind, *rest = line.split("\t")
            words = " ".join(rest).split('"')  # ' ', name, ' ', SQL... (Bind: portal, name)
            if direction == "F" and kind == "Parse":  # psycopg prepares a statement run often
                self._prepared[words[1]] = words[3]
            if direction == "F" and opening:
                sql = {"Query": words[1:2], "Parse": words[3:4]}.get(kind, words[3:4])
                if kind == "Bind":
                    sql = [self._prepared.get(words[3], "?")]
                trips.append(sql[0][:60] if sql else kind)
                opening = False
            elif direction == "B" and kind == "ReadyForQuery":
                opening = True
        return trips

    def close(self) -> None:
        event.remove(self._engine, "checkout", self._start)
        event.remove(self._engine, "checkin", self._stop)
        self._file.close()


WARM = 6
"""Appends before counting: psycopg prepares a statement once it ran 5 times (a round trip
more, once)."""
CALL = "SELECT outcome, head, importing, ids, detail FROM memstore_append("[:60]


@pytest.mark.parametrize("engine_of", ["made", "handed_in"])
def test_a_sync_append_is_one_round_trip(postgres_url: str, engine_of: str) -> None:
    engine = create_store_engine(postgres_url) if engine_of == "handed_in" else None
    store = SessionStore(engine or postgres_url, tenant="acme")
    trips = RoundTrips(store.engine)
    try:
        for _ in range(WARM):  # the connection is made, given its tenant, the call prepared
            store.append("s", say("warm"))
        trips.take()
        first = store.append("s", say("one"))
        assert trips.take() == [CALL]
        store.append("s", say("two"), expected_head=first.id)
        assert trips.take() == [CALL]
        store.append_many("s", [say("three"), say("four")])
        assert trips.take() == [CALL]
        handle = store.session("s")
        trips.take()
        handle.append(say("five"))
        assert trips.take() == [CALL]
        with pytest.raises(HeadMovedError):
            store.append("s", say("late"), expected_head=first.id)
        assert trips.take() == [CALL]
        assert [node.turn.blocks[0].text for node in store.load_path_nodes("s")] == [  # type: ignore[union-attr]
            *["warm"] * WARM,
            "one",
            "two",
            "three",
            "four",
            "five",
        ]
    finally:
        store.close()
        trips.close()
        if engine is not None:
            engine.dispose()


@pytest.mark.parametrize("engine_of", ["made", "handed_in"])
def test_an_async_append_is_one_round_trip(postgres_url: str, engine_of: str) -> None:
    async def run() -> list[list[str]]:
        engine = create_async_store_engine(postgres_url) if engine_of == "handed_in" else None
        store = AsyncSessionStore(engine or postgres_url, tenant="acme")
        await store.open()
        trips = RoundTrips(store.engine.sync_engine)
        try:
            for _ in range(WARM):
                await store.append("s", say("warm"))
            trips.take()
            first = await store.append("s", say("one"))
            seen = [trips.take()]
            await store.append("s", say("two"), expected_head=first.id)
            seen.append(trips.take())
            await store.append_many("s", [say("three"), say("four")])
            seen.append(trips.take())
            with pytest.raises(HeadMovedError):
                await store.append("s", say("late"), expected_head=first.id)
            seen.append(trips.take())
            assert len(await store.load_path("s")) == WARM + 4
            return seen
        finally:
            await store.close()
            trips.close()
            if engine is not None:
                await engine.dispose()

    assert asyncio.run(run()) == [[CALL]] * 4


def _lent_as_given(engine: Engine) -> tuple[Any, ...]:
    """What a connection of `engine` is like when the application takes it from the pool."""
    with engine.connect() as connection:
        return (
            connection.exec_driver_sql("SHOW transaction_isolation").scalar(),
            connection.connection.driver_connection.autocommit,  # type: ignore[union-attr]
            connection.exec_driver_sql("SELECT current_setting('memstore.tenant', true)").scalar()
            or None,
        )


def test_an_engine_handed_in_gets_its_connection_back_as_it_lent_it(postgres_url: str) -> None:
    engine = create_store_engine(
        postgres_url, pool_size=1, max_overflow=0, isolation_level="REPEATABLE READ"
    )
    store = SessionStore(engine, tenant="acme")
    try:
        as_given = ("repeatable read", False, None)
        assert _lent_as_given(engine) == as_given
        first = store.append("s", say("one"))
        assert _lent_as_given(engine) == as_given
        with pytest.raises(HeadMovedError):
            store.append("s", say("late"), expected_head="elsewhere")
        assert _lent_as_given(engine) == as_given
        with engine.begin() as connection:  # the call fails in the server: a driver error
            connection.exec_driver_sql("ALTER FUNCTION memstore_append RENAME TO gone")
        before = table_counts(postgres_url)
        with pytest.raises(DatabaseError):
            store.append("s", say("failed"))
        assert _lent_as_given(engine) == as_given
        assert table_counts(postgres_url) == before
        with engine.begin() as connection:
            connection.exec_driver_sql("ALTER FUNCTION gone RENAME TO memstore_append")
        assert [node.id for node in store.load_path_nodes("s")] == [first.id]
    finally:
        store.close()
        engine.dispose()


def test_an_async_engine_handed_in_gets_its_connection_back_as_it_lent_it(
    postgres_url: str,
) -> None:
    async def run() -> list[tuple[Any, ...]]:
        engine = create_async_store_engine(
            postgres_url, pool_size=1, max_overflow=0, isolation_level="REPEATABLE READ"
        )
        store = AsyncSessionStore(engine, tenant="acme")
        seen = []
        try:
            await store.append("s", say("one"))
            with pytest.raises(HeadMovedError):
                await store.append("s", say("late"), expected_head="elsewhere")
            async with engine.connect() as connection:
                shown = await connection.exec_driver_sql("SHOW transaction_isolation")
                driver = (await connection.get_raw_connection()).driver_connection
                tenant = await connection.exec_driver_sql(
                    "SELECT current_setting('memstore.tenant', true)"
                )
                seen.append((shown.scalar(), driver.autocommit, tenant.scalar() or None))  # type: ignore[union-attr]
            assert len(await store.load_path("s")) == 1
            return seen
        finally:
            await store.close()
            await engine.dispose()

    assert asyncio.run(run()) == [("repeatable read", False, None)]


def test_an_append_in_a_callers_transaction_joins_it(database_url: str) -> None:
    with SessionStore(database_url) as store:
        store.append("s", say("kept"))
        plan = plans.append_turns(store.backend, "s", [say("dropped")])
        with store.transaction(write=True) as connection:
            transaction = connection.get_transaction()
            drive(scoped(plan, store.tenant), connection)
            assert connection.get_transaction() is transaction  # joined, still open
            transaction.rollback()  # type: ignore[union-attr]
        assert [node.turn.blocks[0].text for node in store.load_path_nodes("s")] == ["kept"]  # type: ignore[union-attr]


def test_an_append_with_usage_writes_its_usage_in_the_calls_transaction(
    postgres_url: str,
) -> None:
    """The usage row is a second statement: the call is not alone, and both commit together."""
    with SessionStore(postgres_url) as store:
        store.append("s", say("warm"))
        trips = RoundTrips(store.engine)
        try:
            node = store.append("s", say("paid"), usage={"inputTokens": 3})
            sent = trips.take()
        finally:
            trips.close()
        assert sent[0] == "BEGIN"
        assert sent[1] == CALL
        assert sent[-1] == "COMMIT"
        engine = store.engine
        with engine.connect() as connection:
            found = connection.execute(
                sqlalchemy.text("SELECT input_tokens FROM node_usage WHERE node_id = :n"),
                {"n": node.id},
            )
            assert found.scalar_one() == 3
