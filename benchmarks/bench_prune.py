"""`prune(expired=True)` of 10,000 expired sessions among --kept others: time and peak memory.

Fills a store with --sessions expired sessions of --turns turns each (their `expires_at` set in
the past) and --kept sessions that do not expire, twice (a copy of the SQLite file; a second
PostgreSQL schema). On one copy the floor runs: the least SQL that deletes the same sessions
(unlink the parents, then `DELETE FROM sessions WHERE expires_at <= now`, the cascades and
SQLite's full-text triggers doing the rest), on the raw driver in one transaction. On the other,
a dry run under `tracemalloc` (the peak of Python's allocations while the report is built), then
the deleting `prune` itself, timed. Both copies must end with the same sessions.

    python benchmarks/bench_prune.py [--sessions 10000] [--turns 4] [--kept 1000] [--postgres URL]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
import time
import tracemalloc
from pathlib import Path

import sqlalchemy
from scratch_schemas import FreshSchemas

from memstore import SessionStore

GOAL_RATIO = 3.0
"""The prune at most this many times the floor's time."""

UNLINK = (
    "UPDATE nodes SET parent_id = NULL WHERE parent_id IS NOT NULL AND session_id IN "
    "(SELECT id FROM sessions WHERE expires_at <= {now})"
)
DELETE = "DELETE FROM sessions WHERE expires_at <= {now}"


def fill(store: SessionStore, sessions: int, turns: int, kept: int) -> None:
    """`sessions` sessions to expire and `kept` ones to keep, `turns` turns each."""
    for number in range(sessions + kept):
        name = f"old-{number:06d}" if number < sessions else f"new-{number:06d}"
        store.append_many(
            name,
            [
                {"role": "user", "blocks": [{"kind": "text", "text": f"turn {i} of {name}"}]}
                for i in range(turns)
            ],
        )


def expire_old(engine: sqlalchemy.Engine) -> None:
    with engine.begin() as connection:
        connection.execute(
            sqlalchemy.text("UPDATE sessions SET expires_at = 1 WHERE id LIKE 'old-%'")
        )


def measure(store: SessionStore, now: int) -> tuple[float, float, int]:
    """(seconds of the deleting prune, peak MB of a dry run's allocations, sessions pruned)."""
    tracemalloc.start()
    dry = store.prune(expired=True, now=now)
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    start = time.perf_counter()
    done = store.prune(expired=True, now=now, dry_run=False)
    seconds = time.perf_counter() - start
    assert done.sessions == dry.sessions
    return seconds, peak, len(done.sessions)


def sqlite_side(args: argparse.Namespace, now: int) -> tuple[float, float, float, int]:
    with tempfile.TemporaryDirectory() as folder:
        first, second = Path(folder) / "a.db", Path(folder) / "b.db"
        store = SessionStore(f"sqlite:///{first}")
        fill(store, args.sessions, args.turns, args.kept)
        expire_old(store.engine)
        store.close()
        shutil.copy(first, second)
        connection = sqlite3.connect(second, isolation_level=None)
        connection.execute("PRAGMA foreign_keys = ON")
        start = time.perf_counter()
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(UNLINK.format(now=now))
        connection.execute(DELETE.format(now=now))
        connection.execute("COMMIT")
        floor = time.perf_counter() - start
        left = connection.execute("SELECT count(*) FROM sessions").fetchone()[0]
        connection.close()
        store = SessionStore(f"sqlite:///{first}")
        seconds, peak, pruned = measure(store, now)
        assert len(store.list_sessions()) == left == args.kept
        store.close()
    return floor, seconds, peak, pruned


def postgres_side(args: argparse.Namespace, now: int) -> tuple[float, float, float, int]:
    with FreshSchemas(args.postgres) as schemas:
        stores = [SessionStore(schemas.new_url()) for _ in range(2)]
        for store in stores:
            fill(store, args.sessions, args.turns, args.kept)
            expire_old(store.engine)
        start = time.perf_counter()
        with stores[1].engine.begin() as connection:
            connection.execute(sqlalchemy.text(UNLINK.format(now=now)))
            connection.execute(sqlalchemy.text(DELETE.format(now=now)))
        floor = time.perf_counter() - start
        seconds, peak, pruned = measure(stores[0], now)
        assert stores[0].list_sessions() == stores[1].list_sessions()
        for store in stores:
            store.close()
    return floor, seconds, peak, pruned


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--kept", type=int, default=1_000)
    parser.add_argument("--postgres", help="also measure against this PostgreSQL database")
    args = parser.parse_args()
    now = int(time.time() * 1000)
    sides = [("SQLite", sqlite_side)]
    if args.postgres:
        sides.append(("PostgreSQL", postgres_side))
    failed = False
    for name, side in sides:
        floor, seconds, peak, pruned = side(args, now)
        ratio = seconds / floor
        failed |= ratio > GOAL_RATIO
        print(
            f"{name}: prune of {pruned:,} expired sessions ({args.turns} turns each, "
            f"{args.kept:,} kept) {seconds:.2f} s, floor {floor:.2f} s, {ratio:.1f}x "
            f"(goal {GOAL_RATIO}x); a dry run's peak allocations {peak:.1f} MB"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
