"""Views, full-text search and read-only SQL: the same assertions on SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import resource
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy.engine import make_url

from memstore import SessionGraph, SessionStore
from memstore.errors import InvalidArgumentError, QueryError
from memstore.jsonl import JsonlSessionStore
from memstore.store.import_batch import BATCH_ROWS
from memstore.store.rows import block_rows, search_text, stored_rows
from memstore.store.search import _postgres_hits, _split_query, derived_search_text
from memstore.store.tables import TENANT_KEY

from .conftest import LEGACY


def say(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "blocks": [{"kind": "text", "text": text}]}


@pytest.fixture
def filled(store: SessionStore) -> SessionStore:
    """One small session with text, thinking, a failed and a good tool call, and a branch."""
    clock = itertools.count(1_767_225_600_000, 1000)
    graph = SessionGraph("s", clock=clock.__next__)
    graph.append(say("user", "Why does the flaky upload test fail?"))
    graph.append({"role": "assistant", "blocks": [
        {"kind": "thinking", "text": "Probably a race in the uploader."},
        {"kind": "tool_call", "id": "c1", "name": "run_tests", "input": {"only": "upload"}},
    ]})  # fmt: skip
    graph.append({"role": "user", "blocks": [
        {"kind": "tool_result", "callId": "c1", "output": "1 failed: timeout", "isError": True},
    ]})  # fmt: skip
    fork = graph.append({"role": "assistant", "blocks": [
        {"kind": "tool_call", "id": "c2", "name": "grep", "input": {"pattern": "sleep"}},
    ]})  # fmt: skip
    graph.append({"role": "user", "blocks": [
        {"kind": "tool_result", "callId": "c2", "output": ["tests/test_upload.py:41"]},
    ]})  # fmt: skip
    graph.append(say("assistant", "The test sleeps instead of waiting for the upload event."))
    graph.branch_from(fork.id)
    graph.append(say("assistant", "Zebra answers are on another branch."))
    for node in graph.all():
        store.append_node("s", node)
    store.update_session("s", title="Flaky upload")
    return store


def rows(store: SessionStore, sql: str) -> list[tuple[Any, ...]]:
    return store.read_only_query(sql).rows


def test_the_turns_view(filled: SessionStore) -> None:
    turns = rows(filled, "SELECT role, text FROM turns WHERE session_id = 's' ORDER BY seq")
    assert turns[0] == ("user", "Why does the flaky upload test fail?")
    assert turns[1] == ("assistant", None)  # thinking and a tool call: no text blocks
    assert len(turns) == 7


def test_the_blocks_view(filled: SessionStore) -> None:
    blocks = rows(
        filled,
        "SELECT b.position, b.kind, b.text, b.tool_name, b.call_id, b.is_error "
        "FROM blocks b JOIN turns t ON t.node_id = b.node_id AND t.session_id = b.session_id "
        "WHERE t.seq IN (SELECT seq FROM turns ORDER BY seq LIMIT 3) "
        "ORDER BY t.seq, b.position",
    )
    assert blocks == [
        (0, "text", "Why does the flaky upload test fail?", None, None, None),
        (0, "thinking", "Probably a race in the uploader.", None, None, None),
        (1, "tool_call", None, "run_tests", "c1", None),
        (0, "tool_result", None, None, "c1", 1),
    ]


def test_the_tool_calls_view_joins_calls_with_results(filled: SessionStore) -> None:
    calls = rows(
        filled,
        "SELECT call_id, tool_name, is_error, output_json, answered_at - called_at "
        "FROM tool_calls ORDER BY call_id",
    )
    assert calls == [
        ("c1", "run_tests", 1, '"1 failed: timeout"', 1000),
        ("c2", "grep", 0, '["tests/test_upload.py:41"]', 1000),
    ]


def test_the_session_stats_view(filled: SessionStore) -> None:
    (stats,) = rows(
        filled,
        "SELECT title, nodes, user_turns, assistant_turns, branches, tool_calls, "
        "failed_tool_calls FROM session_stats",
    )
    assert stats == ("Flaky upload", 7, 3, 4, 2, 2, 1)


def test_the_sql_pages_examples_run(store: SessionStore) -> None:
    store.import_jsonl(LEGACY)
    if store.engine.dialect.name == "postgresql":
        # What autovacuum does to a filled database: the reading login is held to the tenant
        # policies, and on tables never analyzed PostgreSQL plans their joins for a few rows
        # (docs/tenants.md, "What it does not stop").
        analyzing = sqlalchemy.create_engine(store.engine.url.set(drivername="postgresql+psycopg"))
        with analyzing.begin() as connection:
            connection.exec_driver_sql("ANALYZE sessions, nodes, node_blocks, records")
        analyzing.dispose()
    page = (Path(__file__).parent.parent / "docs" / "sql.md").read_text()
    examples = [block.split("```", 1)[0].strip() for block in page.split("```sql\n")[1:]]
    assert len(examples) >= 4
    for sql in examples:
        assert store.read_only_query(sql).columns, sql


def test_search_finds_text_thinking_and_tool_data(filled: SessionStore) -> None:
    assert [hit.role for hit in filled.search("flaky upload")] == ["user"]
    (thinking,) = filled.search("race uploader")
    assert "[race]" in thinking.snippet
    assert len(filled.search("run_tests")) == 1  # a tool name
    assert len(filled.search("timeout")) == 1  # a tool output
    assert len(filled.search("zebra")) == 1  # every branch is searched
    assert filled.search("upload", session_id="other") == []
    assert filled.search("   ") == []
    hits = filled.search("upload")
    assert [hit.rank for hit in hits] == sorted((hit.rank for hit in hits), reverse=True)
    assert len(filled.search("upload", limit=1)) == 1


@pytest.mark.parametrize(
    "query", ["'; DROP TABLE nodes; --", '"unbalanced', "a AND OR NOT", "NEAR(x", "*", "-x:y"]
)
def test_search_treats_any_query_as_plain_words(filled: SessionStore, query: str) -> None:
    assert filled.search(query) == []
    assert len(filled.load_session("s").all()) == 7


def test_search_is_current_after_import_and_delete(store: SessionStore) -> None:
    store.import_jsonl(LEGACY / "branching.jsonl")
    assert store.search("crash")
    store.delete_session("branching")
    assert store.search("crash") == []


def test_a_turn_is_searchable_by_its_text_tools_inputs_and_outputs() -> None:
    turn = {"role": "assistant", "blocks": [
        {"kind": "text", "text": "Hello\u0000"},
        {"kind": "thinking", "text": ""},
        {"kind": "tool_call", "id": "c1", "name": "grep", "input": {"pattern": "x", "n": 1.5}},
        {"kind": "tool_call", "id": "c2", "name": "echo", "input": "plain words"},
        {"kind": "tool_call", "id": "c3", "name": "noop"},
        {"kind": "tool_result", "callId": "c1", "output": ["a.py:1"], "isError": True},
        {"kind": "tool_result", "callId": "c2", "output": "done"},
        {"kind": "image", "mediaType": "image/png", "dataBase64": "AAAA"},
    ]}  # fmt: skip
    row, blocks = stored_rows("s", "n1", None, 5, turn, "{}")
    assert row["search_text"] == search_text(turn) == "\n".join([
        "Hello\ufffd", 'grep {"pattern":"x","n":1.5}', "echo plain words", "noop null",
        '["a.py:1"]', "done",
    ])  # fmt: skip
    assert blocks == block_rows("s", "n1", turn)
    assert [(b["kind"], b["call_id"], b["input_json"], b["output_json"]) for b in blocks] == [
        ("text", None, None, None),
        ("thinking", None, None, None),
        ("tool_call", "c1", '{"pattern":"x","n":1.5}', None),
        ("tool_call", "c2", '"plain words"', None),
        ("tool_call", "c3", None, None),
        ("tool_result", "c1", None, '["a.py:1"]'),
        ("tool_result", "c2", None, '"done"'),
        ("image", None, None, None),
    ]
    assert [b["is_error"] for b in blocks][5:7] == [1, 0]


def marked_chain(session_id: str, numbers: range) -> SessionGraph:
    """A linear session whose turn n says the word `marker<n>` and nothing else."""
    clock = itertools.count(1_767_225_600_000, 1000)
    graph = SessionGraph(session_id, clock=clock.__next__)
    for n in numbers:
        graph.append(say("user" if n % 2 else "assistant", f"marker{n}"))
    return graph


def assert_search_index_whole(
    database_url: str, store: SessionStore, found: dict[int, int]
) -> None:
    """Each `marker<n>` is found in `found[n]` sessions; on SQLite, FTS5's own check that its
    index holds every node's text exactly once (a missed or doubled row fails it)."""
    for n, sessions in found.items():
        assert len(store.search(f"marker{n}", limit=50)) == sessions, f"marker{n}"
    check_fts(database_url, "nodes_fts")


