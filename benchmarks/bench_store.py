"""The SQL store against raw sqlite3, as ratios measured in one run.

- durable `append_node` (one commit per append) vs raw `sqlite3` insert + commit of the same
  rows: the rows memstore writes for an append (node, blocks, log record, head), prepared in
  advance, into memstore's own schema (its indexes and full-text triggers included), with the
  same journal mode and synchronous level — goal <= 2.5x. Also shown, for scale: the same
  appends as two rows into two bare tables (what the schema itself costs);
- `load_session` of a 10,000-node session vs raw `SELECT` + `json.loads` — goal <= 2x. Also
  shown: the same raw read of memstore's own table, whose rows are wider (search text, role);
- `load_path` to a leaf at depth 100 in a 20,000-node session vs `load_session` — goal >= 20x
  faster.

    python benchmarks/bench_store.py
"""

from __future__ import annotations

import gc
import itertools
import json
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memstore import SessionGraph, SessionNode, SessionStore, jsjson
from memstore.store.rows import stored_rows

APPENDS = 2000


def turn(i: int) -> dict[str, object]:
    if i % 2:
        return {
            "role": "assistant",
            "blocks": [
                {"kind": "text", "text": f"Answer {i}: " + "details " * 30},
                {"kind": "tool_call", "id": f"c{i}", "name": "grep", "input": {"pattern": f"x{i}"}},
            ],
        }
    return {"role": "user", "blocks": [{"kind": "text", "text": f"Question {i}? " + "why " * 20}]}


