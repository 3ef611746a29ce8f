"""PostgreSQL's asyncio connection reads what has arrived without a turn of the event loop
(`memstore.store.ready_reads`): the waits it answers itself, on real sockets, and the async
store's loads through it on the real server."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Generator, Iterator
from typing import Any

import pytest
from psycopg.waiting import Ready, Wait

from memstore import AsyncSessionStore, SessionStore
from memstore.store import ready_reads
from memstore.store.ready_reads import ReadyReadsConnection


@pytest.fixture
def sockets() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    try:
        yield ours, theirs
    finally:
        ours.close()
        theirs.close()


def one_read(sock: socket.socket) -> Generator[Wait, Ready | int, bytes]:
    """A driver's generator: wait until `sock` is readable, then read it."""
    ready = yield Wait.R
    assert ready & Ready.R
    return sock.recv(100)


def finished(gen: Generator[Wait, Ready | int, bytes]) -> bytes | None:
    """What `gen` returns when started, or None if it yields a wait instead."""
    try:
        next(gen)
    except StopIteration as done:
        value: bytes = done.value
        return value
    return None


def test_a_read_whose_bytes_have_arrived_is_answered_without_a_wait(
    sockets: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = sockets
    theirs.sendall(b"rows")
    assert finished(ready_reads._answered_at_once(one_read(ours), ours.fileno())) == b"rows"


def test_a_read_with_nothing_arrived_waits_through_the_connection(
    sockets: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = sockets
    gen = ready_reads._answered_at_once(one_read(ours), ours.fileno())
    assert next(gen) == Wait.R
    theirs.sendall(b"later")
    with pytest.raises(StopIteration) as done:
        gen.send(Ready.R)
    assert done.value.value == b"later"


def test_a_hang_up_is_left_to_the_connection_s_own_wait(
    sockets: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = sockets
    theirs.sendall(b"last")
    theirs.close()
    gen = ready_reads._answered_at_once(one_read(ours), ours.fileno())
    assert finished(gen) in (None, b"last")  # POLLHUP with the data: psycopg's wait sees it


def test_after_the_busy_budget_every_wait_goes_through_the_loop(
    sockets: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = sockets
    theirs.sendall(b"rows")
    monkeypatch.setattr(ready_reads, "BUSY_SECONDS", 0.0)
    assert finished(ready_reads._answered_at_once(one_read(ours), ours.fileno())) is None


def say(i: int) -> dict[str, Any]:
    return {"role": "user", "blocks": [{"kind": "text", "text": f"turn {i} " + "word " * 60}]}


def test_the_async_store_reads_postgresql_through_it_and_loads_what_the_sync_one_does(
    postgres_url: str,
) -> None:
    """A session of 600 turns (over 200 KB: many reads) loads alike through both stores."""
    with SessionStore(postgres_url) as sync_store:
        for i in range(600):
            sync_store.append("s", say(i))
        expected_graph = sync_store.load_session("s")
        expected_path = sync_store.load_path("s")

    async def load() -> tuple[Any, Any, type[Any]]:
        async with AsyncSessionStore(postgres_url) as store:
            graph, path = await store.load_session("s"), await store.load_path("s")
            async with store.engine.connect() as connection:
                raw = await connection.get_raw_connection()
                return graph, path, type(raw.driver_connection)

    graph, path, connection_class = asyncio.run(load())
    assert connection_class is ReadyReadsConnection
    assert [node.id for node in graph.all()] == [node.id for node in expected_graph.all()]
    assert graph.leaf == expected_graph.leaf
    assert [turn.to_json() for turn in path] == [turn.to_json() for turn in expected_path]
