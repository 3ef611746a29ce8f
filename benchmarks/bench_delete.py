"""Deleting one long session: `delete_session`, `prune` and `erase` of a 30,000-node session,
SQLite and PostgreSQL (issue 30).

Fills a store with four sessions of --nodes nodes each (a chain of user and assistant turns
with a tool call, usage on every assistant turn, a writer's key on every node: rows in every
table that refers to `nodes`), appended a thousand at a time. Then deletes one with
`delete_session`, one with `prune(older_than=...)` (its `updated_at` set back a year), one with
`erase(session_id=...)`, and the fourth with the floor: the least SQL a hand-written
application would run, on the raw driver in one transaction: each table's rows of the session
by its session id (records, block rows, usage, keys), the nodes (parents unlinked first), then
the session row. Each is timed alone; all must leave the store without a row of the session.

    python benchmarks/bench_delete.py [--nodes 30000] [--ways delete prune erase] [--postgres URL]

Goal: each at most 3x the floor (before migration 0027, a PostgreSQL delete of 30,000 nodes
ran for minutes: each node's cascade to `records` and `node_keys` read every row of its session).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

from scratch_schemas import scratch_schema

from memstore import SessionStore

GOAL_RATIO = 3.0
WAYS = ("delete", "prune", "erase")
CHUNK = 1_000
FLOOR = (
    "DELETE FROM records WHERE session_id = '{s}'",
    "DELETE FROM node_blocks WHERE session_id = '{s}'",
    "DELETE FROM node_usage WHERE session_id = '{s}'",
    "DELETE FROM node_keys WHERE session_id = '{s}'",
    "UPDATE nodes SET parent_id = NULL WHERE session_id = '{s}' AND parent_id IS NOT NULL",
    "DELETE FROM nodes WHERE session_id = '{s}'",
    "DELETE FROM sessions WHERE id = '{s}'",
)
TABLES = ("sessions", "nodes", "records", "node_blocks", "node_usage", "node_keys")


def turn(session_id: str, number: int) -> dict[str, object]:
    if number % 2 == 0:
        return {"role": "user", "blocks": [{"kind": "text", "text": f"question {number}"}]}
    call = {"kind": "tool_call", "id": f"c{number}", "name": "search", "input": {"q": "x"}}
    text = {"kind": "text", "text": f"answer {number} in {session_id}"}
    return {"role": "assistant", "blocks": [text, call]}


def fill(store: SessionStore, session_id: str, count: int) -> None:
    """`count` nodes, a chunk at a time, each with a key, every assistant turn with usage."""
    for start in range(0, count, CHUNK):
        numbers = range(start, min(start + CHUNK, count))
        usage = [
            {"model": "gpt-5", "input_tokens": 100 + n, "output_tokens": 20} if n % 2 else None
            for n in numbers
        ]
        store.append_keyed(
            session_id,
            [turn(session_id, n) for n in numbers],
            [f"key-{n}" for n in numbers],
            usage=usage,
        )


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def floor(store: SessionStore, session_id: str) -> None:
    connection = store.engine.raw_connection()
    try:
        cursor = connection.cursor()
        for statement in FLOOR:
            cursor.execute(statement.format(s=session_id))
        connection.commit()
    finally:
        connection.close()


def left_over(store: SessionStore) -> int:
    """Rows of the deleted sessions left in any table (every table but `sessions` has a
    session_id; only `keep` survives)."""
    with store.engine.connect() as connection:
        total = 0
        for table in TABLES:
            column = "id" if table == "sessions" else "session_id"
            total += connection.exec_driver_sql(
                f"SELECT count(*) FROM {table} WHERE {column} <> 'keep'"
            ).scalar_one()
        return int(total)


def measure(
    store: SessionStore, count: int, label: str, ways: Sequence[str]
) -> list[tuple[str, ...]]:
    names = (*ways, "floor")
    for name in (*names, "keep"):
        fill(store, name, count)
    with store.engine.begin() as connection:
        connection.exec_driver_sql("UPDATE sessions SET updated_at = 1 WHERE id = 'prune'")
        connection.exec_driver_sql("ANALYZE")
    deletes: dict[str, Callable[[], object]] = {
        "floor": lambda: floor(store, "floor"),
        "delete": lambda: store.delete_session("delete"),
        "prune": lambda: store.prune(older_than=timedelta(days=30), dry_run=False),
        "erase": lambda: store.erase(reason="bench", session_id="erase", dry_run=False),
    }
    times = {name: timed(deletes[name]) for name in names}
    assert left_over(store) == 0, "rows of a deleted session are left"
    assert store.list_sessions() == ["keep"]
    base = times["floor"]
    return [
        (label, name, f"{times[name]:.2f}", f"{base:.2f}", f"{times[name] / base:.1f}x")
        for name in names
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=30_000)
    parser.add_argument("--postgres", help="also on this PostgreSQL server (a fresh schema)")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument("--ways", nargs="+", default=WAYS, choices=WAYS, help="which to time")
    args = parser.parse_args()
    rows: list[tuple[str, ...]] = []
    if not args.no_sqlite:
        with (
            tempfile.TemporaryDirectory() as directory,
            SessionStore(f"sqlite:///{Path(directory) / 'delete.db'}") as store,
        ):
            rows += measure(store, args.nodes, "sqlite", args.ways)
    if args.postgres:
        with scratch_schema(args.postgres) as url, SessionStore(url) as store:
            rows += measure(store, args.nodes, "postgres", args.ways)
    print(f"deleting a session of {args.nodes:,} nodes (seconds)")
    print(f"{'backend':9} {'how':8} {'memstore':>9} {'floor':>9}  ratio")
    for backend, name, mine, base, ratio in rows:
        if name != "floor":
            print(f"{backend:9} {name:8} {mine:>9} {base:>9}  {ratio}")
    slow = [row for row in rows if row[1] != "floor" and float(row[4][:-1]) > GOAL_RATIO]
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
