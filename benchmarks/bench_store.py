"""The SQL store against raw sqlite3, as ratios measured in one run.

- bytes per turn on disk (the pages of every table and index) after those appends, vs the two
  bare tables of the floor below, for scale (these turns are small: ids and indexes weigh;
  the peer harness measures the goal, <= 2x its floor, on 1.2 KB turns);
- durable `append_node` (one commit per append) vs raw `sqlite3` insert + commit of the same
  rows: the rows memstore writes for an append (node, blocks, log record, head), prepared in
  advance, into memstore's own schema (its indexes and full-text triggers included), with the
  same journal mode and synchronous level — goal <= 2.5x. Also shown, for scale: the same
  appends as two rows into two bare tables (what the schema itself costs);
- `load_session` of a 10,000-node session vs raw `SELECT` + `json.loads` — goal <= 2x. Also
  shown: the same raw read of memstore's own table, whose rows are wider (search text, role);
- `load_path` to a leaf at depth 100 in a 20,000-node session vs `load_session` — goal >= 20x
  faster;
- `AsyncSessionStore` vs `SessionStore`, the same appends and loads, by the wall clock and by
  CPU time — goal <= 1.2x;
- a session handle's open + `refresh()` on a 3,000-node session vs what they cost before handles
  were light (a `load_session` each) — goal >= 20x faster.

With `--postgres URL`, the same on PostgreSQL, for 500, 5,000 and 20,000 turns appended one by
one to a fresh database (a new schema): per-append cost, first tenth vs last tenth (goal <= 1.3),
and vs a floor of raw psycopg 3 writing the same rows into the same schema, one transaction per
turn, with prepared statements (goal <= 2.5x), the two runs taking turns in 50 slices so that
the machine's noise lands on both alike; `load_session` vs one raw `SELECT` + `json.loads`
(goal <= 2x); `load_path` of the whole chain vs `load_session` (goal <= 1.5x) and vs the raw read;
`load_path(last=50)` vs a raw read of the newest 50 rows; and the async store against the sync one.

    python benchmarks/bench_store.py
    python benchmarks/bench_store.py --postgres postgresql://127.0.0.1:5432/test [--sizes 500,5000]
    python benchmarks/bench_store.py --handles [--postgres URL]   (the handle rows only)
    python benchmarks/bench_store.py --redact   (the redaction rows only)
    python benchmarks/bench_store.py --async-only --rounds 5 [--postgres URL] [--async-turns N]
        (the async vs sync rows only, N turns, each round on fresh databases: every round's
        ratios and their medians)

With `--redact`, durable `append` of the same turns (SQLite) to a store opened with
`redact=secrets()` vs one without, the two taking turns in 50 slices — goal <= 1.1x; the same
with one turn in ten holding a secret (for scale: those are redacted, hashed anew); and the
ready-made redactor alone per turn, on turns without and with secrets (`json_text` computed
already, as an append has it), in microseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import itertools
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scratch_schemas import FreshSchemas, scratch_schema

from memstore import AsyncSessionStore, SessionGraph, SessionNode, SessionStore, jsjson
from memstore.redact import secrets
from memstore.store.rows import stored_rows

APPENDS = 2000
SLICES = 50
"""How many slices the appends of two stores being compared alternate in."""


def turn(i: int) -> dict[str, object]:
    if i % 2:
        return {
            "role": "assistant",
            "blocks": [
                {"kind": "text", "text": f"Answer {i}: " + "details " * 30},
                {
                    "kind": "tool_call",
                    "id": f"c{i}",
                    "name": "grep",
                    "input": {"pattern": f"x{i}"},
                },
            ],
        }
    return {
        "role": "user",
        "blocks": [{"kind": "text", "text": f"Question {i}? " + "why " * 20}],
    }


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
            (
                "s",
                node.id,
                node.parent,
                jsjson.dumps(node.turn.to_json()),
                node.created_at,
            ),
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
            "INSERT INTO nodes (session_id, id, parent_id, role, created_at, turn_json)"
            " VALUES (:session_id, :id, :parent_id, :role, :created_at, :turn_json)",
            node,
        )
        connection.execute(  # the text memstore indexes: the view's, derived from turn_json
            "INSERT INTO nodes_fts (rowid, search_text)"
            " SELECT pk, search_text FROM node_search WHERE pk = last_insert_rowid()"
        )
        connection.executemany(
            "INSERT INTO node_blocks (session_id, node_id, position, kind, tool_name, call_id,"
            " is_error) VALUES (:session_id, :node_id, :position, :kind, :tool_name, :call_id,"
            " :is_error)",
            blocks,
        )
        connection.execute(
            "INSERT INTO records (session_id, kind, node_id) VALUES (?, 'append', ?)",
            record,
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
        "SELECT id, parent_id, turn_json, created_at FROM nodes WHERE session_id = ? AND pk > 0"
        " ORDER BY pk",
        (session_id,),
    )
    [(node_id, parent, json.loads(text), t) for node_id, parent, text, t in rows]
    connection.close()


def sqlite_main() -> int:
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
        sizes = (stored_bytes(root / "raw.db"), stored_bytes(root / "store.db"))
        rows = [
            ("append_node", floor / APPENDS, ours / APPENDS, ours / floor, "<= 2.5x"),
            (
                "  vs 2 bare tables",
                bare / APPENDS,
                ours / APPENDS,
                ours / bare,
                "(for scale)",
            ),
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
        rows.extend(async_rows(lambda name: f"sqlite:///{root / name}.db", 2000))
    report(rows)
    bare_bytes, our_bytes = (size / APPENDS for size in sizes)
    print(
        f"{'bytes per turn vs 2 bare tables':30} {bare_bytes:11.0f}B {our_bytes:11.0f}B "
        f"{our_bytes / bare_bytes:7.2f}x  (for scale)"
    )
    return 0


def stored_bytes(path: Path) -> int:
    """Bytes of the pages the tables and indexes of a database use (its WAL included)."""
    connection = sqlite3.connect(path)
    try:
        ((size,),) = connection.execute("SELECT sum(pgsize) FROM dbstat").fetchall()
    finally:
        connection.close()
    return int(size)


Row = tuple[str, float, float, float, str]


def report(rows: list[Row], floor: str = "floor") -> None:
    """Print rows of (what, floor seconds, memstore seconds, ratio, goal); a row whose name
    ends with "last/first" holds ratios, not seconds."""
    print(f"{'':30} {floor:>12} {'memstore':>12} {'ratio':>8}  goal")
    for name, floor_time, our_time, ratio, goal in rows:
        if name.endswith("last/first"):
            print(f"{name:30} {floor_time:11.2f}x {our_time:11.2f}x {'':8}  {goal}")
            continue
        print(
            f"{name:30} {floor_time * 1e3:10.3f}ms {our_time * 1e3:10.3f}ms {ratio:7.2f}x  {goal}"
        )


LOAD_ROUNDS = 15
"""Rounds of the async vs sync loads: each store's best of as many."""