BACKLOG_INDEXED = """INSERT INTO nodes_fts (rowid, search_text) SELECT pk, search_text
FROM node_search WHERE pk IN (SELECT pk FROM nodes_fts_backlog)"""


def check_fts(database_url: str, table: str = "nodes_fts") -> None:
    """On SQLite, FTS5's own check that a full-text table's index holds exactly what its
    content does: for `nodes_fts`, with the nodes of its backlog (migration 0019) indexed in a
    transaction rolled back after (so a backlog node that was indexed already fails it too)."""
    if not database_url.startswith("sqlite"):
        return
    connection = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        connection.execute("BEGIN")
        has_backlog = "SELECT 1 FROM sqlite_master WHERE name = 'nodes_fts_backlog'"
        if table == "nodes_fts" and connection.execute(has_backlog).fetchone():
            connection.execute(BACKLOG_INDEXED)
        connection.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
    finally:
        connection.execute("ROLLBACK")
        connection.close()


def test_the_search_index_follows_every_kind_of_write(
    database_url: str, store: SessionStore, tmp_path: Path
) -> None:
    first = marked_chain("a", range(5))
    for node in first.all():
        store.append_node("a", node)
    assert_search_index_whole(database_url, store, {0: 1, 4: 1})

    files = JsonlSessionStore(tmp_path)  # an import of several batches, then one that grew
    big = marked_chain("b", range(100, 100 + BATCH_ROWS))
    nodes = big.all()
    for node in nodes[: BATCH_ROWS // 2 + 7]:
        files.append_node("b", node)
    store.import_jsonl(tmp_path / "b.jsonl")
    for node in nodes[BATCH_ROWS // 2 + 7 :]:
        files.append_node("b", node)
    store.import_jsonl(tmp_path / "b.jsonl")
    assert_search_index_whole(database_url, store, {100: 1, 100 + BATCH_ROWS - 1: 1, 0: 1})

    store.fork_session("a", first.all()[2].id, "fork")
    assert_search_index_whole(database_url, store, {0: 2, 2: 2, 3: 1, 100: 1})

    store.delete_session("a")
    assert_search_index_whole(database_url, store, {0: 1, 3: 0, 4: 0, 100: 1})


WRITES = [
    "INSERT INTO sessions (id, created_at, updated_at) VALUES ('x', 1, 1)",
    "UPDATE sessions SET title = 'x'",
    "DELETE FROM nodes",
    "DROP TABLE records",
    "CREATE TABLE t (x INTEGER)",
    "SELECT 1; DELETE FROM nodes",
    "ATTACH DATABASE 'other.db' AS other",
    "PRAGMA journal_mode = DELETE",
    "SET TRANSACTION READ WRITE",
    "COMMIT",
]


@pytest.mark.parametrize("sql", WRITES)
def test_read_only_queries_cannot_change_anything(filled: SessionStore, sql: str) -> None:
    before = rows(filled, "SELECT count(*) FROM nodes"), rows(filled, "SELECT title FROM sessions")
    with pytest.raises(QueryError):
        filled.read_only_query(sql)
    after = rows(filled, "SELECT count(*) FROM nodes"), rows(filled, "SELECT title FROM sessions")
    assert after == before


def test_read_only_query_limits_rows(filled: SessionStore) -> None:
    result = filled.read_only_query("SELECT node_id FROM turns", limit=3)
    assert len(result.rows) == 3
    assert result.truncated
    with pytest.raises(QueryError, match="no_such_table"):
        filled.read_only_query("SELECT * FROM no_such_table")


# --- a turn larger than PostgreSQL's tsvector: stored by both backends, found by the rule --------


def file_listing(megabytes: float) -> str:
    """A tool's output like `find /`: unique words, far more than a 1 MiB tsvector can hold,
    starting with FIRSTWORD, with MIDDLEWORD and 東京タワー past PostgreSQL's index and LASTWORD at
    the end."""
    lines: list[str] = ["FIRSTWORD"]
    size = 0
    number = 0
    while size < megabytes * 1_000_000:
        line = f"/srv/data/project_{number:07d}/file_{number:07d}_listing.txt"
        lines.append(line)
        size += len(line) + 1
        number += 1
        if number == 20_000:
            lines.append("MIDDLEWORD 東京タワー")
    lines.append("LASTWORD")
    return "\n".join(lines)


def test_a_turn_past_postgresqls_tsvector_limit_is_stored_and_found_on_both_backends(
    database_url: str, tmp_path: Path
) -> None:
    listing = file_listing(3.6)
    source_graph = SessionGraph("big", clock=itertools.count(1_767_225_600_000).__next__)
    source_graph.append(say("user", "list the files"))
    source_graph.append({"role": "assistant", "blocks": [
        {"kind": "tool_call", "id": "c1", "name": "find", "input": {"path": "/srv"}},
    ]})  # fmt: skip
    source_graph.append({"role": "user", "blocks": [
        {"kind": "tool_result", "callId": "c1", "output": listing},
    ]})  # fmt: skip
    source_graph.append(say("assistant", "Many files, LASTWORD"))
    sqlite_store = SessionStore(f"sqlite:///{tmp_path / 'source.db'}")
    for node in source_graph.all():
        sqlite_store.append_node("big", node)
    sqlite_store.export_jsonl("big", tmp_path / "big.jsonl")
    sqlite_store.close()

    with SessionStore(database_url) as store:
        store.import_jsonl(tmp_path / "big.jsonl")  # a SQLite export imports anywhere
        store.export_jsonl("big", tmp_path / "again.jsonl")
        assert (tmp_path / "again.jsonl").read_bytes() == (tmp_path / "big.jsonl").read_bytes()
        result = source_graph.all()[2].id
        for query in ("FIRSTWORD", "middleword", "MIDDLEWORD listing", "東京", "タワー"):
            assert [hit.node_id for hit in store.search(query)] == [result], query
        found = {hit.node_id for hit in store.search("lastword")}
        assert found == {result, source_graph.all()[3].id}
        assert store.search("LASTWORD", session_id="big", limit=1)
        assert store.search("MIDDLEWORD nowhere") == []
        assert store.search("東京 nowhere") == []
        assert store.search("MIDDLEWORD", session_id="other") == []


def explain(store: SessionStore, statement: Any) -> str:
    """PostgreSQL's plans as `statement` runs, the statements of the search function it calls
    included (auto_explain), sequential scans discouraged as on a big table."""
    notices: list[str] = []
    with store.engine.connect() as connection:
        driver = connection.connection.dbapi_connection
        assert driver is not None

        def _on_notice(diagnostic: Any) -> None:
            notices.append(diagnostic.message_primary or "")

        driver.add_notice_handler(_on_notice)
        try:
            connection.exec_driver_sql("LOAD 'auto_explain'")
            for setting in (
                "auto_explain.log_min_duration = 0",
                "auto_explain.log_nested_statements = on",
                "auto_explain.log_level = notice",
                "enable_seqscan = off",
            ):
                connection.exec_driver_sql(f"SET LOCAL {setting}")
            compiled = statement.compile(connection)
            given = compiled.construct_params({TENANT_KEY: store.tenant})  # as `tenancy` does
            params = tuple(given[name] for name in compiled.positiontup or ())
            connection.exec_driver_sql(str(compiled), params or given).all()
            connection.rollback()
        finally:
            driver.remove_notice_handler(_on_notice)
    return "\n".join(notices)


@pytest.mark.parametrize("query", ["upload", "東京 upload"])
def test_postgresql_search_reads_its_indexes_and_only_the_oversized_turns(
    postgres_url: str, query: str
) -> None:
    with SessionStore(postgres_url) as store:
        store.append_node("s", SessionGraph("s").append(say("user", "upload 東京")))
        words, unspaced = _split_query(query)
        statement = _postgres_hits(words, unspaced, None, 20, derived_search_text())
        plan = explain(store, statement)
    assert re.search(r"Index Scan on ix_nodes_search(_chars)? ", plan), plan
    assert "Index Scan on ix_nodes_search_oversized" in plan, plan
    assert "Seq Scan" not in plan, plan


# --- no query runs for ever ----------------------------------------------------------------------

ENDLESS = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r"


def test_a_query_is_stopped_at_its_time_limit_and_the_store_goes_on(store: SessionStore) -> None:
    for statement in (ENDLESS, f"{ENDLESS} ORDER BY 1"):
        with pytest.raises(QueryError) as caught:
            store.read_only_query(statement, timeout=0.5)
        assert str(caught.value) == (
            "the query ran longer than 0.5 s and was stopped (a larger limit allows more: "
            "memstore sql --timeout SECONDS, or read_only_query(..., timeout=SECONDS))"
        )
    store.append_node("s", SessionGraph("s").append(say("user", "still writes")))
    assert store.read_only_query("SELECT count(*) FROM nodes").rows == [(1,)]


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), True, "5"])
def test_a_time_limit_is_a_positive_number_of_seconds(store: SessionStore, timeout: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="time limit"):
        store.read_only_query("SELECT 1", timeout=timeout)


