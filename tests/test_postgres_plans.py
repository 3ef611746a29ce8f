"""PostgreSQL plans, not timings: appends, walks and imports look rows up by index whatever the
planner's statistics say (never analyzed, analyzed while small, analyzed).

The plans are the ones PostgreSQL really ran, foreign key checks included: `auto_explain` (a
contrib module of the server) reports each statement's plan to the client, for the store's own
operations on the store's own connection.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg

from memstore import SessionGraph, SessionNode, SessionStore
from memstore.jsonl import append_lines
from memstore.store.engine import create_store_engine
from memstore.store.plans import paths as path_plans
from memstore.store.policy import POSTGRESQL
from memstore.store.prepared import Prepared

SIZE = 2_000  # nodes: enough that a scan of a session's rows costs more than a lookup
TABLES = ("nodes", "records", "node_blocks")
# A condition on the node id (not session_id alone), or on the primary key (the walk reads each
# turn by the key it walked).
NODE_ID = re.compile(r"\b(id|pk)\)?(::text)? = ")


def chain(session_id: str, count: int) -> list[SessionNode]:
    """`count` turns, each the child of the one before."""
    graph = SessionGraph(session_id, clock=iter(range(1_767_225_600_000, 1 << 62)).__next__)
    for i in range(count):
        text = f"turn {i}: " + "words " * 40
        graph.append(
            {"role": "user" if i % 2 else "assistant", "blocks": [{"kind": "text", "text": text}]}
        )
    return graph.all()


def write_jsonl(path: Path, chain_nodes: list[SessionNode]) -> Path:
    """The file the original store writes for these appends."""
    with path.open("w", encoding="utf-8") as out:
        for node in chain_nodes:
            out.write(append_lines(node.id, node.parent, node.turn.json_text(), node.created_at))
    return path


class Plans:
    """A store whose connection reports the plan of every statement it runs, nested ones (the
    foreign key checks) included, while `recording`."""

    def __init__(self, url: str) -> None:
        self.seen: list[dict[str, Any]] = []
        self.engine = create_store_engine(url)
        event.listen(self.engine, "connect", self._on_connect)
        self.store = SessionStore(self.engine)
        self._set("auto_explain.log_min_duration", -1)

    def _on_connect(self, dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("LOAD 'auto_explain'")
        except Exception as exc:  # not installed, or not allowed to load it
            if os.environ.get("CI"):
                raise
            pytest.skip(f"PostgreSQL's auto_explain cannot be loaded: {exc}")
        for setting in (
            "auto_explain.log_nested_statements = on",
            "auto_explain.log_level = notice",
            "auto_explain.log_format = json",
        ):
            cursor.execute(f"SET {setting}")
        cursor.close()
        dbapi_connection.commit()
        dbapi_connection.add_notice_handler(self._on_notice)

    def _on_notice(self, diagnostic: Any) -> None:
        message = diagnostic.message_primary or ""
        if "{" in message:
            self.seen.append(json.loads(message[message.index("{") :]))

    def _set(self, name: str, value: object) -> None:
        with self.engine.connect() as connection:  # the pool's one connection: the store's
            connection.exec_driver_sql(f"SET {name} = {value}")
            connection.commit()

    @contextmanager
    def recording(self) -> Iterator[None]:
        """Record the plans of what runs inside the with block."""
        self.seen.clear()
        self._set("auto_explain.log_min_duration", 0)
        try:
            yield
        finally:
            self._set("auto_explain.log_min_duration", -1)

    def analyze(self) -> None:
        """ANALYZE the store's tables (only this test's: a database-wide ANALYZE would wait on
        other tests' schemas)."""
        self.sql(f"ANALYZE {', '.join(('sessions', *TABLES))}")

    def vacuum(self) -> None:
        """VACUUM ANALYZE the store's tables, as autovacuum would: statistics, and the
        visibility map that makes an index-only scan read no table pages."""
        with self.engine.connect() as connection:
            connection = connection.execution_options(isolation_level="AUTOCOMMIT")
            connection.exec_driver_sql(f"VACUUM ANALYZE {', '.join(('sessions', *TABLES))}")

    def sql(self, statement: str) -> None:
        with self.engine.begin() as connection:
            connection.exec_driver_sql(statement)


