"""Usage and cost per node (issue 30): `append(..., usage=)` stores it beside the node, never in
the turn; the `usage` view, `SessionInfo` totals and `usage_stats` sum it; a JSONL export carries
it on a line of its own that an import reads back. SQLite and PostgreSQL, sync and async."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy

from memstore import InvalidArgumentError, JsonlError, NodeUsage
from memstore.hashing import hash_node
from memstore.store import SessionStore
from memstore.types import parse_turn
from memstore.usage import MAX_TOKENS


def turn(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "blocks": [{"kind": "text", "text": text}]}


USAGE = NodeUsage(
    input_tokens=1200,
    output_tokens=300,
    cache_read_tokens=1000,
    cache_write_tokens=50,
    cost_usd=0.0125,
    model="gpt-test",
    provider="openai",
)


def usage_rows(store: SessionStore, session_id: str) -> list[tuple[Any, ...]]:
    result = store.read_only_query(
        "SELECT node_id, role, model, provider, input_tokens, output_tokens, cache_read_tokens,"
        f" cache_write_tokens, cost_usd FROM usage WHERE session_id = '{session_id}'"
        " ORDER BY created_at, node_id"
    )
    return [tuple(row) for row in result.rows]


def test_usage_is_stored_beside_the_node_and_leaves_its_id_alone(store: SessionStore) -> None:
    plain = store.append("plain", turn("assistant", "hello"), created_at=1000)
    costed = store.append("costed", turn("assistant", "hello"), created_at=1000, usage=USAGE)
    assert costed.id == plain.id == hash_node(None, parse_turn(turn("assistant", "hello")), 1000)
    assert store.load_path("costed") == store.load_path("plain")
    assert usage_rows(store, "plain") == []
    assert usage_rows(store, "costed") == [
        (costed.id, "assistant", "gpt-test", "openai", 1200, 300, 1000, 50, 0.0125)
    ]


def test_append_many_takes_one_usage_for_the_last_turn_or_one_per_turn(
    store: SessionStore,
) -> None:
    first = store.append_many(
        "s", [turn("user", "q"), turn("assistant", "a")], usage={"inputTokens": 7}
    )
    assert [row[0] for row in usage_rows(store, "s")] == [first[1].id]
    second = store.append_many(
        "s",
        [turn("user", "q2"), turn("assistant", "a2")],
        usage=[{"output_tokens": 2}, NodeUsage(output_tokens=5, cost_usd=1)],
        created_at=5000,
    )
    rows = {row[0]: row for row in usage_rows(store, "s")}
    assert rows[second[0].id][5] == 2
    assert rows[second[1].id][5] == 5
    assert len(rows) == 3


@pytest.mark.parametrize(
    ("usage", "named"),
    [
        ({"input_tokens": -1}, "input_tokens"),
        ({"output_tokens": 1.5}, "output_tokens"),
        ({"cost_usd": float("nan")}, "cost_usd"),
        ({"cost_usd": True}, "cost_usd"),
        ({"model": 3}, "model"),
        ({"model": "gpt\x00"}, "'model' is a string without NUL or lone surrogates"),
        ({"provider": "open\ud800ai"}, "'provider' is a string without NUL"),
        ({"inputTokens": 2**53}, r"'input_tokens' is at most 9007199254740991 tokens"),
        (NodeUsage(cache_write_tokens=2**63 - 1), "'cache_write_tokens' is at most"),
        ({"tokens": 3}, "tokens"),
        ([{"input_tokens": 1}], "one entry per turn"),
        ("lots", "not str"),
    ],
)
def test_malformed_usage_is_refused_naming_the_field_and_writes_nothing(
    store: SessionStore, usage: Any, named: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=named):
        store.append_many("s", [turn("user", "q"), turn("assistant", "a")], usage=usage)
    assert store.list_sessions() == []


def test_the_largest_usage_sums_without_breaking_the_listings(store: SessionStore) -> None:
    """A field at the limit, however many turns carry it, still sums on SQLite's 64-bit
    integers (one near 2**63, and any other, made every listing of the store fail)."""
    most = {"inputTokens": 2**53 - 1}
    store.append_many("x", [turn("assistant", str(n)) for n in range(3)], usage=[most] * 3)
    store.append("y", turn("user", "q"))
    (info,) = [item for item in store.sessions() if item.id == "x"]
    assert info.input_tokens == 3 * (2**53 - 1)
    assert store.usage_stats("session")[0].input_tokens == 3 * (2**53 - 1)
    assert {page.id for page in store.session_page().sessions} == {"x", "y"}


def test_usage_summing_past_64_bit_integers_fails_no_listing_nor_prune(
    store: SessionStore,
) -> None:
    """1,025 turns at `MAX_TOKENS` sum past 2**63 - 1: SQLite's SUM raised "integer overflow"
    in every listing (`sessions`, `session_page`, `usage_stats`), and a prune rolling their
    usage up failed (a Python int too large for SQLite, PostgreSQL's bigint out of range).
    Totals are exact up to 2**63 - 1 and, above, the nearest float on SQLite (PostgreSQL:
    exact); a prune keeps such a sum on several rows, so the session's totals do not change."""
    big = {"inputTokens": MAX_TOKENS, "outputTokens": 1}
    store.append_many("edge", [turn("assistant", f"e{n}") for n in range(1024)], usage=[big] * 1024)
    root = store.append("huge", turn("user", "start"))
    store.append_many("huge", [turn("assistant", f"h{n}") for n in range(1025)], usage=[big] * 1025)
    infos = {info.id: info for info in store.sessions()}
    assert infos["edge"].input_tokens == 1024 * MAX_TOKENS  # 2**63 - 1024: exact
    assert infos["huge"].input_tokens == pytest.approx(1025 * MAX_TOKENS, rel=1e-15)
    assert (infos["edge"].output_tokens, infos["huge"].output_tokens) == (1024, 1025)
    assert {info.id for info in store.session_page().sessions} == {"edge", "huge"}
    by_session = store.usage_stats("session")
    assert [(row.key, row.nodes) for row in by_session] == [("huge", 1025), ("edge", 1024)]
    assert by_session[0].input_tokens == pytest.approx(1025 * MAX_TOKENS, rel=1e-15)
    assert by_session[1].input_tokens == 1024 * MAX_TOKENS
    [by_model] = store.usage_stats("model")
    assert by_model.input_tokens == pytest.approx(2049 * MAX_TOKENS, rel=1e-15)
    assert sum(row.nodes for row in store.usage_stats("day")) == 2049
    store.append("huge", turn("user", "again"), parent=root.id)  # the 1,025 turns: a branch
    report = store.prune(unreachable=True, dry_run=False)
    assert report.rolled_up.input_tokens == 1025 * MAX_TOKENS
    assert store.session_info("huge").node_count == 2
    assert store.session_info("huge").input_tokens == infos["huge"].input_tokens
    assert store.session_info("huge").output_tokens == 1025
    assert store.usage_stats("model")[0].nodes == 2049


def test_the_view_the_session_totals_and_the_stats_sum_alike(store: SessionStore) -> None:
    day = 86_400_000
    store.append("a", turn("assistant", "1"), created_at=0, usage=NodeUsage(1, 2, 3, 4, 0.5, "m1"))
    store.append("a", turn("assistant", "2"), created_at=day, usage=NodeUsage(10, 20, cost_usd=1))
    store.append("b", turn("assistant", "3"), created_at=day, usage={"inputTokens": 100})
    store.append("b", turn("user", "no usage"), created_at=day)
    totals = store.read_only_query(
        "SELECT session_id, sum(input_tokens), sum(output_tokens), sum(cost_usd) FROM usage"
        " GROUP BY session_id ORDER BY session_id"
    ).rows
    assert [tuple(row) for row in totals] == [("a", 11, 22, 1.5), ("b", 100, None, None)]
    info = {item.id: item for item in store.sessions()}
    assert (info["a"].input_tokens, info["a"].output_tokens) == (11, 22)
    assert (info["a"].cache_read_tokens, info["a"].cache_write_tokens, info["a"].cost_usd) == (
        3,
        4,
        1.5,
    )
    assert (info["b"].input_tokens, info["b"].cost_usd) == (100, 0.0)
    by_session = store.usage_stats("session")
    assert [(t.key, t.nodes, t.input_tokens, t.cost_usd) for t in by_session] == [
        ("a", 2, 11, 1.5),
        ("b", 1, 100, 0.0),
    ]
    by_day = store.usage_stats("day")
    assert [(t.key, t.nodes, t.input_tokens) for t in by_day] == [
        ("1970-01-02", 2, 110),
        ("1970-01-01", 1, 1),
    ]
    by_model = store.usage_stats("model", limit=1)
    assert [(t.key, t.nodes) for t in by_model] == [(None, 2)]
    with pytest.raises(InvalidArgumentError, match="session, model or day"):
        store.usage_stats("week")  # type: ignore[arg-type]


def test_usage_survives_a_jsonl_export_and_import_and_leaves_the_node_lines_alone(
    open_store: Any, tmp_path: Path
) -> None:
    store: SessionStore = open_store()
    turns = [turn("user", "q"), turn("assistant", "a"), turn("user", "q2"), turn("assistant", "a2")]
    store.append_many("plain", turns, created_at=1000)
    store.append_many("costed", turns, created_at=1000, usage=[None, USAGE, None, {"costUsd": 2}])
    plain, costed = tmp_path / "plain.jsonl", tmp_path / "costed.jsonl"
    store.export_jsonl("plain", plain)
    store.export_jsonl("costed", costed)
    usage_lines = [line for line in costed.read_bytes().splitlines() if b'"type":"usage"' in line]
    others = [line for line in costed.read_bytes().splitlines() if b'"type":"usage"' not in line]
    assert others == plain.read_bytes().splitlines()  # the node and head lines, byte for byte
    assert len(usage_lines) == 2
    before = usage_rows(store, "costed")
    store.delete_session("costed")
    store.import_jsonl(costed)
    assert usage_rows(store, "costed") == before
    again = tmp_path / "again.jsonl"
    store.export_jsonl("costed", again)
    assert again.read_bytes() == costed.read_bytes()
    store.import_jsonl(costed)  # importing the same file again adds nothing
    assert usage_rows(store, "costed") == before
    store.import_jsonl(costed, session_id="copy")
    assert usage_rows(store, "copy") == before


def test_a_usage_line_naming_no_earlier_node_is_refused_with_its_line(
    store: SessionStore, tmp_path: Path
) -> None:
    store.append("s", turn("user", "q"), created_at=1000, usage={"input_tokens": 1})
    path = tmp_path / "s.jsonl"
    store.export_jsonl("s", path)
    lines = path.read_text().splitlines(keepends=True)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(lines[2].replace('"node":"', '"node":"x') + "".join(lines[:2]))
    with pytest.raises(JsonlError, match=r"broken.jsonl:1: usage names node .*no earlier line"):
        store.import_jsonl(broken)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines[:2]) + lines[2].replace('"inputTokens":1', '"inputTokens":-1'))
    with pytest.raises(JsonlError, match=r"bad.jsonl:3: .*input_tokens"):
        store.import_jsonl(bad)
    assert {info.id for info in store.sessions()} == {"s"}