# An endless recursive query sorted: SQLite must write every row to a temporary file first (the
# attack wrote 1.7 GB in 18 s).
RUNAWAY_SORT = (
    "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
    "SELECT i, randomblob(200) FROM r ORDER BY random()"
)
TEMP_MESSAGE = (
    "the query needed more than {mb} MB of temporary space and was stopped "
    "(a larger limit allows more: memstore sql --max-temp-mb MB, or "
    "read_only_query(..., max_temp_mb=MB))"
)


def test_a_sqlite_query_is_stopped_once_its_temporary_files_pass_the_bound(
    sqlite_url: str,
) -> None:
    with SessionStore(sqlite_url) as store:
        started = time.monotonic()
        with pytest.raises(QueryError, match=re.escape(TEMP_MESSAGE.format(mb=10))):
            store.read_only_query(RUNAWAY_SORT, timeout=120, max_temp_mb=10)
        assert time.monotonic() - started < 30  # the bound stopped it, not the time limit
        # A sort that fits runs as before, through its temporary files.
        bounded = RUNAWAY_SORT.replace("FROM r)", "FROM r WHERE i < 200000)")
        result = store.read_only_query(f"SELECT count(*) FROM ({bounded})", timeout=120)
        assert result.rows == [(200000,)]


def test_a_postgresql_query_is_stopped_at_the_reading_logins_temp_file_limit(
    postgres_url: str,
) -> None:
    reader = make_url(os.environ["MEMSTORE_READ_URL"]).username
    admin = sqlalchemy.create_engine(make_url(postgres_url).set(drivername="postgresql+psycopg"))
    with admin.begin() as connection:  # docs/sql.md's recipe, as a superuser, small limit
        connection.execute(sqlalchemy.text(f"ALTER ROLE \"{reader}\" SET temp_file_limit = '1MB'"))
    admin.dispose()
    with SessionStore(postgres_url) as store:
        sort = "SELECT g FROM generate_series(1, 3000000) AS g ORDER BY random()"
        with pytest.raises(QueryError) as refused:
            store.read_only_query(sort, timeout=120)
        assert str(refused.value) == (
            "the query needed more than 1MB of temporary space, the most this login may write "
            "(its temp_file_limit), and was stopped"
        )
        # A sort that fits in memory runs as before.
        fits = "SELECT g FROM generate_series(1, 1000) AS g ORDER BY random()"
        small = store.read_only_query(f"SELECT count(*) FROM ({fits}) AS s")
        assert small.rows == [(1000,)]


