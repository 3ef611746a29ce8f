"""Long imports beside other writers: SQLite commits an import of a new session as it goes, so an
appender to another session waits one chunk, not the whole file; the session stays invisible
until the import completes, a refused import leaves the database as it was, and a killed one is
deleted by the next store that opens the database or the next import of the session.

The chunk time is lowered so that a 20 MB file makes many chunks in a few seconds; the longest
wait seen is printed (benchmarks/bench_import_wait.py measures it on a realistic file).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memstore import AsyncSessionStore, SessionImportingError, SessionStore
from memstore.errors import JsonlError
from memstore.store import importing

from .test_limits import write_big_session
from .test_query import check_fts
from .test_reliability_crash import (
    IMPORTER,
    Child,
    check_no_dangling_references,
    check_sqlite_file,
    imported_records,
    sql,
)

pytestmark = pytest.mark.slow  # imports killed and raced in other processes

ROOT = Path(__file__).resolve().parent.parent
SESSION = "big"
TABLES = ("sessions", "session_tags", "nodes", "node_blocks", "records", "node_usage")
VIEWS = ("turns", "blocks", "tool_calls", "session_stats", "session_sources")
SHORT_CHUNKS = "from memstore.store import importing\nimporting.CHUNK_SECONDS = 0.05\n"
Timings = list[tuple[float, float]]  # each append's start (monotonic) and duration


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A 20 MB session file (about 75,000 records) and its number of records."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    return path, write_big_session(path, 20)


@pytest.fixture
def short_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 50 ms: a 20 MB import makes dozens."""
    monkeypatch.setattr(importing, "CHUNK_SECONDS", 0.05)


def append_until(url: str, started: Any, stop: Any, results: Any) -> None:
    """Append to session `other` one turn at a time until `stop` is set; put every append's
    (start, seconds) into `results`. Runs in a thread or in a process of its own."""
    store = SessionStore(url)
    store.append("other", {"role": "user", "blocks": [{"kind": "text", "text": "first"}]})
    started.set()
    timings: Timings = []
    while not stop.is_set():
        turn = {"role": "user", "blocks": [{"kind": "text", "text": f"append {len(timings)}"}]}
        begun = time.monotonic()
        store.append("other", turn)
        timings.append((begun, time.monotonic() - begun))
    store.close()
    results.put(timings)


def import_beside_appender(url: str, source: Path, where: str) -> tuple[list[float], Timings]:
    """Import `source` while an appender (in a thread or a process) appends to another session;
    the times of the import's progress reports, and the appender's timings."""
    SessionStore(url).close()  # migrated up front
    started: Any
    stop: Any
    results: Any
    if where == "thread":
        started, stop, results = threading.Event(), threading.Event(), queue.Queue[Timings]()
        appender: Any = threading.Thread(target=append_until, args=(url, started, stop, results))
    else:
        context = multiprocessing.get_context("spawn")
        started, stop, results = context.Event(), context.Event(), context.Queue()
        appender = context.Process(target=append_until, args=(url, started, stop, results))
    appender.start()
    reports: list[float] = []
    try:
        assert started.wait(60)
        with SessionStore(url) as store:
            store.import_jsonl(
                source, session_id=SESSION, progress=lambda *_: reports.append(time.monotonic())
            )
    finally:
        stop.set()
        timings: Timings = results.get(timeout=60)
        appender.join()
    return reports, timings