def scans(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a plan tree that reads one of TABLES."""
    if plan.get("Relation Name") in TABLES and plan["Node Type"] != "ModifyTable":
        yield plan
    for child in plan.get("Plans", ()):
        yield from scans(child)


def whole_session_read(query: str) -> bool:
    """Whether `query` is one of the statements that read a whole session's nodes by design:
    the check that a session is one chain, and its nodes in the order stored (`plans`'s
    `_CHAIN_CHECK` and `_CHAIN_ROWS`, as psycopg sends them: `$1` for `%(name)s`)."""
    return any(pattern.fullmatch(query) for pattern in WHOLE_SESSION_READS)


def _as_sent(prepared: Prepared) -> re.Pattern[str]:
    dialect = PGDialect_psycopg()  # type: ignore[no-untyped-call]
    sql = " ".join(prepared.compiled(dialect).sql.split())
    return re.compile(re.sub(r"%\\\(\w+\\\)s", r"\\$[0-9]+", re.escape(sql)))


WHOLE_SESSION_READS = [
    _as_sent(path_plans._CHAIN_CHECK),
    _as_sent(path_plans._CHAIN_ROWS[POSTGRESQL, True]),
    _as_sent(path_plans._CHAIN_ROWS[POSTGRESQL, False]),
]


def lookup_problems(seen: list[dict[str, Any]]) -> list[str]:
    """Reads of TABLES that are not index lookups of given nodes: sequential scans, and index
    scans that read a whole session (bounded by the session id only) or filter rows out (but
    in the statements that read a whole session by design: see `session_read_problems`)."""
    problems = []
    for explained in seen:
        query = " ".join(explained["Query Text"].split())
        if query.startswith("DECLARE") or whole_session_read(query):  # (an import's DECLARE
            continue  # reads the session's stored lines, once)
        for scan in scans(explained["Plan"]):
            condition = scan.get("Index Cond") or scan.get("Recheck Cond") or ""
            if (
                scan["Node Type"] not in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan")
                or "Filter" in scan
                or not NODE_ID.search(condition)
            ):
                problems.append(
                    f"{scan['Node Type']} on {scan['Relation Name']}"
                    f" ({scan.get('Index Name')}: {condition}; filter {scan.get('Filter')})"
                    f" in {query[:100]}"
                )
    return problems


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a plan tree."""
    yield plan
    for child in plan.get("Plans", ()):
        yield from plan_nodes(child)


def session_read_problems(seen: list[dict[str, Any]]) -> list[str]:
    """In the statements that read a whole session by design: reads of `nodes` that are not
    bounded by the session's index (a sequential scan, or an index on something else with the
    session as a filter), and sorts of its turns (the rows in the order stored: by index)."""
    problems = []
    for explained in seen:
        query = " ".join(explained["Query Text"].split())
        if not whole_session_read(query):
            continue
        for node in plan_nodes(explained["Plan"]):
            condition = node.get("Index Cond") or node.get("Recheck Cond") or ""
            reads = node.get("Relation Name") == "nodes" or node.get("Index Name", "").startswith(
                ("ix_nodes", "uq_nodes", "pk_nodes")
            )
            unbounded = (
                reads and node["Node Type"] != "Bitmap Heap Scan" and "session_id" not in condition
            )
            sorts_turns = (
                node["Node Type"] == "Sort" and "turn_json" in query and "count(" not in query
            )
            if unbounded or sorts_turns:
                problems.append(
                    f"{node['Node Type']} ({node.get('Index Name')}: {condition}; filter"
                    f" {node.get('Filter')}) in {query[:100]}"
                )
    return problems


@pytest.fixture
def plans(postgres_url: str) -> Iterator[Plans]:
    """A store on a fresh PostgreSQL schema that autovacuum leaves alone (never analyzed
    unless a test says so)."""
    recorder = Plans(postgres_url)
    for table in ("sessions", *TABLES):
        recorder.sql(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
    yield recorder
    recorder.store.close()


def append_and_walk(
    plans: Plans, nodes: list[SessionNode], *, batch: bool = True
) -> list[dict[str, Any]]:
    """Append `nodes` (children of the head) one by one and, with `batch`, their turns again as
    one batch; then load the path both whole and its last 50 turns; the plans that ran."""
    with plans.recording():
        for node in nodes:
            plans.store.append_node("s", node)
        batched = plans.store.append_many("s", [node.turn for node in nodes]) if batch else []
        path = plans.store.load_path_nodes("s")
        assert path[-len(nodes) - len(batched) :] == [*nodes, *batched]
        assert len(plans.store.load_path("s", last=50)) == 50
    return list(plans.seen)


def ran(seen: list[dict[str, Any]], text: str) -> bool:
    return any(text in explained["Query Text"] for explained in seen)


@pytest.mark.parametrize("analyzed_small", [False, True], ids=["never-analyzed", "analyzed-small"])
def test_appends_and_walks_look_nodes_up_by_index(
    plans: Plans, tmp_path: Path, analyzed_small: bool
) -> None:
    nodes = chain("s", SIZE + 10)
    for node in nodes[:20]:  # the planner meets the tables small, on this connection
        plans.store.append_node("s", node)
    if analyzed_small:
        plans.analyze()
    for node in nodes[20:30]:
        plans.store.append_node("s", node)
    for size in (500, SIZE):  # a few hundred nodes is where the planner's choices used to tie
        plans.store.import_jsonl(write_jsonl(tmp_path / "s.jsonl", nodes[:size]), session_id="s")
        # (the batch last: an import needs the session's records to be the file's start)
        seen = append_and_walk(plans, nodes[size : size + 10], batch=size == SIZE)

        assert ran(seen, "FOR KEY SHARE")  # the foreign key checks were seen
        assert ran(seen, "WITH RECURSIVE")
        assert lookup_problems(seen) == [], f"at {size} nodes"


def test_a_new_session_imports_into_an_analyzed_database_by_index(
    plans: Plans, tmp_path: Path
) -> None:
    plans.store.import_jsonl(write_jsonl(tmp_path / "old.jsonl", chain("old", SIZE)))
    plans.analyze()
    nodes = chain("s", SIZE + 10)
    with plans.recording():
        plans.store.import_jsonl(write_jsonl(tmp_path / "s.jsonl", nodes[:SIZE]))
    imported = list(plans.seen)

    seen = append_and_walk(plans, nodes[SIZE:])

    assert ran(imported, "FOR KEY SHARE")
    assert ran(imported, "unnest")
    assert lookup_problems(imported) == []
    assert lookup_problems(seen) == []


@pytest.mark.parametrize("stats", ["never-analyzed", "analyzed-small", "vacuumed"])
def test_a_whole_path_is_read_through_the_session_index(
    plans: Plans, tmp_path: Path, stats: str
) -> None:
    """The check that a session is one chain and the flat read of its path read the session's
    rows through its indexes, not the table, whatever the statistics say: with another,
    bigger session in the table, and the session a few hundred nodes (where plans tie)."""
    plans.store.import_jsonl(write_jsonl(tmp_path / "old.jsonl", chain("old", 2 * SIZE)))
    nodes = chain("s", 500)
    for node in nodes[:20]:
        plans.store.append_node("s", node)
    if stats == "analyzed-small":
        plans.analyze()
    for node in nodes[20:]:
        plans.store.append_node("s", node)
    if stats == "vacuumed":
        plans.vacuum()
    with plans.recording():
        assert plans.store.load_path_nodes("s") == nodes
        assert plans.store.load_path("s", nodes[99].id) == [node.turn for node in nodes[:100]]
    seen = list(plans.seen)

    assert sum(whole_session_read(" ".join(e["Query Text"].split())) for e in seen) == 4
    assert not ran(seen, "WITH RECURSIVE")  # one chain: read flat, not walked
    assert session_read_problems(seen) == []
    assert lookup_problems(seen) == []


@pytest.mark.parametrize("analyzed_small", [False, True], ids=["never-analyzed", "analyzed-small"])
def test_imports_after_small_ones_check_their_keys_by_index(
    plans: Plans, tmp_path: Path, analyzed_small: bool
) -> None:
    """An import's foreign key checks keep generic plans while rows are copied (`copying.py`):
    plans made when the tables held a few rows must still look keys up by index in a big
    import on the same connection, not scan the tables that have grown since."""
    for number in range(4):  # more than five checks of each key: generic plans are made
        small = chain(f"small{number}", 4)
        plans.store.import_jsonl(write_jsonl(tmp_path / f"small{number}.jsonl", small))
    if analyzed_small:
        plans.analyze()
    with plans.recording():
        plans.store.import_jsonl(write_jsonl(tmp_path / "big.jsonl", chain("big", SIZE)))
    checks = [seen for seen in plans.seen if "FOR KEY SHARE" in seen["Query Text"]]
    assert checks
    assert lookup_problems(checks) == []


@pytest.mark.parametrize("analyzed", [False, True], ids=["never-analyzed", "analyzed"])
def test_a_search_reads_only_the_turns_its_indexes_list(
    plans: Plans, tmp_path: Path, analyzed: bool
) -> None:
    """A search for a word few turns hold reads the turns its indexes list (the full-text
    index, and the partial index of turns longer than it holds), in one process: no scan of
    every turn, and no parallel workers, which the planner plans when it expects many turns
    longer than the index holds (it has no statistics of their lengths) and whose start costs
    more than the search (parallel plans made cheap here, so it would choose them)."""
    nodes = chain("s", SIZE)
    plans.store.import_jsonl(write_jsonl(tmp_path / "s.jsonl", nodes))
    if analyzed:
        plans.analyze()
    for setting in ("parallel_setup_cost", "parallel_tuple_cost", "min_parallel_table_scan_size"):
        plans._set(setting, 0)
    with plans.recording():
        hits = plans.store.search("1234")
    searches = [seen for seen in plans.seen if "ts_rank" in seen["Query Text"]]

    assert [hit.node_id for hit in hits] == [nodes[1234].id]
    assert len(searches) == 1
    read = [
        (node["Node Type"], node.get("Relation Name")) for node in plan_nodes(searches[0]["Plan"])
    ]
    assert ("Seq Scan", "nodes") not in read
    assert not [kind for kind, _ in read if kind.startswith("Gather")]


def rows_read(plan: dict[str, Any], table: str) -> int:
    """How many rows the plan's scans of `table` returned, over all their loops (log_analyze)."""
    return sum(
        node.get("Actual Rows", 0) * node.get("Actual Loops", 1)
        for node in plan_nodes(plan)
        if node.get("Relation Name") == table
    )


@pytest.mark.parametrize("stats", ["never-analyzed", "analyzed-small", "analyzed"])
def test_a_sessions_branch_count_reads_its_nodes_a_few_times(plans: Plans, stats: str) -> None:
    """The count of a session's branches (`session_info`, every listing, every import's report)
    looked for each node's children with an anti join that, the session unknown to the
    statistics, filtered the whole session for each node: 2.3 s at 5,000 nodes, quadratic."""
    plans.store.append_many("s", [node.turn for node in chain("s", 20)])
    if stats == "analyzed-small":
        plans.analyze()
    nodes = chain("big", SIZE)
    plans.store.append_many("big", [node.turn for node in nodes])
    graph = plans.store.session("big")
    graph.branch_from(plans.store.load_path_nodes("big", last=5)[0].id)
    graph.append(nodes[0].turn)
    if stats == "analyzed":
        plans.analyze()
    plans._set("auto_explain.log_analyze", "on")
    with plans.recording():
        info = plans.store.session_info("big")
    assert (info.node_count, info.branch_count) == (SIZE + 1, 2)
    (listing,) = [e for e in plans.seen if "count(" in e["Query Text"]]
    assert rows_read(listing["Plan"], "nodes") <= 4 * SIZE


def self_joins(seen: list[dict[str, Any]]) -> list[str]:
    """Joins whose two sides both read `nodes`: a session's nodes joined with themselves, which
    a nested loop makes quadratic in the session's size."""
    problems = []
    for explained in seen:
        for node in plan_nodes(explained["Plan"]):
            sides = node.get("Plans", ())
            reading = [side for side in sides if any(True for _ in _node_scans(side))]
            if node["Node Type"] in ("Nested Loop", "Hash Join", "Merge Join") and len(reading) > 1:
                query = " ".join(explained["Query Text"].split())
                problems.append(f"{node['Node Type']} ({node.get('Join Type')}) in {query[:100]}")
    return problems


def _node_scans(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    return (scan for scan in scans(plan) if scan["Relation Name"] == "nodes")


@pytest.mark.parametrize("analyzed_small", [False, True], ids=["never-analyzed", "analyzed-small"])
def test_session_counts_do_not_join_a_session_with_itself(
    plans: Plans, tmp_path: Path, analyzed_small: bool
) -> None:
    """`session_info` and `sessions` count a session's nodes and branches reading its rows
    through its indexes, with no join of its nodes with themselves: planned as a nested loop
    on tables never analyzed, that join took 150 s for 20,000 nodes (`memstore tree`, `show`
    and every read that checks its session first)."""
    nodes = chain("s", SIZE)
    plans.store.append_many("s", [node.turn for node in nodes[:20]])
    if analyzed_small:
        plans.analyze()
    made = plans.store.append_many("s", [node.turn for node in nodes[20:]])
    plans.store.append_many("s", [node.turn for node in nodes[:3]], parent=made[100].id)
    with plans.recording():
        info = plans.store.session_info("s")
        listed = plans.store.sessions()
    seen = list(plans.seen)

    assert (info.node_count, info.branch_count) == (SIZE + 3, 2)
    assert [(one.id, one.branch_count) for one in listed] == [("s", 2)]
    assert ran(seen, "branch_count")
    assert self_joins(seen) == []


KEYED = 5_000  # keys: where the planner's choice used to go to the foreign key's index


def keyed_turns(start: int, count: int) -> tuple[list[dict[str, Any]], list[str]]:
    """`count` text turns and their keys, UUIDs as the Claude Agent SDK's entries carry (longer
    than a node id, in no order: the primary key's index is the bigger one)."""
    numbers = range(start, start + count)
    turns = [{"role": "user", "blocks": [{"kind": "text", "text": f"entry {n}"}]} for n in numbers]
    return turns, [str(uuid.uuid5(uuid.NAMESPACE_URL, f"entry {n}")) for n in numbers]


@pytest.mark.parametrize("analyzed_small", [False, True], ids=["never-analyzed", "analyzed-small"])
def test_keyed_appends_look_each_key_up_by_the_primary_key(
    plans: Plans, analyzed_small: bool
) -> None:
    """A keyed append (`append_keyed`: the Claude Agent SDK's entries by `uuid`) finds each key
    through the primary key `(tenant, session_id, key)`. On tables never analyzed PostgreSQL
    read the session's keys through the foreign key's index `(tenant, session_id, node_id)`
    and filtered them: appends grew with the session. That index is partial now (migration
    0040), so that only the foreign key's cascades, which name a node, read it."""
    plans.sql("ALTER TABLE node_keys SET (autovacuum_enabled = off)")
    plans.store.append_keyed("s", *keyed_turns(0, 20))
    if analyzed_small:
        plans.sql("ANALYZE sessions, nodes, node_keys")
    for start in range(20, KEYED, 500):
        plans.store.append_keyed("s", *keyed_turns(start, min(500, KEYED - start)))
    again, again_keys = keyed_turns(KEYED - 5, 10)  # five held already, five new
    with plans.recording():
        added = plans.store.append_keyed("s", again, again_keys)
    assert len(added) == 5

    reads = [
        node
        for explained in plans.seen
        if explained["Query Text"].lstrip().upper().startswith("SELECT")
        for node in plan_nodes(explained["Plan"])
        if node.get("Relation Name") == "node_keys"
    ]
    assert reads
    for node in reads:
        assert node["Node Type"] in ("Index Scan", "Index Only Scan"), node
        assert node["Index Name"] == "pk_node_keys", node
        assert "key" in node["Index Cond"], node
        assert "Filter" not in node, node

    with plans.recording():  # the foreign key's cascades find a node's keys by its index
        plans.store.delete_session("s")
    cascades = [
        node
        for explained in plans.seen
        for node in plan_nodes(explained["Plan"])
        if node.get("Relation Name") == "node_keys" and node["Node Type"] != "ModifyTable"
    ]
    assert cascades
    for node in cascades:
        assert node["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan"), node
        assert "node_id" in (node.get("Index Cond") or node.get("Recheck Cond") or ""), node
        assert "Filter" not in node, node