def sqlite_temp_files(pid: int) -> int:
    """The disk space of the temporary files SQLite holds open in process `pid`."""
    total = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd).rpartition("/")[2].startswith("etilqs_"):
                total += fd.stat().st_blocks * 512
        except OSError:
            continue
    return total


def peak_rss_mb(pid: int) -> int:
    """The process's peak memory so far (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return 0


def test_memstore_sql_keeps_a_runaway_sort_within_its_temporary_space(sqlite_url: str) -> None:
    """Watched from outside: the disk its temporary files take and its memory stay bounded."""
    SessionStore(sqlite_url).close()
    command = ["sql", RUNAWAY_SORT, "--timeout", "120", "--max-temp-mb", "40"]
    process = subprocess.Popen(
        [*MEMSTORE, "--db", sqlite_url, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    disk = memory = 0
    started = time.monotonic()
    try:
        while process.poll() is None and time.monotonic() - started < 60:
            with contextlib.suppress(OSError):  # it may end between two looks
                disk = max(disk, sqlite_temp_files(process.pid))
                memory = max(memory, peak_rss_mb(process.pid))
            time.sleep(0.005)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
        process.communicate()
    assert stderr == f"error: {TEMP_MESSAGE.format(mb=40)}\n"
    assert process.returncode == 1
    assert time.monotonic() - started < 30
    assert 0 < disk < 60_000_000, disk  # 40 MB, and what a sort writes in one look's time
    assert memory < 150, memory


@pytest.mark.parametrize("max_temp_mb", [0, -1, float("nan"), True, "5"])
def test_a_temporary_space_limit_is_a_positive_number_of_megabytes(
    store: SessionStore, max_temp_mb: Any
) -> None:
    with pytest.raises(InvalidArgumentError, match="temporary space limit"):
        store.read_only_query("SELECT 1", max_temp_mb=max_temp_mb)


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used so far (user and system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """The CPU time of this process's children that have ended and been waited for."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def wait_until_the_query_runs(
    process: subprocess.Popen[str], database_url: str, marker: str
) -> None:
    """Wait until the CLI is inside its query: on PostgreSQL the server lists it; on SQLite the
    process has used more CPU than a whole `memstore sql "SELECT 1"` needs."""
    started = time.monotonic()
    if database_url.startswith("postgresql"):
        while time.monotonic() - started < 60:
            if queries_running(database_url, marker):
                return
            time.sleep(0.1)
    else:
        before = children_cpu_seconds()  # every child this test process has waited for
        quick = subprocess.run([*MEMSTORE, "--db", database_url, "sql", "SELECT 1"], check=True)
        assert quick.returncode == 0
        startup = children_cpu_seconds() - before + 0.5
        while time.monotonic() - started < 60:
            if cpu_seconds(process.pid) > startup:
                return
            time.sleep(0.1)
    raise AssertionError("the query never started")


