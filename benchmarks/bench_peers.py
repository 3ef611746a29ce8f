"""memstore against the session store a Python user would otherwise pick, and a raw floor.

One workload, three stores, one process: `--turns` turns of about 1.2 KB appended one at a
time, each durable before the next, then the conversation loaded from a fresh store object.

- floor: raw `sqlite3`, one table, WAL, `synchronous=NORMAL`, an INSERT and a COMMIT per turn;
  loading is one SELECT and `json.loads` of each row;
- `SQLiteSession`: the OpenAI Agents SDK's own SQLite session (the `openai-agents` extra, part
  of `dev`), `add_items` of one item per turn, then `get_items`;
- memstore: `SessionStore.append` per turn, then `load_path` from a new store.

Prints, per store, the mean append, its p50 and p99, the load, and the bytes on disk per turn
(the database and its WAL), each the median over `--repeats`, with ratios to the floor and to
`SQLiteSession`. Goals: append at most 0.9x `SQLiteSession`, p99 at most 3x the median, load at
most 2x the floor and at most `SQLiteSession`, bytes at most 2x the floor.

    python benchmarks/bench_peers.py [--turns 5000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstore import SessionStore

WORDS = [
    "the",
    "upload",
    "test",
    "fails",
    "when",
    "the",
    "timeout",
    "is",
    "shorter",
    "than",
    "the",
    "server's",
    "first",
    "byte",
]


def text(n: int) -> str:
    """About 1.1 KB of prose, different for each turn."""
    words = [WORDS[(n + k) % len(WORDS)] for k in range(190)]
    return f"turn {n}: " + " ".join(words)


@dataclass
class Run:
    """One store's figures for one repeat."""

    appends: list[float]
    load: float
    bytes_per_turn: float


def files_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def floor(path: Path, turns: int) -> Run:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("CREATE TABLE turns (id INTEGER PRIMARY KEY, session TEXT, turn TEXT)")
    appends = []
    for n in range(turns):
        line = json.dumps({"role": "user", "content": text(n)})
        start = time.perf_counter()
        connection.execute("BEGIN")
        connection.execute("INSERT INTO turns (session, turn) VALUES (?, ?)", ("s", line))
        connection.execute("COMMIT")
        appends.append(time.perf_counter() - start)
    connection.close()
    start = time.perf_counter()
    reader = sqlite3.connect(path)
    rows = reader.execute("SELECT turn FROM turns WHERE session = 's' ORDER BY id").fetchall()
    loaded = [json.loads(row[0]) for row in rows]
    load = time.perf_counter() - start
    reader.close()
    assert len(loaded) == turns
    return Run(appends, load, files_size(path) / turns)


def sdk_session(path: Path, turns: int) -> Run:
    from agents.memory import SQLiteSession

    async def run() -> Run:
        session = SQLiteSession("s", str(path))
        appends = []
        for n in range(turns):
            item: Any = {"role": "user", "content": text(n)}
            start = time.perf_counter()
            await session.add_items([item])
            appends.append(time.perf_counter() - start)
        session.close()
        start = time.perf_counter()
        fresh = SQLiteSession("s", str(path))
        items = await fresh.get_items()
        load = time.perf_counter() - start
        fresh.close()
        assert len(items) == turns
        return Run(appends, load, files_size(path) / turns)

    return asyncio.run(run())


def memstore(path: Path, turns: int) -> Run:
    store = SessionStore(f"sqlite:///{path}")
    appends = []
    for n in range(turns):
        turn = {"role": "user", "blocks": [{"kind": "text", "text": text(n)}]}
        start = time.perf_counter()
        store.append("s", turn)
        appends.append(time.perf_counter() - start)
    store.close()
    fresh = SessionStore(f"sqlite:///{path}")
    start = time.perf_counter()
    loaded = fresh.load_path("s")
    load = time.perf_counter() - start
    fresh.close()
    assert len(loaded) == turns
    return Run(appends, load, files_size(path) / turns)


SYSTEMS: dict[str, Callable[[Path, int], Run]] = {
    "floor sqlite3": floor,
    "SQLiteSession": sdk_session,
    "memstore": memstore,
}


def summary(runs: list[Run]) -> dict[str, float]:
    """Medians over the repeats of each figure."""

    def median(figure: Callable[[Run], float]) -> float:
        return statistics.median(figure(run) for run in runs)

    def quantile(appends: list[float], q: float) -> float:
        return sorted(appends)[min(len(appends) - 1, int(q * len(appends)))]

    return {
        "mean": median(lambda run: statistics.fmean(run.appends)),
        "p50": median(lambda run: quantile(run.appends, 0.50)),
        "p99": median(lambda run: quantile(run.appends, 0.99)),
        "load": median(lambda run: run.load),
        "bytes": median(lambda run: run.bytes_per_turn),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    runs: dict[str, list[Run]] = {name: [] for name in SYSTEMS}
    for _ in range(args.repeats):
        for name, system in SYSTEMS.items():  # in turn, so that noise falls on every side
            with tempfile.TemporaryDirectory() as scratch:
                runs[name].append(system(Path(scratch) / "bench.db", args.turns))
    figures = {name: summary(found) for name, found in runs.items()}
    base, sdk = figures["floor sqlite3"], figures["SQLiteSession"]
    print(f"{args.turns} turns, medians of {args.repeats} repeats")
    for name, f in figures.items():
        print(
            f"{name:>14}: append {f['mean'] * 1e6:7.0f} us ({f['mean'] / base['mean']:5.2f}x floor,"
            f" {f['mean'] / sdk['mean']:4.2f}x SQLiteSession), p50/p99 {f['p50'] * 1e6:.0f}/"
            f"{f['p99'] * 1e6:.0f} us ({f['p99'] / f['p50']:.1f}x); load {f['load'] * 1e3:6.1f} ms"
            f" ({f['load'] / base['load']:4.2f}x floor, {f['load'] / sdk['load']:4.2f}x"
            f" SQLiteSession); {f['bytes']:,.0f} bytes/turn ({f['bytes'] / base['bytes']:.2f}x)"
        )


if __name__ == "__main__":
    main()