def test_a_handle_appends_with_usage(store: SessionStore) -> None:
    handle = store.session("h")
    node = handle.append(turn("assistant", "x"), usage=NodeUsage(output_tokens=9))
    nodes = handle.append_many([turn("user", "y"), turn("assistant", "z")], usage=[None, USAGE])
    assert [row[0] for row in usage_rows(store, "h")] == [node.id, nodes[1].id]


def test_stats_by_session_model_and_day_on_the_command_line(database_url: str) -> None:
    from typer.testing import CliRunner

    from memstore.cli import app

    with SessionStore(database_url) as store:
        store.append("a", turn("assistant", "1"), created_at=0, usage=USAGE)
        store.append("b", turn("assistant", "2"), created_at=0, usage={"cost_usd": 1})
    runner = CliRunner()
    result = runner.invoke(app, ["--db", database_url, "stats", "--by", "model", "--json"])
    assert result.exit_code == 0, result.output
    assert [(g["key"], g["costUsd"]) for g in json.loads(result.stdout)] == [
        (None, 1.0),
        ("gpt-test", 0.0125),
    ]
    table = runner.invoke(app, ["--db", database_url, "stats", "--by", "day"])
    assert table.exit_code == 0
    assert "1970-01-01" in table.stdout
    assert "1.0125" in table.stdout
    listed = runner.invoke(app, ["--db", database_url, "sessions", "--json"])
    costs = {item["sessionId"]: item["costUsd"] for item in json.loads(listed.stdout)}
    assert costs == {"a": 0.0125, "b": 1.0}