def hear_ctrl_c() -> None:
    """In the child, before it runs: Ctrl-C's default action, which Python turns into
    KeyboardInterrupt. A test run started in the background by a shell (`cmd &`) ignores SIGINT,
    and so would every process it starts: Python keeps an ignored SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def queries_running(database_url: str, marker: str) -> int:
    """How many queries holding `marker` the PostgreSQL server is running."""
    with SessionStore(database_url) as store, store.engine.connect() as connection:
        return int(connection.exec_driver_sql(RUNNING, (f"/* {marker} */",)).scalar_one())


MEMSTORE = [sys.executable, "-m", "memstore"]
RUNNING = "SELECT count(*) FROM pg_stat_activity WHERE strpos(query, %s) > 0 AND state = 'active'"


def test_ctrl_c_stops_a_query_at_once_with_one_line_and_cancels_it_on_the_server(
    database_url: str,
) -> None:
    SessionStore(database_url).close()  # the schema exists before the timed part
    marker = f"ctrl-c-{uuid.uuid4().hex}"
    process = subprocess.Popen(
        [*MEMSTORE, "--db", database_url, "sql", f"/* {marker} */ {ENDLESS}", "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=hear_ctrl_c,
    )
    try:
        wait_until_the_query_runs(process, database_url, marker)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
        process.communicate()
    assert process.returncode == 130
    assert stderr == "error: the query was stopped (Ctrl-C)\n"
    if database_url.startswith("postgresql"):
        started = time.monotonic()  # the server ends it when it reads the cancel request
        while queries_running(database_url, marker) and time.monotonic() - started < 10:
            time.sleep(0.1)
        assert queries_running(database_url, marker) == 0


PEAK_MB = """
import sys
from memstore import SessionStore
from memstore.errors import QueryError

