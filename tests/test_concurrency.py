"""Several processes writing one database: no lost appends, no silent forks, no lock errors."""

from __future__ import annotations

import itertools
import multiprocessing

import sqlalchemy

from memstore import HeadMovedError, SessionGraph, SessionStore
from memstore.store import create_store_engine

WORKERS = 4
APPENDS = 300
CAS_APPENDS = 25


def _say(worker: int, n: int) -> dict[str, object]:
    return {"role": "user", "blocks": [{"kind": "text", "text": f"worker {worker} turn {n}"}]}


def _append_many(url: str, worker: int) -> None:
    """300 appends to a private session and 300 to a shared one (last writer wins)."""
    store = SessionStore(url)
    clock = itertools.count(1_000_000 * worker)
    for session_id in (f"private-{worker}", "shared"):
        graph = SessionGraph(session_id, clock=clock.__next__)
        for n in range(APPENDS):
            node = graph.append(_say(worker, n))
            store.append_node(session_id, node)
    store.close()


def _append_with_compare_and_set(url: str, worker: int) -> int:
    """Appends through a handle (compare-and-set), refreshing and retrying when beaten."""
    store = SessionStore(url)
    retries = 0
    shared = store.session("chain")
    for n in range(CAS_APPENDS):
        while True:
            try:
                shared.append(_say(worker, n))
                break
            except HeadMovedError:
                retries += 1
                shared.refresh()
    store.close()
    return retries


def _run(url: str, target: object) -> None:
    SessionStore(url).close()  # migrate once, up front
    context = multiprocessing.get_context("spawn")
    with context.Pool(WORKERS) as pool:
        pool.starmap(target, [(url, worker) for worker in range(WORKERS)])  # type: ignore[arg-type]


def _count(url: str, sql: str) -> int:
    engine = create_store_engine(url)
    try:
        with engine.connect() as connection:
            return int(connection.execute(sqlalchemy.text(sql)).scalar_one())
    finally:
        engine.dispose()


def test_four_processes_times_300_appends_lose_nothing(database_url: str) -> None:
    _run(database_url, _append_many)
    store = SessionStore(database_url)
    try:
        for worker in range(WORKERS):
            assert len(store.load_path(f"private-{worker}")) == APPENDS
        shared = store.load_session("shared")
        assert shared.size == WORKERS * APPENDS
        assert shared.leaf is not None
        assert shared.get(shared.leaf) is not None  # the head names a stored node
        assert len(shared.path_to(shared.leaf)) == APPENDS  # one worker's chain: last one wins
    finally:
        store.close()
    expected_records = 2 * WORKERS * APPENDS  # one append record per append_node call
    assert _count(database_url, "SELECT count(*) FROM records") == expected_records
    assert _count(database_url, "SELECT count(*) FROM nodes") == expected_records


def test_compare_and_set_keeps_a_shared_session_one_chain(database_url: str) -> None:
    _run(database_url, _append_with_compare_and_set)
    store = SessionStore(database_url)
    try:
        shared = store.load_session("chain")
        assert shared.size == WORKERS * CAS_APPENDS
        # Every append landed on the path: nobody forked or truncated the conversation.
        assert len(store.load_path("chain")) == WORKERS * CAS_APPENDS
    finally:
        store.close()