@pytest.mark.usefixtures("short_chunks")
@pytest.mark.parametrize("where", ["thread", "process"])
def test_an_appender_to_another_session_keeps_appending_during_a_long_import(
    sqlite_url: str, tmp_path: Path, big_file: tuple[Path, int], where: str
) -> None:
    source, _ = big_file
    reports, timings = import_beside_appender(sqlite_url, source, where)
    first, last = reports[0], reports[-1]
    # Appends finished between the import's first and last reports: interleaved, not queued
    # behind the whole import (as when it was one transaction).
    between = [start + took for start, took in timings if first < start + took < last]
    assert len(reports) > 10
    assert len(between) > 10, f"{len(between)} appends finished while the import ran"
    during = [took for start, took in timings if start < last]
    print(f"{where}: import {last - first:.1f} s, {len(between)} appends finished meanwhile, "
          f"longest wait {max(during):.3f} s")  # fmt: skip
    with SessionStore(sqlite_url) as store:
        store.export_jsonl(SESSION, tmp_path / "out.jsonl")
        assert (tmp_path / "out.jsonl").read_bytes() == source.read_bytes()
        assert store.load_session("other").size == len(timings) + 1


def test_on_postgresql_an_appender_to_another_session_is_not_held_up_by_an_import(
    postgres_url: str, tmp_path: Path
) -> None:
    """PostgreSQL imports stay one transaction: row locks leave other sessions' writers free."""
    source = tmp_path / "five.jsonl"
    write_big_session(source, 5)
    reports, timings = import_beside_appender(postgres_url, source, "thread")
    first, last = reports[0], reports[-1]
    between = [start + took for start, took in timings if first < start + took < last]
    assert len(between) > 10, f"{len(between)} appends finished while the import ran"
    during = [took for start, took in timings if start < last]
    print(f"postgresql: import {last - first:.1f} s, longest wait {max(during):.3f} s")


