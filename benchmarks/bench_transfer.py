"""Import and export throughput of legacy JSONL files, as ratios against a floor.

The floor runs in the same process on the same file: for import, `json.loads` of every line
plus raw `sqlite3` `executemany` of the lines in one transaction; for export, a raw `SELECT` of
those lines and a file write. memstore does more (checks every record, verifies every id,
keeps the DAG's foreign keys), and the goal is at least half the floor's speed. For scale, a
second import floor: raw `sqlite3` inserting the very rows memstore wrote, into its schema.

    python benchmarks/bench_transfer.py [--megabytes 50] [--postgres URL]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from memstore import SessionStore, jsjson
from memstore.hashing import hash_node_text
from memstore.jsonl import head_line, node_line

GOAL = 0.5
# Per table: its columns, and its rows in the order written.
Tables = dict[str, tuple[list[str], list[tuple[object, ...]]]]


def sample_turn(i: int) -> dict[str, object]:
    """A realistic turn: alternating questions, tool calls with nested input, and results."""
    match i % 4:
        case 0:
            return {
                "role": "user",
                "blocks": [{"kind": "text", "text": f"Step {i}: " + "why " * 40}],
            }
        case 1:
            return {
                "role": "assistant",
                "blocks": [
                    {"kind": "thinking", "text": "Let me look at the file first. " * 6},
                    {
                        "kind": "tool_call",
                        "id": f"call_{i}",
                        "name": "read_file",
                        "input": {
                            "path": f"src/module_{i % 97}.py",
                            "range": {"start": i, "end": i + 80},
                            "flags": ["follow", "utf-8"],
                            "retry": {"count": 3, "backoff": 1.5},
                        },
                    },
                ],
            }
        case 2:
            output = {"content": "def f(x):\n    return x * 2\n" * 12, "lines": 24, "ok": True}
            return {
                "role": "user",
                "blocks": [
                    {"kind": "tool_result", "callId": f"call_{i - 1}", "output": output},
                ],
            }
        case _:
            return {"role": "assistant", "blocks": [{"kind": "text", "text": "Done. " * 30}]}


def write_session(path: Path, megabytes: float) -> int:
    """A linear session of about `megabytes`, written as the original writer would."""
    parent: str | None = None
    written = 0
    count = 0
    with path.open("w", encoding="utf-8", newline="") as out:
        while written < megabytes * 1_000_000:
            turn_json = jsjson.dumps(sample_turn(count))
            created_at = 1_767_225_600_000 + count * 1000
            node_id = hash_node_text(parent, turn_json.encode(), created_at)
            text = node_line(node_id, parent, turn_json, created_at) + head_line(node_id)
            out.write(text)
            written += len(text.encode())
            parent = node_id
            count += 1
    return count * 2


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def floor_import(source: Path, database: Path) -> None:
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    connection.execute("CREATE TABLE lines (session TEXT, seq INTEGER, line TEXT)")
    with source.open(encoding="utf-8") as lines, connection:
        rows = []
        for seq, line in enumerate(lines):
            json.loads(line)
            rows.append(("s", seq, line))
            if len(rows) == 1000:
                connection.executemany("INSERT INTO lines VALUES (?, ?, ?)", rows)
                rows = []
        connection.executemany("INSERT INTO lines VALUES (?, ?, ?)", rows)
    connection.close()


def written_rows(database: Path) -> Tables:
    """Every row memstore wrote, table by table in the order written: columns and values."""
    connection = sqlite3.connect(database)
    tables = {}
    for table in ("sessions", "nodes", "node_blocks", "records"):
        cursor = connection.execute(f"SELECT * FROM {table} ORDER BY rowid")
        tables[table] = ([column[0] for column in cursor.description], cursor.fetchall())
    connection.close()
    return tables


def floor_same_rows(tables: Tables, database: Path) -> None:
    """Raw `sqlite3` inserting, in one transaction, the rows an import wrote into memstore's
    schema, and indexing their text in one statement: the database's own share of an import
    (indexes, foreign keys, the full-text index)."""
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    connection.execute("PRAGMA foreign_keys = ON")
    with connection:
        for table, (columns, rows) in tables.items():
            marks = ", ".join("?" * len(columns))
            sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
            for start in range(0, len(rows), 1000):
                connection.executemany(sql, rows[start : start + 1000])
        connection.execute(
            "INSERT INTO nodes_fts(rowid, search_text) SELECT pk, search_text FROM nodes"
        )
    connection.close()


def floor_export(database: Path, target: Path) -> None:
    connection = sqlite3.connect(database)
    with target.open("w", encoding="utf-8", newline="") as out:
        for (line,) in connection.execute("SELECT line FROM lines ORDER BY seq"):
            out.write(line)
    connection.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=50)
    parser.add_argument("--postgres", help="also import into this PostgreSQL database")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        source = root / "bench.jsonl"
        records = write_session(source, args.megabytes)
        size = source.stat().st_size / 1e6
        floor_in = timed(lambda: floor_import(source, root / "floor.db"))
        floor_out = timed(lambda: floor_export(root / "floor.db", root / "floor.jsonl"))
        store = SessionStore(f"sqlite:///{root / 'memstore.db'}")
        ours_in = timed(lambda: store.import_jsonl(source))
        ours_out = timed(lambda: store.export_jsonl("bench", root / "export.jsonl"))
        assert (root / "export.jsonl").read_bytes() == source.read_bytes(), "not byte-identical"
        store.close()
        tables = written_rows(root / "memstore.db")
        SessionStore(f"sqlite:///{root / 'same.db'}").close()  # memstore's schema, empty
        same_in = timed(lambda: floor_same_rows(tables, root / "same.db"))
        rows = [
            ("import", floor_in, ours_in),
            ("  vs the same rows", same_in, ours_in),
            ("export", floor_out, ours_out),
        ]
        if args.postgres:
            pg = SessionStore(args.postgres)
            pg.delete_session("bench")
            rows.append(("import (PostgreSQL)", floor_in, timed(lambda: pg.import_jsonl(source))))
            pg.delete_session("bench")
            pg.close()
    print(f"{size:.1f} MB, {records} records (SQLite file, WAL, synchronous=NORMAL)")
    print(f"{'':20} {'floor MB/s':>11} {'memstore MB/s':>14} {'records/s':>11} {'ratio':>7}")
    failed = False
    for name, floor, ours in rows:
        ratio = floor / ours
        failed |= ratio < GOAL and name in ("import", "export")
        print(
            f"{name:20} {size / floor:11.1f} {size / ours:14.1f} {records / ours:11.0f} "
            f"{ratio:6.2f}x"
        )
    print(f"goal: >= {GOAL}x the floor; {'MISSED' if failed else 'met'}")
    print(
        "'vs the same rows': the floor is raw sqlite3 inserting the rows memstore wrote (node,"
        " blocks, log records) into memstore's schema, for scale"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