def chain(session_id: str, count: int, branch_every: int = 0) -> list[SessionNode]:
    """`count` nodes; with `branch_every`, the graph forks every so often (many short branches)."""
    graph = SessionGraph(session_id, clock=itertools.count(1_767_225_600_000).__next__)
    for i in range(count):
        if branch_every and i and i % branch_every == 0:
            graph.branch_from(graph.all()[i // 2].id)
        graph.append(turn(i))
    return graph.all()


def timed(action: Callable[[], object], repeat: int = 1) -> float:
    """The best of `repeat` runs. Each starts from a collected heap, so that whether a full
    collection (which scans every object the benchmark holds) lands inside it is not luck."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def interleaved(*actions: Callable[[], object], rounds: int) -> list[float]:
    """The best time of each action over `rounds` rounds that run them in turn, so that a burst
    of noise from other jobs on the machine hits the floor and memstore alike."""
    best = [float("inf")] * len(actions)
    for _ in range(rounds):
        for index, action in enumerate(actions):
            best[index] = min(best[index], timed(action))
    return best


def raw_appends(path: Path, nodes: list[SessionNode]) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    connection.execute("CREATE TABLE nodes (session TEXT, id TEXT, parent TEXT, turn TEXT, t INT)")
    connection.execute("CREATE TABLE heads (session TEXT PRIMARY KEY, leaf TEXT)")
    for node in nodes:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(
            "INSERT INTO nodes VALUES (?, ?, ?, ?, ?)",
            ("s", node.id, node.parent, jsjson.dumps(node.turn.to_json()), node.created_at),
        )
        connection.execute("INSERT OR REPLACE INTO heads VALUES ('s', ?)", (node.id,))
        connection.execute("COMMIT")
    connection.close()


def same_rows(session_id: str, nodes: list[SessionNode]) -> list[tuple[Any, ...]]:
    """Per append, the parameters of every row memstore writes for it, prepared in advance."""
    prepared = []
    for node in nodes:
        text = node.turn.json_text()
        turn = jsjson.loads(text)
        prepared.append(
            (
                *stored_rows(session_id, node.id, node.parent, node.created_at, turn, text),
                (session_id, node.id),
                (node.id, node.created_at, session_id),
            )
        )
    return prepared


def raw_same_rows(path: Path, session_id: str, prepared: list[tuple[Any, ...]]) -> None:
    """Insert and commit, per append, the rows memstore writes into memstore's schema, and
    index the node's text for full-text search."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    connection.execute("PRAGMA foreign_keys = ON")
    connection.execute(
        "INSERT INTO sessions (id, head, created_at, updated_at) VALUES (?, NULL, 0, 0)",
        (session_id,),
    )
    for node, blocks, record, head in prepared:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(
            "INSERT INTO nodes (session_id, id, parent_id, role, created_at, turn_json,"
            " search_text) VALUES (:session_id, :id, :parent_id, :role, :created_at,"
            " :turn_json, :search_text)",
            node,
        )
        connection.execute(
            "INSERT INTO nodes_fts (rowid, search_text) VALUES (last_insert_rowid(), ?)",
            (node["search_text"],),
        )
        connection.executemany(
            "INSERT INTO node_blocks (session_id, node_id, position, kind, text, tool_name,"
            " call_id, is_error, input_json, output_json) VALUES (:session_id, :node_id,"
            " :position, :kind, :text, :tool_name, :call_id, :is_error, :input_json,"
            " :output_json)",
            blocks,
        )
        connection.execute(
            "INSERT INTO records (session_id, kind, node_id) VALUES (?, 'append', ?)", record
        )
        connection.execute("UPDATE sessions SET head = ?, updated_at = ? WHERE id = ?", head)
        connection.execute("COMMIT")
    connection.close()


def raw_load(path: Path) -> None:
    connection = sqlite3.connect(path)
    rows = connection.execute("SELECT id, parent, turn, t FROM nodes WHERE session = 's'")
    [(node_id, parent, json.loads(text), t) for node_id, parent, text, t in rows]
    connection.close()


def raw_load_same_rows(path: Path, session_id: str) -> None:
    """The floor's SELECT + json.loads, on memstore's own table (wider rows, more pages)."""
    connection = sqlite3.connect(path)
    rows = connection.execute(
        "SELECT id, parent_id, turn_json, created_at FROM nodes WHERE session_id = ? ORDER BY pk",
        (session_id,),
    )
    [(node_id, parent, json.loads(text), t) for node_id, parent, text, t in rows]
    connection.close()


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        appended = chain("s", APPENDS)
        bare = timed(lambda: raw_appends(root / "raw.db", appended))
        SessionStore(f"sqlite:///{root / 'same.db'}").close()  # memstore's schema, empty
        prepared = same_rows("s", appended)
        floor = timed(lambda: raw_same_rows(root / "same.db", "s", prepared))
        store = SessionStore(f"sqlite:///{root / 'store.db'}")

        def append_all() -> None:
            for node in appended:
                store.append_node("s", node)

        ours = timed(append_all)
        rows = [
            ("append_node", floor / APPENDS, ours / APPENDS, ours / floor, "<= 2.5x"),
            ("  vs 2 bare tables", bare / APPENDS, ours / APPENDS, ours / bare, "(for scale)"),
        ]

        big = chain("big", 10_000)
        raw_appends(root / "raw10k.db", big)
        for node in big:
            store.append_node("big", node)
        floor, same, ours = interleaved(
            lambda: raw_load(root / "raw10k.db"),
            lambda: raw_load_same_rows(root / "store.db", "big"),
            lambda: store.load_session("big"),
            rounds=15,
        )
        rows.append(("load_session 10k", floor, ours, ours / floor, "<= 2x"))
        rows.append(("  vs memstore's table", same, ours, ours / same, "(for scale)"))

        wide = chain("wide", 20_000, branch_every=150)
        for node in wide:
            store.append_node("wide", node)
        deep = next(n for n in reversed(wide) if len(store.load_path_nodes("wide", n.id)) >= 100)
        leaf = store.load_path_nodes("wide", deep.id)[99]  # the node at depth 100
        depth = len(store.load_path_nodes("wide", leaf.id))
        whole = timed(lambda: store.load_session("wide"), repeat=3)
        path = timed(lambda: store.load_path("wide", leaf.id), repeat=3)
        rows.append((f"load_path depth {depth}", whole, path, whole / path, ">= 20x faster"))
        store.close()
    print(f"{'':22} {'floor':>12} {'memstore':>12} {'ratio':>8}  goal")
    for name, floor_time, our_time, ratio, goal in rows:
        print(
            f"{name:22} {floor_time * 1e3:10.3f}ms {our_time * 1e3:10.3f}ms {ratio:7.2f}x  {goal}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
