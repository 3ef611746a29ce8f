"""Import and export throughput of legacy JSONL files, as ratios against a floor.

The floors run in the same process on the same file:

- import: `json.loads` of every line plus raw `sqlite3` `executemany`, in one transaction, of
  the rows an import stores (nodes, blocks, log records: taken from a memstore import before
  the clock starts) into memstore's schema, whose text is then indexed for search in one
  statement. memstore adds reading and checking every record, verifying every id, and deriving
  the rows. Goal: at least half the floor's speed.
- for scale, a line dump: `json.loads` of every line plus `executemany` of the raw lines into an
  unindexed table. It stores a third of the bytes an import must (no block rows, no search
  index, no keys), so no import that keeps memstore's promises comes near it.
- export: a raw `SELECT` of the lines from the line dump and a file write. Goal: half its speed.
- with `--postgres`, the import floor on PostgreSQL: `json.loads` of every line plus a psycopg
  `COPY ... FROM STDIN` of the rows a memstore import stored there (every table and column,
  the search vectors as their text, in the order stored: taken from a memstore import before
  the clock starts) into memstore's schema, one transaction. Goals: memstore's import at least
  half the floor's speed, and no slower than memstore's import of the same file into SQLite.

Each side runs once per round, in turn, into a new database; the best round counts.

    python benchmarks/bench_transfer.py [--megabytes 50] [--rounds 3] [--postgres URL]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from scratch_schemas import scratch_schema

from memstore import SessionStore, jsjson
from memstore.hashing import hash_node_text
from memstore.jsonl import head_line, node_line

GOAL = 0.5
EXPORTS_PER_ROUND = 3
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


def parsed_lines(source: Path) -> Iterator[tuple[int, str]]:
    """Each line of the file, numbered, after `json.loads` has parsed it (the floors' reading)."""
    with source.open(encoding="utf-8") as lines:
        for seq, line in enumerate(lines):
            json.loads(line)
            yield seq, line


def connect(database: Path) -> sqlite3.Connection:
    """A raw connection with the settings memstore uses."""
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    connection.execute("PRAGMA foreign_keys = ON")
    return connection


def floor_lines(source: Path, database: Path) -> None:
    """The line dump: every raw line into an unindexed table, in one transaction."""
    connection = connect(database)
    connection.execute("CREATE TABLE lines (session TEXT, seq INTEGER, line TEXT)")
    with connection:
        rows = []
        for seq, line in parsed_lines(source):
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


def floor_schema(source: Path, tables: Tables, database: Path) -> None:
    """The import floor: every line parsed, and the rows an import stores inserted in one
    transaction into memstore's schema (indexes, foreign keys), their text indexed for search
    in one statement: the database's own share of an import."""
    for _ in parsed_lines(source):
        pass
    connection = connect(database)
    with connection:
        for table, (columns, rows) in tables.items():
            marks = ", ".join("?" * len(columns))
            sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
            for start in range(0, len(rows), 1000):
                connection.executemany(sql, rows[start : start + 1000])
        connection.execute(
            "INSERT INTO nodes_fts(rowid, search_text) SELECT pk, search_text FROM node_search"
        )
    connection.close()


PG_TABLES = ("sessions", "nodes", "node_blocks", "records")
PgTables = dict[str, tuple[list[str], bytes]]


def pg_written_rows(url: str, session_id: str) -> PgTables:
    """Every row a memstore import wrote into PostgreSQL, table by table in the order stored,
    in COPY's text format (the serial keys left to their sequences)."""
    import psycopg

    tables = {}
    with psycopg.connect(url) as connection, connection.cursor() as cursor:
        for table in PG_TABLES:
            cursor.execute(f"SELECT * FROM {table} LIMIT 0")
            columns = [c.name for c in cursor.description or () if c.name != "pk"]
            key = "id" if table == "sessions" else "session_id"
            order = "id" if table == "sessions" else "pk" if table != "node_blocks" else "ctid"
            query = (
                f"COPY (SELECT {', '.join(columns)} FROM {table} WHERE {key} = %s "
                f"ORDER BY {order}) TO STDOUT"
            )
            data = bytearray()
            with cursor.copy(query, (session_id,)) as copy:
                for chunk in copy:
                    data += chunk
            tables[table] = (columns, bytes(data))
    return tables


def pg_floor(source: Path, url: str, tables: PgTables) -> None:
    """The PostgreSQL import floor: every line parsed, and the rows an import stores copied in
    one transaction into memstore's schema."""
    import psycopg

    for _ in parsed_lines(source):
        pass
    with psycopg.connect(url) as connection, connection.cursor() as cursor:
        for table, (columns, data) in tables.items():
            with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for start in range(0, len(data), 1 << 20):
                    copy.write(data[start : start + (1 << 20)])


def pg_rounds(server: str, source: Path, rounds: int) -> dict[str, float]:
    """The best times of memstore's import into PostgreSQL and of the floor, in turn, each into
    empty tables (emptied by TRUNCATE between runs) in a schema of the benchmark's own."""
    import psycopg

    best: dict[str, float] = {}
    with scratch_schema(server) as url, SessionStore(url) as store:
        store.import_jsonl(source)
        tables = pg_written_rows(url, "bench")

        def clean() -> None:
            with psycopg.connect(url, autocommit=True) as connection:
                connection.execute("TRUNCATE sessions CASCADE")

        for _ in range(rounds):
            clean()
            seconds = timed(lambda: store.import_jsonl(source))
            best["pg import"] = min(best.get("pg import", seconds), seconds)
            clean()
            seconds = timed(lambda: pg_floor(source, url, tables))
            best["pg floor"] = min(best.get("pg floor", seconds), seconds)
        store.export_jsonl("bench", source.with_suffix(".pg.jsonl"))  # the floor's rows
        assert source.with_suffix(".pg.jsonl").read_bytes() == source.read_bytes()
    return best


def floor_export(database: Path, target: Path) -> None:
    connection = sqlite3.connect(database)
    with target.open("w", encoding="utf-8", newline="") as out:
        for (line,) in connection.execute("SELECT line FROM lines ORDER BY seq"):
            out.write(line)
    connection.close()


def empty_store(path: Path) -> str:
    """The URL of a new database with memstore's schema and no rows."""
    url = f"sqlite:///{path}"
    SessionStore(url).close()
    return url


def memstore_import(url: str, source: Path) -> None:
    with SessionStore(url) as store:
        store.import_jsonl(source)


def memstore_export(url: str, target: Path) -> None:
    with SessionStore(url) as store:
        store.export_jsonl("bench", target)


def best_rounds(root: Path, source: Path, tables: Tables, rounds: int) -> dict[str, float]:
    """The best time of each side over `rounds` rounds that run them in turn, each into a new
    database, so that a burst of noise from other jobs hits the floors and memstore alike."""
    best: dict[str, float] = {}

    def keep(name: str, seconds: float) -> None:
        best[name] = min(best.get(name, seconds), seconds)

    ours, schema, lines = root / "ours.db", root / "schema.db", root / "lines.db"
    url = f"sqlite:///{ours}"
    for _ in range(rounds):
        empty_store(ours)
        empty_store(schema)
        keep("import", timed(lambda: memstore_import(url, source)))
        keep("schema floor", timed(lambda: floor_schema(source, tables, schema)))
        keep("line floor", timed(lambda: floor_lines(source, lines)))
        for _ in range(EXPORTS_PER_ROUND):  # exports are quick: more samples for the best
            keep("export", timed(lambda: memstore_export(url, root / "export.jsonl")))
            keep("export floor", timed(lambda: floor_export(lines, root / "floor.jsonl")))
        assert (root / "export.jsonl").read_bytes() == source.read_bytes(), "not byte-identical"
        for database in (ours, schema, lines):
            for suffix in ("", "-wal", "-shm"):
                Path(f"{database}{suffix}").unlink(missing_ok=True)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", help="also import into this PostgreSQL database")
    parser.add_argument("--skip-sqlite", action="store_true", help="PostgreSQL's rounds only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        source = root / "bench.jsonl"
        records = write_session(source, args.megabytes)
        size = source.stat().st_size / 1e6
        rows = []
        if not args.skip_sqlite:
            memstore_import(empty_store(root / "rows.db"), source)  # the rows the floor inserts
            tables = written_rows(root / "rows.db")
            best = best_rounds(root, source, tables, args.rounds)
            rows += [
                ("import", best["schema floor"], best["import"], f">= {GOAL}x"),
                ("  vs a line dump", best["line floor"], best["import"], "(for scale)"),
                ("export", best["export floor"], best["export"], f">= {GOAL}x"),
            ]
        if args.postgres:
            pg = pg_rounds(args.postgres, source, args.rounds)
            rows.append(("import (PostgreSQL)", pg["pg floor"], pg["pg import"], f">= {GOAL}x"))
            if not args.skip_sqlite:  # the SQLite import as the floor: PostgreSQL's as quick
                rows.append(("  vs SQLite's import", best["import"], pg["pg import"], ">= 1.0x"))
    print(f"{size:.1f} MB, {records} records (SQLite file, WAL, synchronous=NORMAL)")
    print("PostgreSQL: its floor is a psycopg COPY of the rows memstore stores there")
    print(f"best of {args.rounds} rounds")
    print(f"{'':20} {'floor MB/s':>11} {'memstore MB/s':>14} {'records/s':>11} {'ratio':>7}  goal")
    failed = False
    for name, floor, ours, goal in rows:
        ratio = floor / ours
        failed |= goal.startswith(">=") and ratio < float(goal.split()[1].rstrip("x"))
        print(
            f"{name:20} {size / floor:11.1f} {size / ours:14.1f} {records / ours:11.0f} "
            f"{ratio:6.2f}x  {goal}"
        )
    print(f"goal: {'MISSED' if failed else 'met'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
