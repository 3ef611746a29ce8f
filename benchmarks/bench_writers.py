"""Many writers on one database: P processes appending at once, memstore against the stores a
Python user would otherwise pick and a raw floor, on the same backend in the same run.

Each of `--processes` processes (default 8) appends `--appends` turns, one durable turn per
call, timing each call; they start together (a barrier, after each has opened its store). Two
modes: `own`, each process to a session of its own; `shared`, every process to one of 4
sessions they all share. Sides:

- floor: the raw driver, an INSERT of one row and a COMMIT per call, into one table (`sqlite3`
  in WAL with `synchronous=NORMAL` and a busy timeout as memstore's; psycopg 3);
- `SQLiteSession` (SQLite only) and `SQLAlchemySession` (aiosqlite; psycopg on PostgreSQL): the
  OpenAI Agents SDK's sessions, `add_items` of one item per call;
- memstore: `SessionStore.append` per call.

Prints, per backend, mode and side: appends per second (all processes, from the barrier to the
last one's end), p50 and p99 of one call, errors, and whether every turn is stored: each
session holds exactly the turns appended to it, each process's in the order it appended them,
and for memstore one linear chain (as many nodes as its path from the root to the head). Goals:
no errors and exact counts; memstore's throughput at least the best framework store's on each
backend and mode, and on PostgreSQL within 3x of the floor's; memstore's p99 at most 10x its p50.

    python benchmarks/bench_writers.py [--processes 8] [--appends 200] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sqlite3
import statistics
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from scratch_schemas import FreshSchemas

SHARED_SESSIONS = 4
MODES = ("own", "shared")


def session_of(mode: str, worker: int) -> str:
    return f"w{worker}" if mode == "own" else f"shared{worker % SHARED_SESSIONS}"


def text(worker: int, n: int) -> str:
    """About 200 bytes, naming its writer and its place in the writer's order."""
    return f"worker {worker} turn {n}: " + "the upload fails when the timeout is short " * 4


def parse(stored: str) -> tuple[int, int]:
    """(worker, n) of a turn's text."""
    head = stored.split(":", 1)[0].split()
    return int(head[1]), int(head[3])


@dataclass
class Target:
    """Where a side writes: a SQLite file or a PostgreSQL schema."""

    backend: str
    sqlite_path: str = ""
    pg_url: str = ""
    schema: str = ""

    def pg_options(self) -> str:
        return f"-csearch_path={self.schema}"

    def memstore_url(self) -> str:
        if self.backend == "sqlite":
            return f"sqlite:///{self.sqlite_path}"
        separator = "&" if "?" in self.pg_url else "?"
        return f"{self.pg_url}{separator}options=-csearch_path%3D{self.schema}"

    def sqlalchemy_url(self) -> str:
        if self.backend == "sqlite":
            return f"sqlite+aiosqlite:///{self.sqlite_path}"
        url = self.memstore_url()
        return url.replace("postgresql://", "postgresql+psycopg://", 1)


# --- the sides: each an appender factory, run in the worker process ----------------------------

Append = Callable[[str, str], None]


def floor_sqlite(target: Target) -> tuple[Append, Callable[[], None]]:
    connection = sqlite3.connect(target.sqlite_path, isolation_level=None, timeout=60)
    connection.execute("PRAGMA synchronous = NORMAL")

    def append(session: str, turn: str) -> None:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO turns (session, body) VALUES (?, ?)", (session, turn))
        connection.execute("COMMIT")

    return append, connection.close


def floor_postgres(target: Target) -> tuple[Append, Callable[[], None]]:
    import psycopg

    connection = psycopg.connect(target.pg_url, options=target.pg_options())

    def append(session: str, turn: str) -> None:
        connection.execute(
            "INSERT INTO turns (session, body) VALUES (%s, %s)", (session, turn), prepare=True
        )
        connection.commit()

    return append, connection.close


def memstore_side(target: Target) -> tuple[Append, Callable[[], None]]:
    from memstore import SessionStore

    store = SessionStore(target.memstore_url())

    def append(session: str, turn: str) -> None:
        store.append(session, {"role": "user", "blocks": [{"kind": "text", "text": turn}]})

    return append, store.close


def _on_a_loop(make: Callable[[], Any]) -> tuple[Append, Callable[[], None]]:
    """An SDK session (async) driven from a loop of the worker's own, one per session id. The
    SDK is imported here, before the writers start together (in the first append, its second
    of import in each process counted as the side's time)."""
    runner = asyncio.Runner()
    sessions: dict[str, Any] = {}
    opened = make()

    def append(session: str, turn: str) -> None:
        if session not in sessions:
            sessions[session] = opened(session)
        item = {"role": "user", "content": turn}
        runner.run(sessions[session].add_items([item]))

    def close() -> None:
        for session in sessions.values():
            if hasattr(session, "close"):
                session.close()
            else:
                runner.run(session._engine.dispose())
        runner.close()

    return append, close