def test_compaction_records_the_summarizers_usage_against_the_summary(
    store: SessionStore, tmp_path: Path
) -> None:
    from memstore import CompactionPolicy, ModelCard
    from memstore.types import StreamDone, TextBlock, Turn, Usage

    calls: list[int] = []

    async def summarizer(conversation: Any, options: Any) -> Any:
        calls.append(1)
        summary = Turn(role="assistant", blocks=(TextBlock(text="the gist"),))
        yield StreamDone(turn=summary, usage=Usage(input_tokens=900, output_tokens=40))

    store.append_many("s", [turn("user" if n % 2 else "assistant", f"t{n}") for n in range(12)])
    card = ModelCard(id="summarizer-1", context_window=100_000)
    result = store.compact_session("s", card, summarizer, CompactionPolicy(keep_recent=4))
    assert result.changed
    assert calls == [1]
    (row,) = usage_rows(store, "s")
    assert row[0] == result.summary_node_id
    assert row[2:6] == ("summarizer-1", None, 900, 40)
    path = tmp_path / "s.jsonl"
    store.export_jsonl("s", path)
    store.import_jsonl(path, session_id="copy")
    assert usage_rows(store, "copy") == [row]


def test_usage_recorded_after_the_append_and_the_usage_aware_estimate(
    store: SessionStore,
) -> None:
    from memstore import UnknownNodeError, UnknownSessionError
    from memstore.condense import estimate_context_tokens

    with pytest.raises(UnknownSessionError):
        store.record_usage("empty", {"input_tokens": 1})
    nodes = store.append_many("s", [turn("user", "x" * 400), turn("assistant", "y" * 40)])
    tail = store.append_many("s", [turn("user", "z" * 80), turn("assistant", "w" * 8)])
    turns = store.load_path("s")
    seed_rule = estimate_context_tokens(turns)
    assert store.estimate_tokens("s") == store.estimate_tokens("s", usage_aware=True) == seed_rule
    assert store.record_usage("s", {"input_tokens": 5000}, node_id=nodes[1].id) == nodes[1].id
    # reported input, the character rule for the turn it produced, then for the turns after it
    expected = 5000 + estimate_context_tokens(turns[1:2]) + estimate_context_tokens(turns[2:])
    assert store.estimate_tokens("s", usage_aware=True) == expected
    assert store.estimate_tokens("s") == seed_rule  # the seed's rule stays the default
    store.record_usage("s", NodeUsage(input_tokens=10, cache_read_tokens=6000, output_tokens=3))
    assert store.estimate_tokens("s", usage_aware=True) == 6013  # the head's: nothing after it
    assert store.estimate_tokens("s", nodes[1].id, usage_aware=True) == expected - (
        estimate_context_tokens(turns[2:])
    )
    with pytest.raises(UnknownNodeError):
        store.record_usage("s", {"input_tokens": 1}, node_id="f" * 32)
    assert [row[0] for row in usage_rows(store, "s")] == [nodes[1].id, tail[1].id]


