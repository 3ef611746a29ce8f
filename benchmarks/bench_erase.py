"""`erase` at a realistic size, against a raw-SQL floor that rewrites the same rows.

Two cases, each on two identical stores (a copy of the SQLite file; a second PostgreSQL schema):

- *subject*: --sessions sessions of --turns turns each; every --every-th turn carries
  `"user_id": "u-target"` (the others other users' ids). `erase(subject=("user_id",
  "u-target"))` tombstones those turns in every session.
- *node*: one session of --long turns; `erase(session_id=, node_id=)` of the turn in its middle.
- *session*: then that session whole, `erase(session_id=)`; its floor is what `delete_session`
  runs (unlink the parents, delete the session row, the cascades doing the rest).

The floor is the least SQL that leaves the same rows, on the driver in one transaction (with
`secure_delete` on SQLite, as erase runs): select the matching nodes by the same JSON predicate,
then for each of them (executemany) set the tombstone's JSON and search columns, replace its
`node_blocks` row, delete its usage and key rows and clear its `records.raw`. It knows in advance
that no other copies or summaries exist; `erase` must look for them (load the sessions the
targets are in and those sharing node ids with them), so a ratio above 1 is that search and
memstore's plumbing. Both copies must lose as many nodes in each session (the same sessions
whole).

    python benchmarks/bench_erase.py [--sessions 200] [--turns 500] [--every 10] [--long 5000]
                                     [--postgres URL]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy
from scratch_schemas import FreshSchemas

from memstore import SessionStore, jsjson

GOAL_RATIO = 3.0
"""The subject's erasure at most this many times the floor's time (the node's erasure is
reported, not held to it: its floor rewrites one row in a millisecond)."""

NOW = 1_800_000_000_000
TEXT = (
    "Here is what I found about the order: it shipped on Monday from the second warehouse, "
    "the tracking number was sent by mail, and the courier expects to deliver it by Thursday. "
)

SQLITE_FIND = (
    "SELECT session_id, id FROM nodes WHERE json_type(turn_json, '$.\"user_id\"') = 'text' "
    "AND json_extract(turn_json, '$.\"user_id\"') = :value"
)
POSTGRES_FIND = (
    "SELECT session_id, id FROM nodes WHERE json_typeof(turn_json::json -> 'user_id') = 'string' "
    "AND (turn_json::json ->> 'user_id') = :value"
)
NODE_FIND = "SELECT session_id, id FROM nodes WHERE session_id = :session AND id = :value"
SQLITE_REWRITE = (
    "UPDATE nodes SET turn_json = :turn, search_chars = '' WHERE session_id = :s AND id = :i"
)
POSTGRES_REWRITE = (
    "UPDATE nodes SET turn_json = :turn, search_chars = '', "
    "search_vector = to_tsvector('simple', '[erased]'), search_chars_vector = NULL "
    "WHERE session_id = :s AND id = :i"
)
BLOCK = (  # both derive the block's text from the turn (PostgreSQL since migration 0037)
    "INSERT INTO node_blocks (session_id, node_id, position, kind) VALUES (:s, :i, 0, 'text')"
)
FOLLOWING = (
    "DELETE FROM node_blocks WHERE session_id = :s AND node_id = :i",
    "DELETE FROM node_usage WHERE session_id = :s AND node_id = :i",
    "DELETE FROM node_keys WHERE session_id = :s AND node_id = :i",
    "UPDATE records SET raw = NULL WHERE session_id = :s AND node_id = :i",
)


def turn(session: int, index: int, every: int) -> dict[str, Any]:
    user = "u-target" if index % every == 0 else f"u-{session}-{index % 7}"
    role = "user" if index % 2 == 0 else "assistant"
    text = f"{TEXT}(session {session}, turn {index})"
    return {"role": role, "blocks": [{"kind": "text", "text": text}], "user_id": user}


def fill(store: SessionStore, args: argparse.Namespace) -> str:
    """The subject's sessions and the long session; returns the long session's middle node."""
    for session in range(args.sessions):
        turns = [turn(session, index, args.every) for index in range(args.turns)]
        store.append_many(f"s-{session:04d}", turns)
    long_turns = [turn(-1, index, 1_000_000_000) for index in range(1, args.long + 1)]
    nodes = store.append_many("long", long_turns)
    return nodes[len(nodes) // 2].id


def tombstone_json() -> str:
    return jsjson.dumps(
        {
            "role": "user",
            "blocks": [{"kind": "text", "text": "[erased]"}],
            "memstore": {"erased": {"at": NOW, "erasure": 1}},
        }
    )


def floor_statements(
    postgres: bool, find: str, params: dict[str, str]
) -> Callable[[Callable[[str, Any], Any]], list[tuple[str, str]]]:
    """The floor as a function of an `execute(sql, params)` of the driver."""
    if find == WHOLE:
        return whole_session(params["session"])

    def run(execute: Callable[[str, Any], Any]) -> list[tuple[str, str]]:
        keys = [(row[0], row[1]) for row in execute(find, params)]
        many = [{"s": s, "i": i} for s, i in keys]
        tomb = tombstone_json()
        rewrite = POSTGRES_REWRITE if postgres else SQLITE_REWRITE
        execute(rewrite, [{**row, "turn": tomb} for row in many])
        execute(FOLLOWING[0], many)
        execute(BLOCK, many)
        for statement in FOLLOWING[1:]:
            execute(statement, many)
        return keys

    return run


WHOLE = "(the session, whole)"


def whole_session(session_id: str) -> Callable[[Callable[[str, Any], Any]], list[tuple[str, str]]]:
    """The floor of a session's erasure: what `delete_session` runs (unlink the parents, delete
    the session row; the cascades and SQLite's full-text triggers do the rest)."""

    def run(execute: Callable[[str, Any], Any]) -> list[tuple[str, str]]:
        params = {"s": session_id}
        execute("UPDATE nodes SET parent_id = NULL WHERE session_id = :s", params)
        execute("DELETE FROM sessions WHERE id = :s", params)
        return [(session_id, "")]

    return run


