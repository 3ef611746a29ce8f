"""`usage_stats(by=...)` (`memstore stats --by`) at 20,000 and 200,000 usage rows, SQLite and
PostgreSQL (issue 30).

Fills a store by bulk inserts with sessions of 20 nodes each, every node with a usage row (one
of four models, on one of 180 days); every tenth session is a fork of the one before it, which
holds copies of that session's first 10 nodes and their usage (the same node ids), as
`fork_session` writes them. Then times `usage_stats(by=)` for "session", "model" and "day".

The floor is raw SQL on the same tables in the same process, through the driver: the same sums
grouped the same way (for "day", joined to `nodes` for the time) and sorted, without what
memstore adds: leaving out sessions being imported, and, by model and by day, counting a node
that forks copied once (a copy is the same model call). The ratio is what those cost.

    python benchmarks/bench_usage.py [--rows 20000 200000] [--runs 10] [--postgres URL]

Goal: by model and by day at most 3x the floor; by session at most 1.5x.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scratch_schemas import scratch_schema
from sqlalchemy import insert

from memstore import SessionStore
from memstore.store.tables import node_usage, nodes, sessions

NODES = 20
FORKED = 10  # a fork holds copies of its source's first FORKED nodes
DAY_MS = 86_400_000
START = 1_767_225_600_000  # 2026-01-01
MODELS = ("gpt-5", "gpt-5-mini", "claude-sonnet-4", "claude-haiku-4")
TURN = '{"role":"assistant","blocks":[{"kind":"text","text":"ok"}]}'
GOALS = {"session": 1.5, "model": 3.0, "day": 3.0}
SUMS = (
    "count(*), coalesce(sum(u.input_tokens), 0), coalesce(sum(u.output_tokens), 0),"
    " coalesce(sum(u.cache_read_tokens), 0), coalesce(sum(u.cache_write_tokens), 0),"
    " coalesce(sum(u.cost_usd), 0) AS cost"
)
DAY = {
    "sqlite": "date(n.created_at / 1000, 'unixepoch')",
    "postgresql": "to_char(to_timestamp(n.created_at / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
}


def _session(number: int) -> str:
    return f"session-{number:07}"


def _node_id(number: int, position: int) -> str:
    return f"{number:024x}{position:08x}"


def fill(store: SessionStore, rows: int) -> None:
    """Sessions of NODES nodes with usage each, every tenth a fork of the one before it."""
    count = rows // NODES
    with store.engine.begin() as connection:
        for start in range(0, count, 1_000):
            numbers = range(start, min(start + 1_000, count))
            session_rows, node_rows, usage_rows = [], [], []
            for number in numbers:
                session_id = _session(number)
                forked = number % 10 == 9
                ids = [
                    _node_id(number - 1 if forked and i < FORKED else number, i)
                    for i in range(NODES)
                ]
                session_rows.append(
                    {"id": session_id, "head": ids[-1], "created_at": START, "updated_at": START}
                )
                for position, node_id in enumerate(ids):
                    seed = int(node_id[-12:], 16) + int(node_id[:24], 16)
                    made = START + (seed % 180) * DAY_MS + position
                    node_rows.append(
                        {
                            "session_id": session_id,
                            "id": node_id,
                            "parent_id": ids[position - 1] if position else None,
                            "role": "assistant",
                            "created_at": made,
                            "turn_json": TURN,
                        }
                    )
                    usage_rows.append(
                        {
                            "session_id": session_id,
                            "node_id": node_id,
                            "provider": "openai" if seed % 2 else "anthropic",
                            "model": MODELS[seed % len(MODELS)],
                            "input_tokens": 1_000 + seed % 5_000,
                            "output_tokens": 100 + seed % 700,
                            "cache_read_tokens": seed % 3_000,
                            "cache_write_tokens": seed % 200,
                            "cost_usd": (seed % 1_000) / 100_000,
                        }
                    )
            connection.execute(insert(sessions), session_rows)
            connection.execute(insert(nodes), node_rows)
            connection.execute(insert(node_usage), usage_rows)
        connection.exec_driver_sql("ANALYZE")


def median_ms(action: Callable[[], Any], runs: int) -> float:
    action()  # warm: statement caches, pages in memory
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def floor_query(by: str, dialect: str) -> str:
    """The same sums by raw SQL, with no check of importing sessions and no copies left out."""
    key = {"session": "u.session_id", "model": "u.model", "day": DAY[dialect]}[by]
    join = " JOIN nodes AS n ON n.session_id = u.session_id AND n.id = u.node_id"
    return (
        f"SELECT {key} AS key, {SUMS} FROM node_usage AS u{join if by == 'day' else ''}"
        " GROUP BY key ORDER BY cost DESC, key"
    )


def raw(store: SessionStore, sql: str) -> Callable[[], Any]:
    connection = store.engine.raw_connection()

    def run() -> Any:
        cursor = connection.cursor()
        cursor.execute(sql)
        found = cursor.fetchall()
        cursor.close()
        return found

    return run


def measure(store: SessionStore, rows: int, runs: int, label: str) -> list[tuple[str, ...]]:
    table: list[tuple[str, ...]] = []
    for by in ("session", "model", "day"):
        floor = raw(store, floor_query(by, store.dialect))
        ours = store.usage_stats(by)
        assert sum(group.nodes for group in ours) == (rows if by == "session" else rows * 19 // 20)
        mine = median_ms(lambda by=by: store.usage_stats(by), runs)  # type: ignore[misc]
        base = median_ms(floor, runs)
        ratio = mine / base
        flag = "" if ratio <= GOALS[by] else f"  over {GOALS[by]}x"
        table.append((label, f"{rows:,}", by, f"{mine:.1f}", f"{base:.1f}", f"{ratio:.1f}x{flag}"))
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[20_000, 200_000])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--postgres", help="also on this PostgreSQL server (a fresh schema)")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    args = parser.parse_args()
    table: list[tuple[str, ...]] = []
    for rows in args.rows:
        if not args.no_sqlite:
            with (
                tempfile.TemporaryDirectory() as directory,
                SessionStore(f"sqlite:///{Path(directory) / 'usage.db'}") as store,
            ):
                fill(store, rows)
                table += measure(store, rows, args.runs, "sqlite")
        if args.postgres:
            with scratch_schema(args.postgres) as url, SessionStore(url) as store:
                fill(store, rows)
                table += measure(store, rows, args.runs, "postgres")
    print(f"usage_stats(by=...), median of {args.runs} runs (ms); every tenth session a fork")
    print(f"{'backend':9} {'rows':>8} {'by':8} {'memstore':>9} {'raw SQL':>9}  ratio")
    for backend, rows_text, by, mine, base, ratio in table:
        print(f"{backend:9} {rows_text:>8} {by:8} {mine:>9} {base:>9}  {ratio}")
    return 1 if any("over" in row[-1] for row in table) else 0


if __name__ == "__main__":
    sys.exit(main())