def test_cost_totals_are_whole_to_a_billionth_of_a_dollar(store: SessionStore) -> None:
    """A float sum drifts (1,500 x 0.001 is 1.4999999999999456): the totals memstore reports do
    not."""
    cheap = NodeUsage(output_tokens=1, cost_usd=0.001)
    store.append_many("a", [turn("assistant", str(i)) for i in range(1500)], usage=[cheap] * 1500)
    assert store.sessions()[0].cost_usd == 1.5
    assert [t.cost_usd for t in store.usage_stats("session")] == [1.5]


def _expected_stats(store: SessionStore, by: str) -> dict[Any, tuple[Any, ...]]:
    """`usage_stats(by)` worked out in Python from the rows: by model or day, each node id
    counted once, in the visible session whose id sorts first (the ids are plain ASCII letters
    and digits, which both databases sort alike)."""
    rows = store.read_only_query(
        "SELECT u.session_id, u.node_id, u.model, u.input_tokens, u.output_tokens,"
        " u.cache_read_tokens, u.cache_write_tokens, u.cost_usd, n.created_at"
        " FROM node_usage AS u JOIN nodes AS n"
        " ON n.session_id = u.session_id AND n.id = u.node_id"
        " JOIN sessions AS s ON s.id = u.session_id WHERE s.importing IS NULL"
        " ORDER BY u.session_id"
    ).rows
    counted: dict[Any, tuple[Any, ...]] = {}
    for session_id, node_id, model, *tokens, cost_usd, created_at in rows:
        copy = (session_id, node_id) if by == "session" else node_id  # by session: each copy
        counted.setdefault(copy, (session_id, model, tokens, cost_usd, created_at))
    totals: dict[Any, list[Any]] = {}
    for session_id, model, tokens, cost_usd, created_at in counted.values():
        day = datetime.fromtimestamp(created_at / 1000, UTC).date().isoformat()
        key = {"session": session_id, "model": model, "day": day}[by]
        total = totals.setdefault(key, [0, 0, 0, 0, 0, 0.0])
        total[0] += 1
        for index, value in enumerate(tokens, start=1):
            total[index] += value or 0
        total[5] += cost_usd or 0.0
    return {key: (*total[:5], round(total[5], 9)) for key, total in totals.items()}


