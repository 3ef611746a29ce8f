"""The framework adapters on memstore, as ratios measured in one process.

OpenAI Agents SDK (`--part openai`): its session on memstore against the SDK's own sessions.

Same process, same items, each on a new SQLite file: per conversation turn, what the Runner does,
`get_items()` (the whole history) and then `add_items` of that turn's four items (a question, a
tool call, its output, the answer). Sides: the SDK's `SQLiteSession` (the floor) and its
`SQLAlchemySession` (aiosqlite), memstore's `MemstoreSession` on a `SessionStore` (its calls in a
worker thread, as the SDK's SQLiteSession does) and on an `AsyncSessionStore`. Goal: memstore at
most 1.2x the time of `SQLiteSession`, and faster than `SQLAlchemySession`. Best of the rounds.

Claude Agent SDK (`--part claude`): `--entries` single-entry appends (a user or assistant
entry with a `uuid`, as the SDK's transcript mirror sends them) through `MemstoreSessionStore`,
on a SQLite file with a `SessionStore` and with an `AsyncSessionStore` (and on PostgreSQL with
`--postgres URL`); the floor is the same adapter's first thousand appends: goal, the last
thousand at most 1.2x the first (each append looks its uuid up by index, in its transaction).

    python benchmarks/bench_frameworks.py [--part all|openai|claude] [--turns 100] [--rounds 3]
        [--entries 10000] [--postgres URL]
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
from memstore.integrations._history import AnyStore
from memstore.integrations.claude_agent_sdk import MemstoreSessionStore
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


def claude_entry(n: int) -> Any:
    """One transcript entry as the Claude Agent SDK appends it."""
    role = "user" if n % 2 == 0 else "assistant"
    return {
        "type": role,
        "uuid": f"00000000-0000-4000-8000-{n:012d}",
        "parentUuid": f"00000000-0000-4000-8000-{n - 1:012d}" if n else None,
        "sessionId": "bench",
        "timestamp": "2026-12-06T00:00:00.000Z",
        "message": {"role": role, "content": f"entry {n}: " + "the upload test fails " * 10},
    }


async def claude_appends(store: AnyStore, entries: int) -> list[float]:
    """Seconds of each of `entries` single-entry appends through the adapter."""
    adapter = MemstoreSessionStore(store)
    key: Any = {"project_key": "bench", "session_id": "bench"}
    times = []
    for n in range(entries):
        start = time.perf_counter()
        await adapter.append(key, [claude_entry(n)])
        times.append(time.perf_counter() - start)
    await adapter.append(key, [claude_entry(0)])  # a repeat: skipped
    loaded = await adapter.load(key)
    assert loaded is not None
    assert len(loaded) == entries
    return times


async def claude_side(url: str, flavour: str, entries: int) -> list[float]:
    if flavour == "sync":
        with SessionStore(url) as store:
            return await claude_appends(store, entries)
    async with AsyncSessionStore(url) as store:
        return await claude_appends(store, entries)


def claude(entries: int, postgres: str | None) -> None:
    """The Claude Agent SDK part (see the module's docstring)."""
    block = 1000
    print(f"Claude Agent SDK: {entries} single-entry appends, last {block} vs first {block}:")
    with tempfile.TemporaryDirectory() as folder:
        urls = {"SQLite": f"sqlite:///{Path(folder) / 'claude-%s.db'}"}
        if postgres:
            urls["PostgreSQL"] = postgres
        for backend, url in urls.items():
            for flavour in ("sync", "async"):
                if backend == "PostgreSQL":
                    with SessionStore(url) as store:  # a clean start: the bench's session only
                        store.delete_session("bench~bench")
                times = asyncio.run(claude_side(url.replace("%s", flavour), flavour, entries))
                first, last = sum(times[:block]), sum(times[-block:])
                ratio = last / first
                verdict = "ok" if ratio <= GOAL else "MISSED"
                print(f"  {backend} {flavour:5} first {first / block * 1000:6.2f} ms/append, "
                      f"last {last / block * 1000:6.2f} ms/append: {ratio:.2f}x "
                      f"(goal <= {GOAL}x): {verdict}")  # fmt: skip


def openai(turns: int, rounds: int) -> None:
    """The OpenAI Agents SDK part (see the module's docstring)."""
    best = dict.fromkeys(SIDES, float("inf"))
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(rounds):
            for number, (name, side) in enumerate(SIDES.items()):
                path = Path(folder) / f"{round_}-{number}.db"
                best[name] = min(best[name], asyncio.run(side(path, turns)))
    floor = best["SQLiteSession (floor)"]
    print(f"{turns} turns of get_items + add_items (4 items), best of {rounds}:")
    for name, seconds in best.items():
        print(f"  {name:28} {seconds * 1000:8.1f} ms  {seconds / floor:5.2f}x the floor")
    for name in ("memstore SessionStore", "memstore AsyncSessionStore"):
        ratio = best[name] / floor
        beats = best[name] < best["SQLAlchemySession"]
        verdict = "ok" if ratio <= GOAL and beats else "MISSED"
        print(f"{name}: {ratio:.2f}x SQLiteSession (goal <= {GOAL}x), "
              f"{'beats' if beats else 'slower than'} SQLAlchemySession: {verdict}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["all", "openai", "claude"], default="all")
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--postgres", help="also run the Claude part on this PostgreSQL URL")
    args = parser.parse_args()
    if args.part in ("all", "openai"):
        openai(args.turns, args.rounds)
    if args.part in ("all", "claude"):
        claude(args.entries, args.postgres)


if __name__ == "__main__":
    main()