def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
"""
LIMITED = (
    PEAK_MB
    + """
with SessionStore(sys.argv[1]) as store:
    store.read_only_query("SELECT 1")
    before = peak_mb()
    result = store.read_only_query(sys.argv[2], limit=5, timeout=120)
    print(before, peak_mb(), len(result.rows), result.truncated)
"""
)


def test_a_limited_query_reads_only_its_rows_of_a_huge_result(database_url: str) -> None:
    """300 MB of rows, five wanted: the rest is never held (PostgreSQL streams and cancels)."""
    huge = "SELECT n, repeat('x', 1000) AS filler FROM generate_series(1, 300000) AS n"
    if database_url.startswith("sqlite"):
        huge = (
            "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 300000) "
            "SELECT n, printf('%.1000c', 'x') AS filler FROM s"
        )
    done = subprocess.run(
        [sys.executable, "-c", LIMITED, database_url, huge],
        capture_output=True,
        text=True,
        check=True,
    )
    before, after, rows, truncated = done.stdout.split()
    assert (rows, truncated) == ("5", "True")
    assert int(after) - int(before) < 50, done.stdout  # not the 300 MB result


def test_a_postgresql_query_without_rows_runs_once(postgres_url: str) -> None:
    """Its columns are learnt by describing it, not by running it again (which doubled its time
    and its side effects): 1.5 s of sleep takes 1.5 s, not 3."""
    slept = "SELECT 1 AS one, 'x' AS \"two words\" FROM pg_sleep(1.5) WHERE random() < 0"
    with SessionStore(postgres_url) as store:
        started = time.monotonic()
        result = store.read_only_query(slept, timeout=60)
        elapsed = time.monotonic() - started
    assert (result.columns, result.rows, result.truncated) == (["one", "two words"], [], False)
    assert elapsed < 2.6, f"{elapsed:.2f} s: the query ran more than once"


# 600 blobs of 1 MB: concatenated, or as rows the caller holds. With SQLite's own limits alone,
# about 1.2 GB resident, and 600 MB (the attack reached 1.6-3.2 GB with larger aggregates).
BLOB_ROWS = (
    "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 600) "
    "SELECT randomblob(1000000) FROM r"
)
BLOBS = BLOB_ROWS.replace(
    "SELECT randomblob(1000000)", "SELECT length(group_concat(randomblob(1000000)))"
)
MEMORY_MESSAGE = (
    "the query needed more than {mb} MB of memory and was stopped "
    "(a larger limit allows more: memstore sql --max-memory-mb MB, or "
    "read_only_query(..., max_memory_mb=MB))"
)
BOUNDED = (
    PEAK_MB
    + """