def test_usage_stats_count_each_forked_call_once_in_the_first_visible_session(
    open_store: Any, database_url: str
) -> None:
    """Forks, forks of forks, a copy whose usage was replaced, a deleted original and a copy in
    a session being imported: the totals by session, model and day equal those worked out in
    Python from the rows, and they come most expensive first."""
    store: SessionStore = open_store()
    day = 1_767_225_600_000  # 2026-01-01 UTC
    path = []
    for number in range(8):
        usage = NodeUsage(100 * number, number, number % 3, 1, number / 8, f"m{number % 3}")
        created = day + (number % 3) * 86_400_000 + number
        node = store.append("s3", turn("assistant", f"t{number}"), created_at=created, usage=usage)
        path.append(node.id)
    store.fork_session("s3", path[4], "s5")  # a part
    store.append("s5", turn("assistant", "own"), created_at=day, usage=NodeUsage(7, model="m9"))
    store.fork_session("s5", None, "s7")  # a fork of a fork
    store.fork_session("s3", None, "s1")  # sorts before the original
    store.record_usage("s1", NodeUsage(5, model="m-replaced"), node_id=path[2])
    store.fork_session("s3", None, "s0")  # sorts first, but is being imported: not counted
    store.fork_session("s3", path[1], "s9")
    store.delete_session("s9")
    marker = SessionStore(database_url)
    try:
        with marker.engine.begin() as connection:
            connection.exec_driver_sql("UPDATE sessions SET importing = 'x' WHERE id = 's0'")
    finally:
        marker.close()
    for by in ("session", "model", "day"):
        found = store.usage_stats(by)
        got = {
            row.key: (
                row.nodes,
                row.input_tokens,
                row.output_tokens,
                row.cache_read_tokens,
                row.cache_write_tokens,
                round(row.cost_usd, 9),
            )
            for row in found
        }
        assert got == _expected_stats(store, by), by
        costs = [(row.cost_usd, row.input_tokens + row.output_tokens) for row in found]
        assert costs == sorted(costs, reverse=True)
    by_model = {row.key: row.nodes for row in store.usage_stats("model")}
    assert by_model["m-replaced"] == 1
    assert sum(by_model.values()) == 9  # 8 calls + "own"


