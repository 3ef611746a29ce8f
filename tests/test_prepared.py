"""Prepared statements (the hot paths' way to the driver), and the garbage-collector pause."""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any, TypeVar

import pytest
import sqlalchemy.exc
from sqlalchemy import Row, bindparam, select, update

from memstore import SessionStore
from memstore.errors import DatabaseError
from memstore.store import aio, plans
from memstore.store.bulk import paused_gc
from memstore.store.errors import translate_database_errors
from memstore.store.plans import nodes
from memstore.store.policy import Backend
from memstore.store.prepared import Prepared
from memstore.store.sync import drive
from memstore.store.tables import DEFAULT_TENANT, TENANT_KEY, sessions
from memstore.store.tenancy import scoped

T = TypeVar("T")

SET_META = Prepared(
    update(sessions)
    .where(sessions.c.id == bindparam("session_id"))
    .values(meta=bindparam("meta"), title=None)  # a JSON column, and a value bound in place
)
TITLES = Prepared(select(sessions.c.id, sessions.c.title).order_by(sessions.c.id))
ROWS: list[dict[str, Any]] = [
    {"session_id": "a", "meta": {"n": 1, "é": [True]}},
    {"session_id": "b", "meta": None},
]


def on_default(plan: plans.Plan[T]) -> plans.Plan[T]:
    """`plan` scoped to the default tenant, as a store without one runs it."""
    return scoped(plan, DEFAULT_TENANT)


def set_meta_plan(backend: Backend) -> plans.Plan[list[tuple[Any, ...]]]:
    for row in ROWS:
        yield from plans.ensure_session(backend, row["session_id"], 1)
    yield SET_META, ROWS  # executemany
    return list((yield TITLES, {}))  # rows as the driver gives them


def check_metadata(store: SessionStore) -> None:
    """The JSON column's bind conversion ran, and the title bound in the statement was set."""
    assert [(info.id, info.title, info.metadata) for info in store.sessions()] == [
        ("a", None, {"n": 1, "é": [True]}),
        ("b", None, {}),
    ]


def test_prepared_statements_bind_converted_values_defaults_and_many_rows(
    database_url: str,
) -> None:
    with SessionStore(database_url) as store:
        store.update_session("a", title="set before")
        with store.transaction(write=True) as connection:
            assert drive(on_default(set_meta_plan(store.backend)), connection) == [
                ("a", None),
                ("b", None),
            ]
        check_metadata(store)


def test_prepared_statements_run_the_same_on_an_async_connection(database_url: str) -> None:
    async def run() -> list[tuple[Any, ...]]:
        store = aio.AsyncSessionStore(database_url)
        try:
            await store.open()
            async with store.transaction(write=True) as connection:
                return await aio.drive(on_default(set_meta_plan(store.backend)), connection)
        finally:
            await store.close()

    assert asyncio.run(run()) == [("a", None), ("b", None)]
    with SessionStore(database_url) as store:
        check_metadata(store)


def _answers(statement: Any, params: dict[str, Any], prepare: bool) -> plans.Plan[list[Any]]:
    """What a plan can ask of a step's result (once: a Core result is read once), the step run
    prepared or through Core."""
    step = Prepared(statement) if prepare else statement
    answers: list[Any] = []
    for ask in ("all", "first", "one", "scalar_one_or_none", "scalars", "__iter__"):
        result = yield step, params
        try:
            answer = getattr(result, ask)()
        except Exception as exc:
            answer = type(exc).__name__
        if isinstance(answer, tuple | Row):
            answer = _shape(answer)
        elif not isinstance(answer, str | None):
            answer = [_shape(row) if isinstance(row, tuple | Row) else row for row in answer]
        answers.append(answer)
    return answers


def _shape(row: Any) -> tuple[Any, ...]:
    """A row as a plan may read it: by position, by column name and as a mapping."""
    return (tuple(row), row.id, row.title, dict(row._mapping))


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_plan_gets_the_same_answers_whichever_way_its_step_ran(
    database_url: str, flavour: str
) -> None:
    """Prepared statements are the drivers' business: results answer alike, rowcount too."""
    with SessionStore(database_url) as store:
        for session_id in ("a", "b"):
            store.update_session(session_id, title=session_id.upper())
    ids = select(sessions.c.id, sessions.c.title).order_by(sessions.c.id)
    cases: list[tuple[Any, dict[str, Any]]] = [
        (ids, {}),  # several rows: one() refuses
        (ids.where(sessions.c.id == bindparam("id")), {"id": "a"}),
        (ids.where(sessions.c.id == bindparam("id")), {"id": "none"}),
    ]
    touch = update(sessions).values(title=sessions.c.title).where(sessions.c.id != bindparam("x"))

    def both(prepare: bool) -> plans.Plan[list[Any]]:
        answers: list[Any] = []
        for statement, params in cases:
            answers.append((yield from _answers(statement, params, prepare)))
        touched = yield (Prepared(touch) if prepare else touch), {"x": "x"}
        return [*answers, touched.rowcount]

    if flavour == "sync":
        with SessionStore(database_url) as store, store.transaction(write=True) as connection:
            prepared, core = (
                drive(on_default(both(True)), connection),
                drive(on_default(both(False)), connection),
            )
    else:

        async def run() -> tuple[list[Any], list[Any]]:
            store = aio.AsyncSessionStore(database_url)
            try:
                await store.open()
                async with store.transaction(write=True) as connection:
                    return (
                        await aio.drive(on_default(both(True)), connection),
                        await aio.drive(on_default(both(False)), connection),
                    )
            finally:
                await store.close()

        prepared, core = asyncio.run(run())
    assert prepared == core
    assert core[0][2] == "MultipleResultsFound"
    assert core[2][2] == "NoResultFound"
    assert core[-1] == 2