with SessionStore(sys.argv[1]) as store:
    store.read_only_query("SELECT 1")
    before = peak_mb()
    try:
        store.read_only_query(sys.argv[2], timeout=120, max_memory_mb=float(sys.argv[3]))
    except QueryError as exc:
        print(str(exc))
    print(peak_mb() - before)
"""
)


@pytest.mark.parametrize("query", [BLOBS, BLOB_ROWS], ids=["one-value", "many-values"])
def test_a_sqlite_query_is_stopped_once_its_memory_passes_the_bound(
    sqlite_url: str, query: str
) -> None:
    """One value longer than the bound is refused by SQLite's length limit; many smaller ones
    stop the query once the process has grown past it."""
    SessionStore(sqlite_url).close()
    done = subprocess.run(
        [sys.executable, "-c", BOUNDED, sqlite_url, query, "50"],
        capture_output=True,
        text=True,
        check=True,
    )
    message, grown = done.stdout.splitlines()
    assert message == MEMORY_MESSAGE.format(mb=50)
    assert int(grown) < 200, done.stdout


def test_memstore_sql_says_in_one_line_that_a_query_needed_too_much_memory(
    sqlite_url: str,
) -> None:
    SessionStore(sqlite_url).close()
    done = subprocess.run(
        [*MEMSTORE, "--db", sqlite_url, "sql", BLOBS, "--max-memory-mb", "50"],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"error: {MEMORY_MESSAGE.format(mb=50)}\n"


@pytest.mark.parametrize("max_memory_mb", [0, -1, float("nan"), True, "5"])
def test_a_memory_limit_is_a_positive_number_of_megabytes(
    store: SessionStore, max_memory_mb: Any
) -> None:
    with pytest.raises(InvalidArgumentError, match="memory limit is MB > 0"):
        store.read_only_query("SELECT 1", max_memory_mb=max_memory_mb)