def table_contents(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of memstore's tables, and the full-text index's, in a stable order."""
    contents = {table: sorted(sql(url, f"SELECT * FROM {table}"), key=repr) for table in TABLES}
    # The nodes search reaches: indexed (listed by the index's sizes table: a scan of `nodes_fts`
    # reads its content, the view) or in its backlog. Which of the two is not content: a refused
    # import's small chunks may have indexed another session's backlog.
    reached = (
        "SELECT id FROM nodes_fts_docsize UNION ALL SELECT pk FROM nodes_fts_backlog ORDER BY 1"
    )
    contents["nodes_fts"] = sql(url, reached)
    return contents


def session_rows(url: str) -> int:
    """How many rows of session `big` the tables hold, visible or not."""
    query = "SELECT (SELECT count(*) FROM nodes WHERE session_id = :s) + "
    query += "(SELECT count(*) FROM records WHERE session_id = :s)"
    return int(sql(url, query, s=SESSION)[0][0])


def what_readers_see(store: SessionStore, word: str) -> list[str]:
    """Every way a reader could see session `big` (empty: it sees nothing of it)."""
    seen = []
    if SESSION in store.list_sessions():
        seen.append("list_sessions")
    if any(info.id == SESSION for info in store.sessions()):
        seen.append("sessions")
    if store.load_session(SESSION).size or store.head(SESSION) is not None:
        seen.append("load_session")
    if store.stats().sessions != 2:  # the bystander and `other`
        seen.append("stats")
    if store.search(word):
        seen.append("search")
    for view in VIEWS:
        query = f"SELECT count(*) FROM {view} WHERE session_id = '{SESSION}'"
        if store.read_only_query(query).rows != [(0,)]:
            seen.append(view)
    return seen


def poll_while(running: Callable[[], bool], look: Callable[[], None]) -> threading.Thread:
    """A thread calling `look` until `running` says the import is over."""

    def loop() -> None:
        while running():
            look()

    thread = threading.Thread(target=loop)
    thread.start()
    return thread


@pytest.mark.usefixtures("short_chunks")
def test_a_refused_import_leaves_the_database_as_it_was_and_was_never_visible(
    sqlite_url: str, tmp_path: Path, big_file: tuple[Path, int]
) -> None:
    source, _ = big_file
    lines = source.read_bytes().split(b"\n")
    bad_line = len(lines) * 3 // 4
    lines[bad_line] = b'{"type":"node","node":'
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"\n".join(lines))
    word = "parseRecord"  # in the file's turns, not in the other sessions'
    with SessionStore(sqlite_url) as store:
        store.import_jsonl(ROOT / "tests/fixtures/legacy-jsonl/branching.jsonl")
        store.append("other", {"role": "user", "blocks": [{"kind": "text", "text": "hi"}]})
    before = table_contents(sqlite_url)
    importing_done = threading.Event()
    seen: list[str] = []
    polls_with_rows = 0
    refusals: list[str] = []
    reader = SessionStore(sqlite_url)

    def look() -> None:
        nonlocal polls_with_rows
        present = session_rows(sqlite_url)  # committed chunks: there, but not to be seen
        seen.extend(what_readers_see(reader, word))
        if present:
            polls_with_rows += 1
            if not refusals:
                turn = {"role": "user", "blocks": [{"kind": "text", "text": "sneak"}]}
                with pytest.raises(SessionImportingError, match=r"being imported by process \d+"):
                    reader.append(SESSION, turn)
                with pytest.raises(SessionImportingError) as refused:
                    reader.import_jsonl(source, session_id=SESSION)
                refusals.append(str(refused.value))

    thread = poll_while(lambda: not importing_done.is_set(), look)
    try:
        with SessionStore(sqlite_url) as store, pytest.raises(JsonlError) as error:
            store.import_jsonl(broken, session_id=SESSION)
    finally:
        importing_done.set()
        thread.join()
        reader.close()
    assert f"broken.jsonl:{bad_line + 1}" in str(error.value)
    assert seen == []
    assert polls_with_rows > 0, "no poll ran while the import's chunks were committed"
    assert refusals
    assert "being imported" in refusals[0]
    assert table_contents(sqlite_url) == before
    check_sqlite_file(sqlite_url)
    check_fts(sqlite_url)


async def open_async_store(url: str) -> list[str]:
    """Open an AsyncSessionStore (which cleans up, as a SessionStore does); then ask it again."""
    async with AsyncSessionStore(url) as store:
        return await store.clean_abandoned_imports()


@pytest.mark.parametrize("cleaner", ["opening a store", "opening an async store", "importing"])
def test_a_killed_import_is_never_visible_and_is_cleaned_up(
    sqlite_url: str, tmp_path: Path, big_file: tuple[Path, int], cleaner: str
) -> None:
    source, records = big_file
    with SessionStore(sqlite_url) as store:
        store.import_jsonl(ROOT / "tests/fixtures/legacy-jsonl/branching.jsonl")
        store.append("other", {"role": "user", "blocks": [{"kind": "text", "text": "hi"}]})
    before = table_contents(sqlite_url)
    with Child(
        SHORT_CHUNKS + IMPORTER, sqlite_url, str(source), stderr=tmp_path / "stderr"
    ) as child:
        child.wait_for(lambda lines: imported_records(lines) >= records // 4)
        child.kill()
    assert not any(line.startswith("imported") for line in child.lines)
    check_sqlite_file(sqlite_url)
    check_no_dangling_references(sqlite_url)
    assert session_rows(sqlite_url) > 0  # the chunks committed before the kill
    with SessionStore(sqlite_url, read_only=True) as reader:
        assert what_readers_see(reader, "parseRecord") == []
    if cleaner == "opening a store":
        with SessionStore(sqlite_url) as store:
            assert session_rows(sqlite_url) == 0
            assert store.clean_abandoned_imports() == []
    if cleaner == "opening an async store":
        assert asyncio.run(open_async_store(sqlite_url)) == []
    if cleaner != "importing":
        assert table_contents(sqlite_url) == before
    with SessionStore(sqlite_url, auto_migrate=False) as store:  # opening it cleans nothing
        report = store.import_jsonl(source, session_id=SESSION)
        assert report.records == records
        store.export_jsonl(SESSION, tmp_path / "out.jsonl")
        assert (tmp_path / "out.jsonl").read_bytes() == source.read_bytes()
    check_no_dangling_references(sqlite_url)