def test_a_driver_error_from_a_prepared_statement_is_a_database_error(database_url: str) -> None:
    def orphan_record() -> plans.Plan[None]:
        record = {"session_id": "nobody", "kind": "append", "node_id": None, "raw": None}
        yield plans.INSERT_RECORDS, record  # no such session: a foreign key

    with SessionStore(database_url) as store:
        with (
            pytest.raises(DatabaseError, match=r"logging an orphan failed: .*(FOREIGN|foreign)"),
            translate_database_errors("logging an orphan"),
            store.transaction(write=True) as connection,
        ):
            drive(on_default(orphan_record()), connection)
        assert store.list_sessions() == []


@pytest.mark.parametrize("prepare", [True, False], ids=["prepared", "core"])
def test_a_driver_error_comes_as_sqlalchemy_raises_it_whichever_way_the_step_ran(
    database_url: str, prepare: bool
) -> None:
    """One kind of error for the store to translate: a prepared statement's driver error is
    SQLAlchemy's `IntegrityError` (a `DBAPIError`), with the driver's own error as `orig`."""
    insert = plans.INSERT_RECORDS.statement
    record = {"session_id": "nobody", "kind": "append", "node_id": None, "raw": None}

    def orphan_record() -> plans.Plan[None]:
        yield (plans.INSERT_RECORDS if prepare else insert), record

    with (
        SessionStore(database_url) as store,
        pytest.raises(sqlalchemy.exc.IntegrityError) as raised,
        store.transaction(write=True) as connection,
    ):
        drive(on_default(orphan_record()), connection)
    assert type(raised.value.orig).__module__.split(".")[0] in ("sqlite3", "psycopg")


def test_paused_gc_nests_across_threads_and_restores_the_collector_once() -> None:
    assert gc.isenabled()
    inside = threading.Barrier(2)
    states: list[bool] = []

    def worker() -> None:
        with paused_gc():
            inside.wait()  # both threads are inside their pause here
            states.append(gc.isenabled())
            inside.wait()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert states == [False, False]
    assert gc.isenabled()


def test_paused_gc_leaves_a_disabled_collector_disabled() -> None:
    gc.disable()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_paused_gc_ages_what_it_built_without_a_collection() -> None:
    """What a pause built goes to the oldest generation at once: the first allocation after
    it does not scan it all (a young generation's count back at zero), and it stays
    collectable (nothing left frozen)."""
    collected: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collected.append(info["generation"])

    gc.collect()
    gc.callbacks.append(note)
    try:
        with paused_gc():
            built = [[n] for n in range(50_000)]
        after = [[n] for n in range(100)]  # allocations that would trigger the deferred scan
    finally:
        gc.callbacks.remove(note)
    assert collected == []
    assert gc.get_freeze_count() == 0
    del after
    assert gc.is_tracked(built[-1])
    del built


def test_paused_gc_leaves_an_applications_frozen_objects_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with paused_gc():
            built = [[n] for n in range(10_000)]
        assert gc.get_freeze_count() == frozen
        del built
    finally:
        gc.unfreeze()


def test_loading_a_session_reads_its_nodes_in_stored_order_from_an_index(
    database_url: str,
) -> None:
    """No sort of the session's rows: an index on (tenant, session_id, pk) gives them in order."""
    with SessionStore(database_url) as store, store.transaction(write=False) as connection:
        sql = nodes._SESSION_NODES.compiled(connection.dialect).sql
        cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        if store.dialect == "sqlite":
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}", {"session_id": "s", TENANT_KEY: ""})
        else:  # with an empty table the planner would scan; ask what it does when it cannot
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL enable_bitmapscan = off")
            cursor.execute(f"EXPLAIN {sql}", {"session_id": "s", TENANT_KEY: ""})
        plan = " ".join(str(row[-1]) for row in cursor.fetchall())
    assert "ix_nodes_tenant_session_id_pk" in plan, plan
    assert "TEMP B-TREE" not in plan, plan  # SQLite's sort
    assert "Sort" not in plan, plan  # PostgreSQL's