@contextmanager
def timed() -> Iterator[list[float]]:
    found: list[float] = []
    start = time.perf_counter()
    yield found
    found.append(time.perf_counter() - start)


def sqlite_floor(
    path: Path, run: Callable[..., list[tuple[str, str]]]
) -> tuple[float, Counter[str]]:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA foreign_keys = ON")
    connection.execute("PRAGMA secure_delete = ON")

    def execute(sql: str, params: Any) -> Any:
        if isinstance(params, list):
            return connection.executemany(sql, params)
        return connection.execute(sql, params)

    with timed() as seconds:
        connection.execute("BEGIN IMMEDIATE")
        keys = run(execute)
        connection.execute("COMMIT")
    connection.close()
    return seconds[0], per_session(keys)


def postgres_floor(
    engine: sqlalchemy.Engine, run: Callable[..., list[tuple[str, str]]]
) -> tuple[float, Counter[str]]:
    with timed() as seconds, engine.begin() as connection:
        keys = run(lambda sql, params: connection.execute(sqlalchemy.text(sql), params))
    return seconds[0], per_session(keys)


def per_session(keys: list[tuple[str, str]]) -> Counter[str]:
    """How many nodes each session lost (a session deleted whole: one)."""
    return Counter(session_id for session_id, _ in keys)


def erased(store: SessionStore, **target: Any) -> tuple[float, Counter[str]]:
    with timed() as seconds:
        report = store.erase(reason="benchmark", dry_run=False, now=NOW, **target)
    keys = [(session_id, "") for session_id in report.sessions]
    keys += [(session_id, node) for session_id, ids in report.nodes.items() for node in ids]
    return seconds[0], per_session(keys)


CASES = ("subject", "node", "session")


def targets(middle: str) -> dict[str, dict[str, Any]]:
    return {
        "subject": {"subject": ("user_id", "u-target")},
        "node": {"session_id": "long", "node_id": middle},
        "session": {"session_id": "long"},
    }


def sqlite_side(args: argparse.Namespace) -> dict[str, tuple[float, float, int]]:
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        first, second = Path(folder) / "a.db", Path(folder) / "b.db"
        with SessionStore(f"sqlite:///{first}") as store:
            middle = fill(store, args)
        shutil.copy(first, second)
        finds = {
            "subject": (SQLITE_FIND, {"value": "u-target"}),
            "node": (NODE_FIND, {"session": "long", "value": middle}),
            "session": (WHOLE, {"session": "long"}),
        }
        with SessionStore(f"sqlite:///{first}") as store:
            for case in CASES:
                floor, floor_count = sqlite_floor(second, floor_statements(False, *finds[case]))
                seconds, count = erased(store, **targets(middle)[case])
                assert count == floor_count, (case, count, floor_count)
                results[case] = (floor, seconds, count.total())
    return results


def postgres_side(args: argparse.Namespace) -> dict[str, tuple[float, float, int]]:
    results = {}
    with FreshSchemas(args.postgres) as schemas:
        stores = [SessionStore(schemas.new_url()) for _ in range(2)]
        middles = [fill(store, args) for store in stores]
        for store in stores:
            with store.engine.begin() as connection:
                connection.execute(sqlalchemy.text("ANALYZE"))
        finds = {
            "subject": (POSTGRES_FIND, {"value": "u-target"}),
            "node": (NODE_FIND, {"session": "long", "value": middles[1]}),
            "session": (WHOLE, {"session": "long"}),
        }
        for case in CASES:
            run = floor_statements(True, *finds[case])
            floor, floor_count = postgres_floor(stores[1].engine, run)
            seconds, count = erased(stores[0], **targets(middles[0])[case])
            assert count == floor_count, (case, count, floor_count)
            results[case] = (floor, seconds, count.total())
        for store in stores:
            store.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--long", type=int, default=5_000)
    parser.add_argument("--postgres", help="also measure against this PostgreSQL database")
    args = parser.parse_args()
    sides: list[tuple[str, Callable[[argparse.Namespace], dict[str, tuple[float, float, int]]]]]
    sides = [("SQLite", sqlite_side)]
    if args.postgres:
        sides.append(("PostgreSQL", postgres_side))
    failed = False
    for name, side in sides:
        results = side(args)
        floor, seconds, count = results["subject"]
        ratio = seconds / floor
        failed |= ratio > GOAL_RATIO
        print(
            f"{name}: erase of a subject's {count:,} turns across {args.sessions} sessions of "
            f"{args.turns} turns {seconds:.2f} s, floor {floor:.2f} s, {ratio:.1f}x "
            f"(goal {GOAL_RATIO}x)"
        )
        floor, seconds, count = results["node"]
        print(
            f"{name}: erase of one node in a {args.long:,}-turn session {seconds * 1000:.0f} ms, "
            f"floor {floor * 1000:.1f} ms, {seconds / floor:.0f}x"
        )
        floor, seconds, _ = results["session"]
        print(
            f"{name}: erase of the {args.long:,}-turn session whole {seconds:.2f} s, "
            f"floor {floor:.2f} s, {seconds / floor:.1f}x"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
