"""Listing sessions a page at a time over 100,000 sessions (issue 30), SQLite and PostgreSQL.

Fills a store with N sessions (one turn each, a tenth tagged `vip`, updated over a year) by
bulk inserts, then times `session_page(limit=50)`: the first page, a page half way down (its
cursor made from the 50,000th session's keys, as paging there would give), and a filtered page
(tag `vip`, updated in the last 30 days of the year). The floor is raw SQL on the same tables
in the same process: the keyset SELECT of the page's session rows through the driver. memstore
reads more per session (node and branch counts, tags, usage totals), so the ratio is what that
costs. `OFFSET` for the same deep page is printed for reference.

    python benchmarks/bench_paging.py [--sessions 100000] [--runs 20] [--postgres URL]

Goal: each page in milliseconds (median under 20 ms) at 100,000 sessions, at any depth.
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
from memstore.store.plans.paging import encode_cursor
from memstore.store.tables import nodes, session_tags, sessions

PAGE = 50
GOAL_MS = 20.0
YEAR_MS = 365 * 86_400_000
START = 1_767_225_600_000  # 2026-01-01
TURN = '{"role":"user","blocks":[{"kind":"text","text":"hello"}]}'


def fill(store: SessionStore, count: int) -> None:
    """`count` sessions with one node each, a tenth tagged `vip`, bulk inserted."""
    step = YEAR_MS // count
    with store.engine.begin() as connection:
        for start in range(0, count, 10_000):
            numbers = range(start, min(start + 10_000, count))
            rows = [
                {
                    "id": f"session-{n:07}",
                    "head": f"{n:032x}",
                    "created_at": START + n * step,
                    # several sessions share a time, as a busy store's do
                    "updated_at": START + (n * 7919 % count) // 3 * 3 * step,
                    "title": f"conversation {n}",
                    "meta": {"team": "web" if n % 3 else "ops"},
                }
                for n in numbers
            ]
            connection.execute(insert(sessions), rows)
            node_rows = [
                {
                    "session_id": f"session-{n:07}",
                    "id": f"{n:032x}",
                    "parent_id": None,
                    "role": "user",
                    "created_at": START + n * step,
                    "turn_json": TURN,
                }
                for n in numbers
            ]
            connection.execute(insert(nodes), node_rows)
            tags = [{"session_id": f"session-{n:07}", "tag": "vip"} for n in numbers if n % 10 == 0]
            connection.execute(insert(session_tags), tags)
        connection.exec_driver_sql("ANALYZE")


def median_ms(action: Callable[[], Any], runs: int) -> float:
    action()  # warm: statement caches, pages in memory
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def raw_page(store: SessionStore, where: str, params: dict[str, Any], offset: int = 0) -> Any:
    """The floor: the page's session rows by raw SQL through the driver."""
    postgres = store.dialect == "postgresql"
    sql = (
        "SELECT id, head, created_at, updated_at, title, meta FROM sessions"
        f" WHERE importing IS NULL{where} ORDER BY updated_at DESC, id LIMIT {PAGE}"
        + (f" OFFSET {offset}" if offset else "")
    )
    if postgres:
        sql = sql.replace(":u", "%(u)s").replace(":i", "%(i)s").replace(":t", "%(t)s")
    connection = store.engine.raw_connection()

    def run() -> Any:
        cursor = connection.cursor()
        cursor.execute(sql, params)
        rows = cursor.fetchall()
        cursor.close()
        return rows

    return run


def measure(store: SessionStore, count: int, runs: int, label: str) -> list[tuple[str, ...]]:
    with store.engine.connect() as connection:
        updated, session_id = connection.exec_driver_sql(
            "SELECT updated_at, id FROM sessions ORDER BY updated_at DESC, id"
            f" LIMIT 1 OFFSET {count // 2 - 1}"
        ).one()
    deep = encode_cursor("updated", updated, session_id)
    after = START + YEAR_MS - 30 * 86_400_000
    seek = " AND updated_at <= :u AND (updated_at < :u OR id > :i)"
    tagged = " AND id IN (SELECT session_id FROM session_tags WHERE tag = :t) AND updated_at > :u"
    cases: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
        ("first page", lambda: store.session_page(limit=PAGE), raw_page(store, "", {})),
        (
            f"page at {count // 2:,}",
            lambda: store.session_page(limit=PAGE, cursor=deep),
            raw_page(store, seek, {"u": updated, "i": session_id}),
        ),
        (
            "vip, last 30 days",
            lambda: store.session_page(limit=PAGE, tag="vip", updated_after=after),
            raw_page(store, tagged, {"t": "vip", "u": after}),
        ),
    ]
    assert len(store.session_page(limit=PAGE, cursor=deep).sessions) == PAGE
    rows: list[tuple[str, ...]] = []
    for name, ours, floor in cases:
        mine, base = median_ms(ours, runs), median_ms(floor, runs)
        rows.append((label, name, f"{mine:.2f}", f"{base:.2f}", f"{mine / base:.1f}x"))
    offset = median_ms(raw_page(store, "", {}, offset=count // 2), runs)
    rows.append((label, f"(OFFSET {count // 2:,}, raw)", "-", f"{offset:.2f}", "-"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--postgres", help="also on this PostgreSQL server (a fresh schema)")
    args = parser.parse_args()
    rows: list[tuple[str, ...]] = []
    with (
        tempfile.TemporaryDirectory() as directory,
        SessionStore(f"sqlite:///{Path(directory) / 'paging.db'}") as store,
    ):
        fill(store, args.sessions)
        rows += measure(store, args.sessions, args.runs, "sqlite")
    if args.postgres:
        with scratch_schema(args.postgres) as url, SessionStore(url) as store:
            fill(store, args.sessions)
            rows += measure(store, args.sessions, args.runs, "postgres")
    print(f"{args.sessions:,} sessions, pages of {PAGE}, median of {args.runs} runs (ms)")
    print(f"{'backend':9} {'case':24} {'memstore':>9} {'raw SQL':>9} {'ratio':>6}")
    for backend, name, mine, base, ratio in rows:
        print(f"{backend:9} {name:24} {mine:>9} {base:>9} {ratio:>6}")
    slow = [row for row in rows if row[2] != "-" and float(row[2]) > GOAL_MS]
    if slow:
        print(f"over the goal of {GOAL_MS} ms: {', '.join(row[1] for row in slow)}")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