def _cost_queries() -> list[str]:
    """The SQL page's three cost queries, in its order: cost per session this month, the most
    expensive tool loops, sessions older than 90 days."""
    page = (Path(__file__).parent.parent / "docs" / "sql.md").read_text()
    section = page.split("### What conversations cost", 1)[1].split("\n## ", 1)[0]
    return [block.split("```", 1)[0].strip() for block in section.split("```sql\n")[1:]]


def call(call_id: str, name: str) -> dict[str, Any]:
    return {"role": "assistant", "blocks": [{"kind": "tool_call", "id": call_id, "name": name}]}


def result(call_id: str) -> dict[str, Any]:
    return {"role": "user", "blocks": [{"kind": "tool_result", "callId": call_id, "output": "ok"}]}


def test_the_sql_pages_cost_queries_answer_what_they_say(
    store: SessionStore, database_url: str
) -> None:
    """Not only do they run: on known usage, each gives the rows its caption promises."""
    this_month, tool_loops, not_updated = _cost_queries()
    month = store.read_only_query("SELECT substr(CAST(CURRENT_DATE AS TEXT), 1, 7)").rows[0][0]
    at = int(
        datetime.strptime(f"{month}-01 12:00", "%Y-%m-%d %H:%M").replace(tzinfo=UTC).timestamp()
    )
    at_ms = at * 1000
    for index, cost in enumerate([0.01, 0.02, 0.03]):  # three turns calling grep: a loop
        store.append(
            "loop",
            call(f"g{index}", "grep"),
            created_at=at_ms,
            usage={"cost_usd": cost, "input_tokens": 100},
        )
        store.append("loop", result(f"g{index}"), created_at=at_ms)
    store.append(
        "once", call("l0", "ls"), created_at=at_ms, usage={"cost_usd": 0.5, "input_tokens": 7}
    )
    store.append(
        "last-year",
        turn("assistant", "a"),
        created_at=at_ms - 400 * 86_400_000,
        usage={"cost_usd": 9},
    )
    rows = [tuple(row) for row in store.read_only_query(this_month).rows]
    assert [(session, round(cost, 6), tokens) for session, cost, tokens, _ in rows] == [
        ("once", 0.5, 7),
        ("loop", 0.06, 300),
    ]
    loops = [tuple(row) for row in store.read_only_query(tool_loops).rows]
    assert [
        (session, tool, turns, round(cost, 6), tokens)
        for session, tool, turns, cost, tokens in loops
    ] == [("loop", "grep", 3, 0.06, 300)]
    cutoff = int(not_updated.split("updated_at < ")[1].split()[0])
    engine = sqlalchemy.create_engine(database_url)
    with engine.begin() as connection:  # as if last written before the page's cutoff
        connection.execute(
            sqlalchemy.text("UPDATE sessions SET updated_at = :at WHERE id = 'last-year'"),
            {"at": cutoff - 1},
        )
    engine.dispose()
    stale = [tuple(row) for row in store.read_only_query(not_updated).rows]
    assert stale == [("last-year", None, cutoff - 1, 1)]
