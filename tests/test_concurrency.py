"""Several processes writing and reading one database: no lost appends, no silent forks, no
lock errors, and no reader ever sees a node without its parent."""

from __future__ import annotations

import itertools
import multiprocessing
import os
from pathlib import Path

import pytest
import sqlalchemy

from memstore import HeadMovedError, SessionGraph, SessionStore
from memstore.store import create_store_engine

pytestmark = pytest.mark.slow  # threads and processes writing at once

WORKERS = 4
APPENDS = 300
CAS_APPENDS = 25


def _say(worker: int, n: int) -> dict[str, object]:
    return {"role": "user", "blocks": [{"kind": "text", "text": f"worker {worker} turn {n}"}]}


def _append_many(url: str, worker: int, appends: int = APPENDS) -> None:
    """`appends` appends to a private session and as many to a shared one (last writer wins)."""
    store = SessionStore(url)
    clock = itertools.count(1_000_000 * worker)
    for session_id in (f"private-{worker}", "shared"):
        graph = SessionGraph(session_id, clock=clock.__next__)
        for n in range(appends):
            store.append_node(session_id, graph.append(_say(worker, n)))
    store.close()


def _append_with_compare_and_set(url: str, worker: int) -> int:
    """Appends through a handle (compare-and-set), refreshing and retrying when beaten."""
    store = SessionStore(url)
    retries = 0
    shared = store.session("chain")
    for n in range(CAS_APPENDS):
        while True:
            try:
                shared.append(_say(worker, n), expected_head=shared.head)
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


HEAD_WRITERS = 8
HEAD_APPENDS = 40


def _append_at_the_head(url: str, worker: int) -> None:
    """Appends at the shared session's head, half through the store and half through a handle,
    with no retry code: any error fails the test."""
    store = SessionStore(url)
    handle = store.session("at-head")
    for n in range(HEAD_APPENDS):
        if n % 2:
            handle.append(_say(worker, n))
        else:
            store.append("at-head", _say(worker, n))
    store.close()


def test_eight_processes_appending_at_the_head_make_one_linear_chain(database_url: str) -> None:
    SessionStore(database_url).close()  # migrate once, up front
    context = multiprocessing.get_context("spawn")
    with context.Pool(HEAD_WRITERS) as pool:
        pool.starmap(_append_at_the_head, [(database_url, w) for w in range(HEAD_WRITERS)])
    total = HEAD_WRITERS * HEAD_APPENDS
    with SessionStore(database_url) as store:
        path = store.load_path_nodes("at-head")
        assert len(path) == total == store.load_session("at-head").size
        assert all(child.parent == parent.id for parent, child in itertools.pairwise(path))
        texts = sorted(node.turn.to_json()["blocks"][0]["text"] for node in path)
        expected = sorted(
            f"worker {w} turn {n}" for w in range(HEAD_WRITERS) for n in range(HEAD_APPENDS)
        )
        assert texts == expected  # every append landed exactly once
    assert _count(database_url, "SELECT count(*) FROM records") == total


MIXED_WRITERS = 8
MIXED_READERS = 3
MIXED_APPENDS = 100


def _read_until(url: str, stop: str) -> tuple[list[int], list[str]]:
    """Load, walk and search the shared session until `stop` exists; every node a reader sees
    must have its parent, and every head and hit must name a stored node."""
    store = SessionStore(url)
    sizes: list[int] = []  # the shared session's size at each read
    problems: list[str] = []
    while not os.path.exists(stop) or not sizes:
        graph = store.load_session("shared")
        sizes.append(graph.size)
        for node in graph.all():
            if node.parent is not None and graph.get(node.parent) is None:
                problems.append(f"{node.id} without its parent {node.parent}")
        if graph.leaf is not None and graph.get(graph.leaf) is None:
            problems.append(f"head {graph.leaf} names no node")
        path = store.load_path_nodes("shared")
        if any(child.parent != parent.id for parent, child in itertools.pairwise(path)):
            problems.append("a path with a gap")
        for hit in store.search("worker turn", session_id="shared", limit=5):
            if store.load_path_nodes("shared", hit.node_id) == []:
                problems.append(f"hit {hit.node_id} names no node")
    store.close()
    return sizes, problems


def test_eight_writers_and_three_readers_at_once(database_url: str, tmp_path: Path) -> None:
    SessionStore(database_url).close()  # migrate once, up front
    stop = str(tmp_path / "stop")
    context = multiprocessing.get_context("spawn")
    with context.Pool(MIXED_WRITERS + MIXED_READERS) as pool:
        readers = [
            pool.apply_async(_read_until, (database_url, stop)) for _ in range(MIXED_READERS)
        ]
        writers = pool.starmap_async(
            _append_many,
            [(database_url, worker, MIXED_APPENDS) for worker in range(MIXED_WRITERS)],
        )
        writers.get(timeout=600)  # re-raises any writer's error (a lock error included)
        Path(stop).touch()
        results = [reader.get(timeout=600) for reader in readers]
    assert [problems for _, problems in results] == [[]] * MIXED_READERS
    total = MIXED_WRITERS * MIXED_APPENDS
    seen = {size for sizes, _ in results for size in sizes}
    assert any(0 < size < total for size in seen), "no read overlapped the writers"
    with SessionStore(database_url) as store:
        for worker in range(MIXED_WRITERS):
            assert len(store.load_path(f"private-{worker}")) == MIXED_APPENDS
        shared = store.load_session("shared")
        assert shared.size == MIXED_WRITERS * MIXED_APPENDS
        assert shared.leaf is not None
        assert shared.get(shared.leaf) is not None
    appends = 2 * MIXED_WRITERS * MIXED_APPENDS
    assert _count(database_url, "SELECT count(*) FROM records") == appends
    assert _count(database_url, "SELECT count(*) FROM nodes") == appends


def _connect(url: str) -> str:
    engine = create_store_engine(url)
    try:
        with engine.connect() as connection:
            return str(connection.exec_driver_sql("PRAGMA journal_mode").scalar())
    finally:
        engine.dispose()


def test_processes_racing_to_open_fresh_sqlite_files_all_get_wal(tmp_path: Path) -> None:
    """Switching a fresh file to WAL takes a lock SQLite's busy handler does not wait for: the
    connections that lost the race got "database is locked" at once (about 1 in 70 here)."""
    files = [f"sqlite:///{tmp_path / f'fresh{n}.db'}" for n in range(40)]
    with multiprocessing.get_context("spawn").Pool(8) as pool:
        for url in files:
            assert pool.map(_connect, [url] * 8) == ["wal"] * 8
