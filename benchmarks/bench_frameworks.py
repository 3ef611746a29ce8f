"""The OpenAI Agents SDK session on memstore against the SDK's own sessions, as ratios.

Same process, same items, each on a new SQLite file: per conversation turn, what the Runner does,
`get_items()` (the whole history) and then `add_items` of that turn's four items (a question, a
tool call, its output, the answer). Sides: the SDK's `SQLiteSession` (the floor) and its
`SQLAlchemySession` (aiosqlite), memstore's `MemstoreSession` on a `SessionStore` (its calls in a
worker thread, as the SDK's SQLiteSession does) and on an `AsyncSessionStore`. Goal: memstore at
most 1.2x the time of `SQLiteSession`, and faster than `SQLAlchemySession`. Best of the rounds.

    python benchmarks/bench_frameworks.py [--turns 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
from agents.memory import Session, SQLiteSession

from memstore import SessionStore
from memstore.integrations.openai_agents import MemstoreSession
from memstore.store.aio import AsyncSessionStore

GOAL = 1.2


def turn_items(n: int) -> list[Any]:
    """The four items of one conversation turn."""
    return [
        {"role": "user", "content": f"Question {n}: what does module {n % 17} do? " * 3},
        {
            "type": "function_call",
            "call_id": f"call_{n}",
            "name": "read_file",
            "arguments": f'{{"path":"src/module_{n % 17}.py","start":{n}}}',
        },
        {"type": "function_call_output", "call_id": f"call_{n}", "output": "def f():\n" * 20},
        {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{n}",
            "status": "completed",
            "content": [{"type": "output_text", "text": "It reads files. " * 8, "annotations": []}],
        },
    ]


async def converse(session: Session, turns: int) -> float:
    """Seconds for `turns` rounds of get_items + add_items."""
    start = time.perf_counter()
    for n in range(turns):
        await session.get_items()
        await session.add_items(turn_items(n))
    elapsed = time.perf_counter() - start
    assert len(await session.get_items()) == 4 * turns
    return elapsed


async def sqlite_session(path: Path, turns: int) -> float:
    session = SQLiteSession("bench", str(path))
    try:
        return await converse(session, turns)
    finally:
        session.close()


async def sqlalchemy_session(path: Path, turns: int) -> float:
    session = SQLAlchemySession.from_url(
        "bench", url=f"sqlite+aiosqlite:///{path}", create_tables=True
    )
    try:
        return await converse(session, turns)
    finally:
        await session._engine.dispose()


async def memstore_sync(path: Path, turns: int) -> float:
    with SessionStore(f"sqlite:///{path}") as store:
        return await converse(MemstoreSession("bench", store), turns)


async def memstore_async(path: Path, turns: int) -> float:
    async with AsyncSessionStore(f"sqlite:///{path}") as store:
        return await converse(MemstoreSession("bench", store), turns)


SIDES: dict[str, Callable[[Path, int], Coroutine[Any, Any, float]]] = {
    "SQLiteSession (floor)": sqlite_session,
    "SQLAlchemySession": sqlalchemy_session,
    "memstore SessionStore": memstore_sync,
    "memstore AsyncSessionStore": memstore_async,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    best = dict.fromkeys(SIDES, float("inf"))
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            for number, (name, side) in enumerate(SIDES.items()):
                path = Path(folder) / f"{round_}-{number}.db"
                best[name] = min(best[name], asyncio.run(side(path, args.turns)))
    floor = best["SQLiteSession (floor)"]
    print(f"{args.turns} turns of get_items + add_items (4 items), best of {args.rounds}:")
    for name, seconds in best.items():
        print(f"  {name:28} {seconds * 1000:8.1f} ms  {seconds / floor:5.2f}x the floor")
    for name in ("memstore SessionStore", "memstore AsyncSessionStore"):
        ratio = best[name] / floor
        beats = best[name] < best["SQLAlchemySession"]
        verdict = "ok" if ratio <= GOAL and beats else "MISSED"
        print(f"{name}: {ratio:.2f}x SQLiteSession (goal <= {GOAL}x), "
              f"{'beats' if beats else 'slower than'} SQLAlchemySession: {verdict}")  # fmt: skip


if __name__ == "__main__":
    main()
