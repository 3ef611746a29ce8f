"""PostgreSQL's asyncio connection for the async store: a read whose bytes have arrived already
is read at once, without a turn of the event loop.

psycopg's asyncio connection waits for every read through the event loop (a reader callback, a
future, the loop's select, the callback removed), even when the server's answer is in the socket
already; only writes are tried at once. A large result comes in many reads: a load of 1,000
turns (about 300 KB) took about 30, most of them with their bytes there already, and in the
async store each such wait is two greenlet switches too (`aio`): about a fifth of the load's
CPU time, which the sync driver, waiting in C, does not spend. `ReadyReadsConnection` asks the
socket first (a poll with timeout 0, which never waits) and goes through the loop only when
nothing has arrived, or once `BUSY_SECONDS` of reads have gone by without a turn of the loop,
so that a long result still lets the loop's other tasks in.
"""

from __future__ import annotations

import select
import time
from typing import Any, TypeVar

import psycopg
from psycopg.abc import PQGen
from psycopg.waiting import Ready, Wait

__all__ = ["BUSY_SECONDS", "ReadyReadsConnection"]

RV = TypeVar("RV")

BUSY_SECONDS = 0.002
"""How long one wait reads without a turn of the event loop (`handoff.LOOP_BUDGET_SECONDS`)."""


def _ready_now(fileno: int, wait: Wait) -> Ready | int:
    """What the socket can do now without waiting (of `wait`'s directions), or 0."""
    if not hasattr(select, "poll"):  # Windows: every wait goes through the loop
        return 0
    wanted = (select.POLLIN if wait & Wait.R else 0) | (select.POLLOUT if wait & Wait.W else 0)
    poller = select.poll()
    poller.register(fileno, wanted)
    events = sum(happened for _, happened in poller.poll(0))  # one socket: one entry at most
    if events & ~wanted:  # a hang-up or an error: the connection's own wait reports it
        return 0
    return (Ready.R if events & select.POLLIN else 0) | (Ready.W if events & select.POLLOUT else 0)


def _answered_at_once(gen: PQGen[RV], fileno: int) -> PQGen[RV]:
    """`gen`, with each wait the socket can answer now answered here; the others yielded to the
    connection's wait, as are all once `BUSY_SECONDS` have gone by since the loop's last turn."""
    since = time.monotonic()
    try:
        wait = next(gen)
        while True:
            ready = _ready_now(fileno, wait) if time.monotonic() - since < BUSY_SECONDS else 0
            if not ready:
                ready = yield wait
                since = time.monotonic()
            wait = gen.send(ready)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


class ReadyReadsConnection(psycopg.AsyncConnection[Any]):
    """psycopg's asyncio connection, reading what has arrived without a turn of the loop."""

    async def wait(self, gen: PQGen[RV], *args: Any, **kwargs: Any) -> RV:
        """As psycopg's, each wait the socket can answer now answered at once."""
        return await super().wait(_answered_at_once(gen, self.pgconn.socket), *args, **kwargs)