async def wall_and_cpu(action: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU (`time.process_time`, every thread's) seconds of one call, awaited if it
    is a coroutine. What it returns is freed once the clocks have stopped, for both stores
    alike: freeing 1,000 loaded turns takes about a seventh of their load's time (0.7 of 5 ms),
    and the async loads' timing held two such frees (its own result's, and the sync load's
    before it) where the sync one's held none."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    result = action()
    if inspect.isawaitable(result):
        result = await result
    elapsed = time.perf_counter() - wall, time.process_time() - cpu
    del result
    return elapsed


def async_rows(url_of: Callable[[str], str], count: int) -> list[Row]:
    """The sync and the async store, each appending the same `count` turns one by one to a
    fresh database, then loading the session and its path: async time vs sync time, by the
    wall clock and by CPU time. The two take turns (slices of appends, then one load each per
    round), so noise hits both alike."""
    nodes = chain("s", count)

    async def run() -> list[tuple[float, float]]:
        sync_store = SessionStore(url_of("sync"))
        async with AsyncSessionStore(url_of("async")) as async_store:

            def sync_appends(part: list[SessionNode]) -> None:
                for node in part:
                    sync_store.append_node("s", node)

            async def async_appends(part: list[SessionNode]) -> None:
                for node in part:
                    await async_store.append_node("s", node)

            appends = [[0.0, 0.0], [0.0, 0.0]]  # [wall, cpu] of the sync and the async store
            step = max(count // SLICES, 1)
            for first in range(0, count, step):
                part = nodes[first : first + step]
                for total, appending in zip(appends, (sync_appends, async_appends), strict=True):
                    wall, cpu = await wall_and_cpu(lambda: appending(part))  # noqa: B023
                    total[0] += wall
                    total[1] += cpu
            loads: list[Callable[[], object]] = [
                lambda: sync_store.load_session("s"),
                lambda: async_store.load_session("s"),
                lambda: sync_store.load_path("s"),
                lambda: async_store.load_path("s"),
            ]
            best = [[float("inf"), float("inf")] for _ in loads]
            for _ in range(LOAD_ROUNDS):
                for index, action in enumerate(loads):
                    wall, cpu = await wall_and_cpu(action)
                    best[index] = [min(best[index][0], wall), min(best[index][1], cpu)]
        sync_store.close()
        return [(wall, cpu) for wall, cpu in (*appends, *best)]

    gc.collect()
    times = asyncio.run(run())
    rows: list[Row] = []
    for what, (sync_times, async_times) in zip(
        (f"append x{count}", f"load_session {count}", f"load_path {count}"),
        zip(times[::2], times[1::2], strict=True),
        strict=True,
    ):
        for clock, label in ((0, ""), (1, ", CPU")):
            sync_time, async_time = sync_times[clock], async_times[clock]
            rows.append(
                (
                    f"async {what}{label}",
                    sync_time,
                    async_time,
                    async_time / sync_time,
                    "<= 1.2x sync",
                )
            )
    return rows


HANDLE_NODES = 3000


def handle_rows(url: str, label: str) -> list[Row]:
    """Opening a handle on a 3,000-node session and refreshing it, against two `load_session`
    calls: what `store.session(id)` and `refresh()` each did when handles held the graph."""
    store = SessionStore(url)
    try:
        for node in chain("h", HANDLE_NODES):
            store.append_node("h", node)

        def open_and_refresh() -> None:
            store.session("h").refresh()

        before, after = interleaved(
            lambda: (store.load_session("h"), store.load_session("h")),
            open_and_refresh,
            rounds=10,
        )
    finally:
        store.close()
    return [(f"{label}: open+refresh 3k", before, after, before / after, ">= 20x faster")]


def handles_main(postgres: str | None) -> int:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        rows.extend(handle_rows(f"sqlite:///{Path(folder) / 'handles.db'}", "sqlite"))
    if postgres:
        with scratch_schema(postgres) as url:
            rows.extend(handle_rows(url, "postgres"))
    report(rows, floor="graph loads")
    return 0


# --- PostgreSQL ---------------------------------------------------------------------------------


_FLOOR_NODE = (
    "INSERT INTO nodes (session_id, id, parent_id, role, created_at, turn_json)"
    " VALUES (%(session_id)s, %(id)s, %(parent_id)s, %(role)s, %(created_at)s, %(turn_json)s)"
)
_FLOOR_BLOCK = (
    "INSERT INTO node_blocks (session_id, node_id, position, kind, tool_name, call_id, is_error)"
    " VALUES (%(session_id)s, %(node_id)s, %(position)s, %(kind)s, %(tool_name)s, %(call_id)s,"
    " %(is_error)s)"
)
_FLOOR_RECORD = "INSERT INTO records (session_id, kind, node_id) VALUES (%s, 'append', %s)"
_FLOOR_HEAD = "UPDATE sessions SET head = %s, updated_at = %s WHERE id = %s"
_FLOOR_READ = (
    "SELECT id, parent_id, turn_json, created_at FROM nodes WHERE session_id = %s ORDER BY pk"
)
_FLOOR_READ_LAST = (
    "SELECT id, parent_id, turn_json, created_at FROM nodes WHERE session_id = %s AND pk > 0"
    " ORDER BY pk DESC LIMIT %s"
)


def floor_appends(connection: Any, prepared: list[tuple[Any, ...]]) -> list[float]:
    """Raw psycopg: per turn, one transaction writing the rows memstore writes; each one's time."""
    times = []
    for node, blocks, record, head in prepared:
        start = time.perf_counter()
        with connection.transaction(), connection.cursor() as cursor:
            cursor.execute(_FLOOR_NODE, node, prepare=True)
            if blocks:
                cursor.executemany(_FLOOR_BLOCK, blocks)
            cursor.execute(_FLOOR_RECORD, record, prepare=True)
            cursor.execute(_FLOOR_HEAD, head, prepare=True)
        times.append(time.perf_counter() - start)
    return times


def floor_read(connection: Any, session_id: str, last: int | None = None) -> None:
    """Raw psycopg: one SELECT of the session's rows (or its newest `last`) + json.loads."""
    with connection.cursor() as cursor:
        if last is None:
            cursor.execute(_FLOOR_READ, (session_id,), prepare=True)
        else:
            cursor.execute(_FLOOR_READ_LAST, (session_id, last), prepare=True)
        [(node_id, parent, json.loads(text), t) for node_id, parent, text, t in cursor]
        connection.commit()


def store_appends(store: SessionStore, nodes: list[SessionNode]) -> list[float]:
    """memstore: `append_node` of each node, one transaction each; each one's time."""
    times = []
    for node in nodes:
        start = time.perf_counter()
        store.append_node("s", node)
        times.append(time.perf_counter() - start)
    return times


def tenths(times: list[float]) -> tuple[float, float]:
    """The mean of the first tenth and of the last tenth."""
    tenth = max(len(times) // 10, 1)
    return statistics.fmean(times[:tenth]), statistics.fmean(times[-tenth:])


def postgres_size(schemas: FreshSchemas, count: int) -> list[Row]:
    """One size: memstore and the floor, each appending `count` turns to a fresh schema."""
    import psycopg

    nodes = chain("s", count)
    floor_schema = schemas.new()
    SessionStore(schemas.store_url(floor_schema)).close()  # memstore's schema, empty
    raw = psycopg.connect(schemas.url, options=f"-csearch_path={floor_schema}")
    raw.execute("INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', 0, 0)")
    raw.commit()

    store = SessionStore(schemas.new_url())
    times: list[float] = []
    floor_times: list[float] = []
    rows = same_rows("s", nodes)
    # The two append runs take turns, a slice of each at a time, so that both grow their tables
    # through the same stretch of the machine's life (other jobs, checkpoints, autovacuum): a
    # burst of noise lands in the same tenth of each run, not in one run's last tenth only.
    step = max(count // SLICES, 1)
    for start in range(0, count, step):
        floor_times.extend(floor_appends(raw, rows[start : start + step]))
        times.extend(store_appends(store, nodes[start : start + step]))
    rounds = 5 if count <= 5000 else 3
    floor_load, load, path, floor_last, last = interleaved(
        lambda: floor_read(raw, "s"),
        lambda: store.load_session("s"),
        lambda: store.load_path("s"),
        lambda: floor_read(raw, "s", 50),
        lambda: store.load_path("s", last=50),
        rounds=rounds,
    )
    store.close()
    raw.close()
    first, final = tenths(times)
    floor_first, floor_final = tenths(floor_times)
    mean, floor_mean = statistics.fmean(times), statistics.fmean(floor_times)
    return [
        (f"{count}: append, first tenth", floor_first, first, first / floor_first, ""),
        (f"{count}: append, last tenth", floor_final, final, final / floor_final, ""),
        (
            f"{count}: append, last/first",
            floor_final / floor_first,
            final / first,
            final / first,
            "<= 1.3 (memstore's)",
        ),
        (f"{count}: append, mean", floor_mean, mean, mean / floor_mean, "<= 2.5x"),
        (f"{count}: load_session", floor_load, load, load / floor_load, "<= 2x"),
        (f"{count}: load_path (whole)", floor_load, path, path / floor_load, ""),
        (
            f"{count}: load_path/load_session",
            load,
            path,
            path / load,
            "<= 1.5x" if count >= 20_000 else "(the goal is at 20,000)",
        ),
        (f"{count}: load_path(last=50)", floor_last, last, last / floor_last, ""),
    ]


def async_main(postgres: str | None, count: int, rounds: int) -> int:
    """The async vs sync rows only, `rounds` times on fresh databases: each round's ratios,
    then their medians (a loaded machine moves a single round's by a fifth or more)."""
    ratios: dict[str, list[float]] = {}
    for _ in range(rounds):
        if postgres:
            with FreshSchemas(postgres) as schemas:
                rows = async_rows(lambda _: schemas.new_url(), count)
        else:
            with tempfile.TemporaryDirectory() as folder:
                rows = async_rows(lambda name: f"sqlite:///{Path(folder) / name}.db", count)
        report(rows, floor="sync")
        for name, _sync, _async, ratio, _goal in rows:
            ratios.setdefault(name, []).append(ratio)
    for name, found in ratios.items():
        every = ", ".join(f"{ratio:.2f}" for ratio in found)
        print(f"{name:30} median {statistics.median(found):.2f}x of {rounds} ({every})")
    return 0


def postgres_main(url: str, sizes: list[int], async_count: int) -> int:
    rows: list[Row] = []
    with FreshSchemas(url) as schemas:
        for count in sizes:
            rows.extend(postgres_size(schemas, count))
        if async_count:
            rows.extend(async_rows(lambda _: schemas.new_url(), async_count))
    report(rows, floor="floor/sync")
    return 0


# --- redaction ---------------------------------------------------------------------------------


SECRET = "sk-proj-" + "a1B2c3D4" * 4


def secret_turn(i: int) -> dict[str, object]:
    """`turn(i)` with an API key in its text, as a tool's output might hold one."""
    plain = turn(i)
    blocks: Any = plain["blocks"]
    first = {**blocks[0], "text": f"{blocks[0]['text']} key={SECRET}"}
    return {**plain, "blocks": [first, *blocks[1:]]}


def redacted_appends(root: Path, name: str, turns: list[dict[str, object]]) -> tuple[float, float]:
    """`append` of `turns` one by one, to a store without a redactor and to one with
    `secrets()`, in slices taken in turn: the total time of each."""
    plain = SessionStore(f"sqlite:///{root / f'{name}-plain.db'}")
    redacting = SessionStore(f"sqlite:///{root / f'{name}-redact.db'}", redact=secrets())
    totals = [0.0, 0.0]
    step = max(len(turns) // SLICES, 1)
    gc.collect()
    for first in range(0, len(turns), step):
        for index, store in enumerate((plain, redacting)):
            start = time.perf_counter()
            for item in turns[first : first + step]:
                store.append("s", item)
            totals[index] += time.perf_counter() - start
    plain.close()
    redacting.close()
    return totals[0], totals[1]


def redactor_alone(turns: list[dict[str, object]], rounds: int = 5) -> float:
    """Seconds per turn of `secrets()` on parsed turns whose JSON text is computed already."""
    from memstore.types import parse_turn

    redact = secrets()
    parsed = [parse_turn(item) for item in turns]
    for item in parsed:
        item.json_text()
    best = timed(lambda: [redact(item) for item in parsed], repeat=rounds)
    return best / len(parsed)


def redact_main() -> int:
    clean = [turn(i) for i in range(APPENDS)]
    mixed = [secret_turn(i) if i % 10 == 0 else turn(i) for i in range(APPENDS)]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        rows: list[Row] = []
        for label, turns, goal in (
            ("append, no secrets", clean, "<= 1.1x"),
            ("append, 1 in 10 a secret", mixed, "(for scale)"),
        ):
            floor, ours = redacted_appends(root, label.split(",")[1].strip()[:2], turns)
            rows.append((label, floor / APPENDS, ours / APPENDS, ours / floor, goal))
    report(rows, floor="no redactor")
    for label, turns in (
        ("per turn, no secret", clean),
        ("per turn with a secret", [secret_turn(i) for i in range(APPENDS)]),
    ):
        print(f"{'secrets() ' + label:30} {redactor_alone(turns) * 1e6:10.1f}us")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", metavar="URL", help="benchmark PostgreSQL at URL")
    parser.add_argument("--sizes", default="500,5000,20000", help="turns appended (PostgreSQL)")
    parser.add_argument(
        "--async-turns",
        type=int,
        default=2000,
        help="turns of the async vs sync run (PostgreSQL)",
    )
    parser.add_argument("--async-only", action="store_true", help="only the async vs sync rows")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of --async-only")
    parser.add_argument("--handles", action="store_true", help="only the session handle rows")
    parser.add_argument("--redact", action="store_true", help="only the redaction rows")
    args = parser.parse_args()
    if args.redact:
        return redact_main()
    if args.handles:
        return handles_main(args.postgres)
    if args.async_only:
        return async_main(args.postgres, args.async_turns, args.rounds)
    if args.postgres:
        sizes = [int(size) for size in args.sizes.split(",")]
        return postgres_main(args.postgres, sizes, args.async_turns)
    return sqlite_main()


if __name__ == "__main__":
    raise SystemExit(main())