def sqlite_session(target: Target) -> tuple[Append, Callable[[], None]]:
    def make() -> Callable[[str], Any]:
        from agents.memory import SQLiteSession

        return lambda session: SQLiteSession(session, target.sqlite_path)

    return _on_a_loop(make)


def sqlalchemy_session(target: Target) -> tuple[Append, Callable[[], None]]:
    def make() -> Callable[[str], Any]:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        return lambda session: SQLAlchemySession.from_url(session, url=target.sqlalchemy_url())

    return _on_a_loop(make)


SIDES: dict[str, Callable[[Target], tuple[Append, Callable[[], None]]]] = {
    "floor (raw driver)": floor_sqlite,
    "SQLiteSession": sqlite_session,
    "SQLAlchemySession": sqlalchemy_session,
    "memstore": memstore_side,
}


# --- the worker processes ------------------------------------------------------------------------

_barrier: Any = None


def _init(barrier: Any) -> None:
    global _barrier
    _barrier = barrier


def work(side: str, target: Target, mode: str, worker: int, appends: int) -> dict[str, Any]:
    """One process's appends: each call's seconds, the errors, when it started and ended."""
    make = floor_postgres if side.startswith("floor") and target.backend != "sqlite" else None
    append, close = (make or SIDES[side])(target)
    times: list[float] = []
    errors: list[str] = []
    session = session_of(mode, worker)
    _barrier.wait()
    began = time.perf_counter()
    for n in range(appends):
        start = time.perf_counter()
        try:
            append(session, text(worker, n))
        except Exception as error:  # counted and shown: the benchmark's point
            errors.append(f"{type(error).__name__}: {str(error).splitlines()[0][:120]}")
        times.append(time.perf_counter() - start)
    ended = time.perf_counter()
    close()
    return {"times": times, "errors": errors, "began": began, "ended": ended}


# --- preparing and checking a side's database ---------------------------------------------------


def prepare(side: str, target: Target) -> None:
    """Create the side's tables once, before the writers start (they would race to)."""
    if side.startswith("floor"):
        if target.backend == "sqlite":
            connection: Any = sqlite3.connect(target.sqlite_path)
            connection.execute("PRAGMA journal_mode = WAL")
            sql = "CREATE TABLE turns (pk INTEGER PRIMARY KEY, session TEXT, body TEXT)"
            connection.execute(sql)
            connection.commit()
            connection.close()
        else:
            import psycopg

            with psycopg.connect(target.pg_url, options=target.pg_options()) as connection:
                connection.execute(
                    "CREATE TABLE turns (pk BIGSERIAL PRIMARY KEY, session TEXT, body TEXT)"
                )
    elif side == "memstore":
        from memstore import SessionStore

        SessionStore(target.memstore_url()).close()
    elif side == "SQLiteSession":
        from agents.memory import SQLiteSession

        SQLiteSession("setup", target.sqlite_path).close()
        connection = sqlite3.connect(target.sqlite_path)
        connection.execute("PRAGMA journal_mode = WAL")  # as memstore's and the floor's
        connection.close()
    else:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        async def create() -> None:
            session = SQLAlchemySession.from_url(
                "setup", url=target.sqlalchemy_url(), create_tables=True
            )
            await session.get_items()
            await session._engine.dispose()

        asyncio.run(create())


def stored(side: str, target: Target, session: str) -> tuple[list[str], bool]:
    """A session's turns' texts in stored order, and whether they form one linear chain."""
    if side.startswith("floor"):
        sql = "SELECT body FROM turns WHERE session = {} ORDER BY pk"
        if target.backend == "sqlite":
            connection = sqlite3.connect(target.sqlite_path)
            rows = connection.execute(sql.format("?"), (session,)).fetchall()
            connection.close()
        else:
            import psycopg

            with psycopg.connect(target.pg_url, options=target.pg_options()) as pg:
                rows = pg.execute(sql.format("%s"), (session,)).fetchall()
        return [body for (body,) in rows], True
    if side == "memstore":
        from memstore import SessionStore

        with SessionStore(target.memstore_url()) as store:
            path = store.load_path(session)
            size = store.load_session(session).size
        return [turn.blocks[0].text for turn in path], size == len(path)  # type: ignore[union-attr]
    runner: Callable[[Coroutine[Any, Any, list[Any]]], list[Any]] = asyncio.run
    if side == "SQLiteSession":
        from agents.memory import SQLiteSession

        sdk: Any = SQLiteSession(session, target.sqlite_path)
        items = runner(sdk.get_items())
        sdk.close()
    else:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        async def read() -> list[Any]:
            session_ = SQLAlchemySession.from_url(session, url=target.sqlalchemy_url())
            try:
                return await session_.get_items()
            finally:
                await session_._engine.dispose()

        items = runner(read())
    return [item["content"] for item in items], True


