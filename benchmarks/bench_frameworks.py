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

    python benchmarks/bench_frameworks.py [--part all|openai|claude|adk] [--turns 100] [--rounds 3]
        [--entries 10000] [--postgres URL]

Google ADK (`--part adk`): `list_sessions` of an app's 10,000 sessions (of 100 users, each with a
little state) and `get_session` of one 3,000-event session (all events, and the newest 20),
through memstore's `MemstoreSessionService` (on a SessionStore and on an AsyncSessionStore)
against ADK's own `DatabaseSessionService` (the floor; aiosqlite, or psycopg's async driver),
each service on a fresh SQLite file of one directory, or in a fresh schema of one PostgreSQL
server (`--postgres URL`); the same sessions and events written for each service first
(untimed, in bulk: ADK's ORM rows in one transaction; memstore's `append_merging_metadata`, one
call). Best of the rounds. The ratios are memstore's times over ADK's (below 1: faster).

    python benchmarks/bench_frameworks.py --part adk [--sessions 10000] [--events 3000]
        [--rounds 3] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
from agents.memory import Session, SQLiteSession
from google.adk.events import Event, EventActions
from google.adk.sessions import DatabaseSessionService
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.genai import types

from memstore import SessionStore
from memstore.integrations._history import AnyStore
from memstore.integrations.claude_agent_sdk import MemstoreSessionStore
from memstore.integrations.google_adk import (
    MemstoreSessionService,
    event_to_turn,
    memstore_session_id,
)
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
    parser.add_argument("--part", choices=["all", "openai", "claude", "adk"], default="all")
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=10_000, help="the ADK part's sessions")
    parser.add_argument("--events", type=int, default=3_000, help="the ADK part's long session")
    parser.add_argument("--postgres", help="also run the Claude and ADK parts on this URL")
    args = parser.parse_args()
    if args.part in ("all", "openai"):
        openai(args.turns, args.rounds)
    if args.part in ("all", "claude"):
        claude(args.entries, args.postgres)
    if args.part in ("all", "adk"):
        adk_section(args.sessions, args.events, args.rounds, args.postgres)


# Google ADK

ADK_APP = "bench"


async def maybe(value: Any) -> Any:
    """`value`, awaited if a store's method returned a coroutine (the async store's)."""
    return await value if asyncio.iscoroutine(value) else value


def adk_event(n: int) -> Event:
    """The n-th event of a conversation: a question, or an answer with a tool call and a
    state change."""
    if n % 2 == 0:
        parts = [types.Part(text=f"Question {n}: what does module {n % 17} do? " * 3)]
        return Event(
            invocation_id=f"inv-{n}",
            author="user",
            content=types.Content(role="user", parts=parts),
        )
    parts = [
        types.Part(text="It reads files. " * 8),
        types.Part(function_call=types.FunctionCall(id=f"c{n}", name="read", args={"n": n})),
    ]
    return Event(
        invocation_id=f"inv-{n - 1}",
        author="assistant",
        content=types.Content(role="model", parts=parts),
        actions=EventActions(state_delta={"turns": n, "user:seen": n}),
    )


async def fill_adk(service: DatabaseSessionService, sessions: int, events: int) -> str:
    """`sessions` sessions of 100 users, the first with `events` events, written in bulk into
    ADK's tables (through its ORM classes, one transaction); the first's id."""
    long = await service.create_session(app_name=ADK_APP, user_id="u0", state={"app:v": 1})
    schema = service._get_schema_classes()
    now = datetime.now(UTC)
    if service._uses_naive_datetime():
        now = now.replace(tzinfo=None)
    async with service.database_session_factory() as db:
        db.add_all(schema.StorageEvent.from_event(long, event) for event in adk_events(events))
        db.add_all(
            schema.StorageSession(
                app_name=ADK_APP,
                user_id=f"u{n % 100}",
                id=f"s{n}",
                state={"topic": f"t{n}"},
                create_time=now,
                update_time=now,
            )
            for n in range(1, sessions)
        )
        db.add_all(
            schema.StorageUserState(
                app_name=ADK_APP, user_id=f"u{n}", state={"n": n}, update_time=now
            )
            for n in range(1, 100)
        )
        await db.commit()
    return long.id


