"""A deleting prune racing other writers, with real threads on a real SQLite file and the real
PostgreSQL server: an append to a session being pruned either fails with a memstore error or
lands whole (its session survives, or goes whole with it); nothing is left half-deleted. A
session still being imported is never selected, however its committed chunks look.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy

from memstore import SessionStore
from memstore.errors import HeadMovedError, MemstoreError, UnknownNodeError
from memstore.store import importing

from .test_limits import write_big_session
from .test_prune import say
from .test_query import check_fts

SESSIONS = 12
TURNS = 4
MODES = ("expected_head", "parent", "plain")  # how each racing append names where it goes


def rows_of(url: str, session_id: str) -> dict[str, int]:
    """How many rows of `session_id` every table with a session column holds (a session's
    own row under `sessions`), visible to the API or not."""
    engine = sqlalchemy.create_engine(url)
    try:
        inspector = sqlalchemy.inspect(engine)
        counts: dict[str, int] = {}
        with engine.connect() as connection:
            for table in inspector.get_table_names():
                columns = {column["name"] for column in inspector.get_columns(table)}
                key = "id" if table == "sessions" else "session_id"
                if key not in columns:
                    continue
                query = sqlalchemy.text(f'SELECT count(*) FROM "{table}" WHERE {key} = :s')
                counts[table] = connection.execute(query, {"s": session_id}).scalar_one()
        return {table: count for table, count in counts.items() if count}
    finally:
        engine.dispose()


def race_once(url: str, round_: int) -> None:
    """`SESSIONS` sessions of `TURNS` turns, idle since a cut-off; a deleting prune of the
    sessions idle since it, started at once with one append to each session."""
    ids = [f"r{round_}-{n}" for n in range(SESSIONS)]
    paths: dict[str, list[str]] = {}
    with SessionStore(url) as store:
        for session_id in ids:
            paths[session_id] = [n.id for n in store.append_many(session_id, [say("old")] * TURNS)]
    time.sleep(0.01)
    cut_off = int(time.time() * 1000)  # every append after it moves its session past it
    time.sleep(0.01)
    start = threading.Barrier(SESSIONS + 1)
    outcomes: dict[str, Any] = {}
    reports: list[Any] = []

    def prune() -> None:
        with SessionStore(url) as store:
            start.wait()
            reports.append(store.prune(older_than=timedelta(0), now=cut_off, dry_run=False))

    def append(n: int, session_id: str) -> None:
        mode = MODES[n % len(MODES)]
        where: dict[str, Any] = {}
        if mode == "expected_head":
            where["expected_head"] = paths[session_id][-1]
        elif mode == "parent":
            where["parent"] = paths[session_id][1]  # a fork off the second turn
        with SessionStore(url) as store:
            start.wait()
            time.sleep(n * 0.004 * round_)  # round 0 all at once; later ones spread out
            try:
                outcomes[session_id] = (mode, store.append(session_id, say(f"new {n}"), **where))
            except MemstoreError as exc:
                outcomes[session_id] = (mode, exc)

    threads = [threading.Thread(target=prune)]
    threads += [threading.Thread(target=append, args=(n, s)) for n, s in enumerate(ids)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    (report,) = reports
    pruned = {session.id: session for session in report.sessions}
    assert set(pruned) <= set(ids)

    with SessionStore(url) as store:
        for session_id in ids:
            mode, outcome = outcomes[session_id]
            rows = rows_of(url, session_id)
            if isinstance(outcome, MemstoreError):
                # The prune came first: the append, waiting for it, found the session gone
                # and wrote nothing, not even an empty session.
                assert session_id in pruned, (session_id, outcome)
                assert pruned[session_id].node_count == TURNS
                expected = HeadMovedError if mode == "expected_head" else UnknownNodeError
                assert isinstance(outcome, expected), (session_id, mode, outcome)
                assert rows == {}, (session_id, rows)
                continue
            node = outcome
            if session_id in pruned:
                # The prune came first; a plain append then starts the session afresh, with
                # the new turn as its root and nothing of the pruned session.
                assert mode == "plain", (session_id, mode)
                assert pruned[session_id].node_count == TURNS
                assert node.parent is None
                assert [n.id for n in store.load_path_nodes(session_id)] == [node.id]
                continue
            # The append came first: the session, updated since the cut-off, is kept whole.
            assert node.parent == (
                paths[session_id][1] if mode == "parent" else paths[session_id][-1]
            )
            expected_path = [*paths[session_id][: 2 if mode == "parent" else TURNS], node.id]
            assert [n.id for n in store.load_path_nodes(session_id)] == expected_path
            assert len(store.load_session(session_id).all()) == TURNS + 1
            assert store.session_info(session_id).head == node.id
    check_fts(url)


@pytest.mark.parametrize("round_", range(4))
def test_a_deleting_prune_and_racing_appends_leave_no_half_session(
    database_url: str, round_: int
) -> None:
    SessionStore(database_url).close()  # migrated before the race
    race_once(database_url, round_)


def import_mark(sqlite_url: str) -> tuple[bool, str | None]:
    """Whether session `big` has a row, and its import mark (None: not being imported)."""
    connection = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    try:
        row = connection.execute("SELECT importing FROM sessions WHERE id = 'big'").fetchone()
    finally:
        connection.close()
    return (row is not None, None if row is None else row[0])


def test_a_session_being_imported_is_never_pruned(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's imports commit chunk by chunk: a prune that would take every session (older
    than 0 at a far future time, with its unreachable nodes) runs, deleting, again and again
    while the import's chunks are there, and never selects the session; the import ends whole."""
    monkeypatch.setattr(importing, "CHUNK_SECONDS", 0.05)
    source = tmp_path / "big.jsonl"
    write_big_session(source, 3)
    node_count = source.read_bytes().count(b'{"type":"node"')
    far = int(time.time() * 1000) + 10**12
    done = threading.Event()
    during: list[set[str]] = []  # what each prune run wholly while `big` was marked named
    after: list[Any] = []  # a prune that found the import over (at most one)
    reports: list[Any] = []  # every prune's report (the import may end during one)

    def prune_while_importing() -> None:
        with SessionStore(sqlite_url) as store:
            while not done.is_set():
                bystander = f"bystander-{len(during) + len(after)}"
                store.append(bystander, say("idle"))
                there, mark = import_mark(sqlite_url)
                report = store.prune(
                    older_than=timedelta(0), unreachable=True, now=far, dry_run=False
                )
                reports.append(report)
                named = {s.id for s in report.sessions} | {b.session_id for b in report.branches}
                assert bystander in named  # the prune does select and delete
                if there and mark is None:  # the import was over: the session is fair game
                    after.append(report)
                    return
                if mark is not None and import_mark(sqlite_url)[1] is not None:
                    during.append(named)

    SessionStore(sqlite_url).close()
    thread = threading.Thread(target=prune_while_importing)
    thread.start()
    try:
        with SessionStore(sqlite_url) as store:
            store.import_jsonl(source, session_id="big")
    finally:
        done.set()
        thread.join(120)
    assert len(during) > 3, "too few prunes ran while the import's chunks were committed"
    assert [named for named in during if "big" in named] == []
    with SessionStore(sqlite_url) as store:
        taken = [s for report in reports for s in report.sessions if s.id == "big"]
        if taken:
            # A prune that ran once the import had ended (the import may end between its check
            # of the mark and the prune) took the session, whole.
            assert [s.node_count for s in taken] == [node_count]
            assert rows_of(sqlite_url, "big") == {}
        else:
            exported = tmp_path / "again.jsonl"
            store.export_jsonl("big", exported)
            assert exported.read_bytes() == source.read_bytes()
    check_fts(sqlite_url)