def check(side: str, target: Target, mode: str, processes: int, appends: int) -> str:
    """'ok', or what is wrong with what was stored."""
    expected: dict[str, list[tuple[int, int]]] = {}
    for worker in range(processes):
        expected.setdefault(session_of(mode, worker), []).extend(
            (worker, n) for n in range(appends)
        )
    for session, turns in expected.items():
        texts, linear = stored(side, target, session)
        found = [parse(body) for body in texts]
        if sorted(found) != sorted(turns):
            return f"{session}: {len(found)} turns stored of {len(turns)}"
        if not linear:
            return f"{session}: not one linear chain"
        for worker in {worker for worker, _ in turns}:
            order = [n for w, n in found if w == worker]
            if order != sorted(order):
                return f"{session}: worker {worker}'s turns out of order"
    return "ok"


# --- running and reporting ----------------------------------------------------------------------


@dataclass
class Result:
    side: str
    throughput: float
    p50: float
    p99: float
    errors: list[str] = field(default_factory=list)
    check: str = ""


def run_side(
    pool: Any, side: str, target: Target, mode: str, processes: int, appends: int
) -> Result:
    prepare(side, target)
    args = [(side, target, mode, worker, appends) for worker in range(processes)]
    done = pool.starmap(work, args, chunksize=1)
    times = sorted(t for one in done for t in one["times"])
    wall = max(one["ended"] for one in done) - min(one["began"] for one in done)
    errors = [error for one in done for error in one["errors"]]
    return Result(
        side,
        (len(times) - len(errors)) / wall,
        statistics.median(times),
        times[min(len(times) - 1, int(len(times) * 0.99))],
        errors,
        check(side, target, mode, processes, appends),
    )


class Schemas(FreshSchemas):
    """Fresh schemas on the PostgreSQL server (dropped at the end), as targets."""

    def target(self) -> Target:
        return Target("postgresql", pg_url=self.url, schema=self.new())


def report(backend: str, mode: str, results: list[Result]) -> None:
    print(f"\n{backend}, {mode} sessions:")
    print(f"{'':22} {'appends/s':>10} {'p50':>9} {'p99':>9} {'p99/p50':>8} {'errors':>7}  stored")
    for r in results:
        print(
            f"{r.side:22} {r.throughput:10.0f} {r.p50 * 1e3:7.2f}ms {r.p99 * 1e3:7.2f}ms"
            f" {r.p99 / r.p50:7.1f}x {len(r.errors):7}  {r.check}"
        )
        for error in sorted(set(r.errors))[:3]:
            print(f"{'':24}{r.errors.count(error)} x {error}")
    ours = next(r for r in results if r.side == "memstore")
    verdicts = [f"p99 {ours.p99 / ours.p50:.1f}x p50 (goal <= 10x)"]
    frameworks = [r for r in results if "Session" in r.side]
    if frameworks:
        best = max(frameworks, key=lambda r: r.throughput)
        ratio = ours.throughput / best.throughput
        verdicts.append(f"throughput {ratio:.2f}x the best framework's ({best.side}; goal >= 1)")
    for floor in (r for r in results if r.side.startswith("floor")):
        goal = " (goal <= 3x)" if backend != "sqlite" else ""
        verdicts.append(f"the floor's throughput {floor.throughput / ours.throughput:.2f}x{goal}")
    print("memstore: " + "; ".join(verdicts))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--appends", type=int, default=200, help="per process")
    parser.add_argument("--postgres", metavar="URL", help="also on PostgreSQL at URL")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--sides", default="", help="comma-separated subset of the sides")
    args = parser.parse_args()
    chosen = [s for s in SIDES if not args.sides or s in args.sides.split(",")]
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(args.processes)
    print(f"{args.processes} processes x {args.appends} appends, one durable turn per call")
    with (
        context.Pool(args.processes, _init, (barrier,)) as pool,
        tempfile.TemporaryDirectory() as folder,
    ):
        backends = ["sqlite"] + (["postgresql"] if args.postgres else [])
        schemas = Schemas(args.postgres) if args.postgres else None
        try:
            for backend in backends:
                for mode in args.modes.split(","):
                    results = []
                    for side in chosen:
                        if side == "SQLiteSession" and backend != "sqlite":
                            continue
                        if backend == "sqlite":
                            target = Target("sqlite", sqlite_path=f"{folder}/{uuid.uuid4()}.db")
                        else:
                            assert schemas is not None
                            target = schemas.target()
                        try:
                            results.append(
                                run_side(pool, side, target, mode, args.processes, args.appends)
                            )
                        except Exception:  # a side that could not run at all
                            traceback.print_exc()
                    if any(r.side == "memstore" for r in results):
                        report(backend, mode, results)
        finally:
            if schemas is not None:
                schemas.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