async def fill_memstore(service: MemstoreSessionService, sessions: int, events: int) -> str:
    """The same sessions and events, written in one `append_merging_metadata` call."""
    long = await service.create_session(app_name=ADK_APP, user_id="u0", state={"app:v": 1})
    merges: dict[str, dict[str, Any]] = {}
    for n in range(1, sessions):
        user, name = f"u{n % 100}", f"s{n}"
        merges[memstore_session_id(ADK_APP, user, name)] = {
            **{"agent": "google-adk", "scope": "session", "app_name": ADK_APP},
            **{"user_id": user, "session_id": name, "state": {"topic": f"t{n}"}},
            "update_time": time.time(),
        }
    for n in range(1, 100):
        merges[memstore_session_id(ADK_APP, f"u{n}")] = {
            **{"agent": "google-adk", "scope": "user", "app_name": ADK_APP, "user_id": f"u{n}"},
            "state": {"n": n},
        }
    turns = [event_to_turn(event) for event in adk_events(events)]
    sid = memstore_session_id(ADK_APP, "u0", long.id)
    await maybe(service.store.append_merging_metadata(sid, turns, merges))
    return long.id


def adk_events(events: int) -> list[Event]:
    """The conversation's events, one second apart."""
    found = [adk_event(n) for n in range(events)]
    for n, event in enumerate(found):
        event.timestamp = 1_800_000_000.0 + n
    return found


async def adk_times(
    service: BaseSessionService, long_id: str, sessions: int, events: int
) -> list[float]:
    """Seconds of list_sessions, get_session (all events), get_session (newest 20)."""
    times = []
    start = time.perf_counter()
    listed = await service.list_sessions(app_name=ADK_APP)
    times.append(time.perf_counter() - start)
    assert len(listed.sessions) == sessions
    for config in (None, GetSessionConfig(num_recent_events=20)):
        start = time.perf_counter()
        got = await service.get_session(
            app_name=ADK_APP, user_id="u0", session_id=long_id, config=config
        )
        times.append(time.perf_counter() - start)
        assert got is not None
        assert len(got.events) == (events if config is None else 20)
    return times


async def adk_side(name: str, url: str, sessions: int, events: int, rounds: int) -> list[float]:
    """Fill a service of kind `name` on `url`, then time its reads, best of `rounds`."""
    closing: Any
    if name == "DatabaseSessionService (floor)":
        driver = "sqlite+aiosqlite" if url.startswith("sqlite") else "postgresql+psycopg"
        service: BaseSessionService = DatabaseSessionService(driver + url[url.index(":") :])
        closing = service
    else:
        store: Any = (SessionStore if name.endswith("SessionStore ") else AsyncSessionStore)(url)
        service, closing = MemstoreSessionService(store), store
    try:
        if isinstance(service, DatabaseSessionService):
            long_id = await fill_adk(service, sessions, events)
        else:
            assert isinstance(service, MemstoreSessionService)
            long_id = await fill_memstore(service, sessions, events)
        best = [float("inf")] * 3
        for _ in range(rounds):
            best = [
                min(b, t)
                for b, t in zip(
                    best, await adk_times(service, long_id, sessions, events), strict=True
                )
            ]
        return best
    finally:
        await maybe(closing.close())


ADK_SIDES = (
    "DatabaseSessionService (floor)",
    "memstore SessionStore ",
    "memstore AsyncSessionStore",
)


def adk_section(sessions: int, events: int, rounds: int, postgres: str | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        urls = {name: f"sqlite:///{Path(folder) / f'{n}.db'}" for n, name in enumerate(ADK_SIDES)}
        adk_report("SQLite", urls, sessions, events, rounds)
    if postgres is not None:
        from scratch_schemas import FreshSchemas

        with FreshSchemas(postgres) as schemas:
            urls = {name: schemas.new_url() for name in ADK_SIDES}
            adk_report("PostgreSQL", urls, sessions, events, rounds)


def adk_report(backend: str, urls: dict[str, str], sessions: int, events: int, rounds: int) -> None:
    found = {
        name: asyncio.run(adk_side(name, url, sessions, events, rounds))
        for name, url in urls.items()
    }
    floor = found[ADK_SIDES[0]]
    what = (
        f"list_sessions ({sessions:,})",
        f"get_session ({events:,} events)",
        "get_session (newest 20)",
    )
    print(f"Google ADK on {backend}, best of {rounds}:")
    for index, label in enumerate(what):
        print(f"  {label}:")
        for name, times in found.items():
            ratio = times[index] / floor[index]
            print(f"    {name.strip():32} {times[index] * 1000:9.1f} ms  {ratio:5.2f}x the floor")


if __name__ == "__main__":
    main()
