"""Retention (`prune`, expiry): on SQLite and PostgreSQL, sync and async (see conftest).

A prune only reports unless told to delete, deletes exactly what it reported, deletes whole
sessions or the nodes no head reaches (never an ancestor of a kept node), and leaves every
view, the full-text index, the remaining heads' paths and the remaining sessions' exports
consistent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import ExpiryDefaults, PruneReport, SessionGraph, SessionNode, SessionStore
from memstore.errors import InvalidArgumentError, InvalidSessionIdError, UnknownSessionError

from .test_cli import invoke
from .test_query import check_fts

VIEWS = ("blocks", "turns", "tool_calls", "session_stats", "session_sources")
NODE_COLUMNS = ("node_id", "call_node_id", "result_node_id")
DAY = 86_400_000


def say(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "blocks": [{"kind": "text", "text": text}]}


def tool_call(word: str) -> dict[str, Any]:
    block = {"kind": "tool_call", "id": f"call-{word}", "name": "grep", "input": {"q": word}}
    return {"role": "assistant", "blocks": [block]}


def tool_result(word: str) -> dict[str, Any]:
    block = {"kind": "tool_result", "callId": f"call-{word}", "output": f"found {word}"}
    return {"role": "user", "blocks": [block]}


def nodes_of(store: SessionStore) -> dict[str, set[str]]:
    """Every session's node ids."""
    return {sid: {n.id for n in store.load_session(sid).all()} for sid in store.list_sessions()}


def reported(report: PruneReport, before: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The (session, node) pairs a report names."""
    pairs = {(s.id, node) for s in report.sessions for node in before[s.id]}
    return pairs | {(b.session_id, node) for b in report.branches for node in b.node_ids}


def pairs(nodes: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(sid, node) for sid, ids in nodes.items() for node in ids}


def build(store: SessionStore) -> dict[str, list[str]]:
    """Three sessions: `kept` (one chain with a tool call), `forked` (a branch off its root,
    the head back on the main line, a tool call on each side), `scratch` (tagged). Each turn
    says a word of its own; returns each session's node ids in the order appended."""
    ids: dict[str, list[str]] = {}
    kept = store.append_many("kept", [say("alpha kept"), tool_call("kq"), tool_result("kq")])
    ids["kept"] = [n.id for n in kept]
    main = store.append_many("forked", [say("bravo root"), say("charlie main", "assistant")])
    side = store.append_many(
        "forked", [say("delta side"), tool_call("sq"), tool_result("sq")], parent=main[0].id
    )
    store.append_node("forked", main[1])  # the head back on the main line
    tail = store.append("forked", say("echo main tail"))
    ids["forked"] = [n.id for n in [*main, *side, tail]]
    scratch = store.append_many("scratch", [say("foxtrot scratch"), say("golf", "assistant")])
    ids["scratch"] = [n.id for n in scratch]
    store.update_session("scratch", tags=["scratch"], title="a scratch session")
    return ids


def view_rows(database_url: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of every view, sorted."""
    engine = sqlalchemy.create_engine(database_url)
    try:
        with engine.connect() as connection:
            return {
                view: sorted(
                    (
                        dict(row._mapping)
                        for row in connection.execute(sqlalchemy.text(f"SELECT * FROM {view}"))
                    ),
                    key=lambda row: json.dumps(row, sort_keys=True, default=str),
                )
                for view in VIEWS
            }
    finally:
        engine.dispose()


def exported_lines(store: SessionStore, tmp_path: Path, session_id: str) -> list[bytes]:
    path = tmp_path / f"{session_id}.{len(list(tmp_path.iterdir()))}.jsonl"
    store.export_jsonl(session_id, path)
    return path.read_bytes().splitlines(keepends=True)


def line_node(line: bytes) -> str:
    """The node a JSONL line names: a node record's id, a head record's leaf."""
    record = json.loads(line)
    return str(record["node"]["id"] if record["type"] == "node" else record["leaf"])


def test_a_prune_only_reports_unless_told_to_delete(store: SessionStore) -> None:
    ids = build(store)
    before = nodes_of(store)
    report = store.prune(tag="scratch", unreachable=True)
    assert not report.deleted
    assert nodes_of(store) == before
    assert [s.id for s in report.sessions] == ["scratch"]
    assert report.sessions[0].node_count == 2
    assert [(b.session_id, b.node_ids) for b in report.branches] == [
        ("forked", tuple(ids["forked"][2:5]))
    ]
    assert report.node_count == 5
    assert report.bytes == sum(s.bytes for s in report.sessions) + report.branches[0].bytes > 0

    deleted = store.prune(tag="scratch", unreachable=True, dry_run=False)
    assert deleted.deleted
    assert deleted == PruneReport(report.sessions, report.branches, deleted=True)
    assert pairs(before) - pairs(nodes_of(store)) == reported(report, before)
    assert store.prune(tag="scratch", unreachable=True) == PruneReport()


def test_the_bytes_are_those_of_the_stored_turns(store: SessionStore) -> None:
    store.append_many("s", [say("é" * 10), say("x")])  # two bytes a character: UTF-8
    (session,) = store.prune(older_than=timedelta(0), now=2**62).sessions
    turns = [n.turn.json_text() for n in store.load_session("s").all()]
    assert session.bytes == sum(len(text.encode()) for text in turns)
    assert session.node_count == 2


def test_the_session_filters_select_sessions_matching_all_of_them(store: SessionStore) -> None:
    build(store)
    now = max(info.updated_at for info in store.sessions()) + 1
    assert {s.id for s in store.prune(older_than=timedelta(0), now=now).sessions} == {
        "kept",
        "forked",
        "scratch",
    }
    assert store.prune(older_than=timedelta(days=1), now=now) == PruneReport()
    both = store.prune(older_than=timedelta(0), tag="scratch", now=now)
    assert [s.id for s in both.sessions] == ["scratch"]
    assert store.prune(older_than=timedelta(days=1), tag="scratch", now=now) == PruneReport()
    assert store.prune(tag="nothing") == PruneReport()


def test_sessions_expire_at_their_own_time_else_their_tags_else_the_stores(
    store: SessionStore,
) -> None:
    build(store)
    updated = {info.id: info.updated_at for info in store.sessions()}

    def expired(days: float) -> list[str]:
        now = max(updated.values()) + int(days * DAY)
        return [s.id for s in store.prune(expired=True, now=now).sessions]

    assert expired(10_000) == []  # no expiry anywhere: nothing expires
    store.set_expiry_default(timedelta(days=30))
    store.set_expiry_default(timedelta(days=1), tag="scratch")
    assert store.expiry_defaults() == ExpiryDefaults(30 * DAY, {"scratch": DAY})
    assert expired(0.5) == []
    assert expired(2) == ["scratch"]
    assert expired(31) == ["forked", "kept", "scratch"]

    store.update_session("scratch", tags=["scratch", "keep"])
    store.set_expiry_default(timedelta(days=90), tag="keep")  # the longest of its tags wins
    updated["scratch"] = store.session_info("scratch").updated_at
    assert expired(31) == ["forked", "kept"]
    assert expired(91) == ["forked", "kept", "scratch"]

    at = datetime.fromtimestamp(updated["kept"] / 1000, UTC) + timedelta(days=400)
    store.update_session("kept", expires_at=at)  # its own time wins, later or sooner
    assert store.session_info("kept").expires_at == updated["kept"] + 400 * DAY
    assert expired(91) == ["forked", "scratch"]
    store.update_session("forked", expires_at=0)
    assert expired(0) == ["forked"]
    store.update_session("forked", expires_at=None)
    store.set_expiry_default(None)
    store.set_expiry_default(None, tag="keep")
    assert store.expiry_defaults() == ExpiryDefaults(None, {"scratch": DAY})
    assert expired(401) == ["kept", "scratch"]


def test_set_expiry_changes_every_session_named_or_none(store: SessionStore) -> None:
    """Several sessions' expiry in one transaction: an unknown id (anywhere in the list), a
    bad time or no ids change nothing and make no session; `None` clears them all."""
    build(store)
    store.update_session("scratch", expires_at=7)
    store.set_expiry(["kept", "forked"], 1_000)
    assert {info.id: info.expires_at for info in store.sessions()} == {
        "kept": 1_000,
        "forked": 1_000,
        "scratch": 7,
    }
    for bad, error, message in [
        (["kept", "nope", "scratch"], UnknownSessionError, "no session 'nope'"),
        (["nope"], UnknownSessionError, "no session 'nope'"),
        ([], InvalidArgumentError, "non-empty list"),
        ("kept", InvalidArgumentError, "non-empty list"),
        (["kept", ""], InvalidSessionIdError, "session id"),
    ]:
        with pytest.raises(error, match=message):
            store.set_expiry(bad, 2_000)
    with pytest.raises(InvalidArgumentError, match="expires_at"):
        store.set_expiry(["kept"], -1)
    with pytest.raises(InvalidArgumentError, match="time zone"):
        store.set_expiry(["kept"], datetime(2030, 1, 1))
    assert {info.id: info.expires_at for info in store.sessions()} == {
        "kept": 1_000,
        "forked": 1_000,
        "scratch": 7,
    }
    assert store.list_sessions() == ["forked", "kept", "scratch"]
    store.set_expiry(["scratch", "kept", "scratch"], datetime(2030, 1, 1, tzinfo=UTC))
    assert store.session_info("scratch").expires_at == 1_893_456_000_000
    store.set_expiry(["kept", "forked", "scratch"], None)
    assert {info.expires_at for info in store.sessions()} == {None}


def test_unreachable_nodes_go_and_every_ancestor_of_a_head_stays(store: SessionStore) -> None:
    chain = store.append_many("s", [say(f"turn {i}") for i in range(6)])
    store.append_node("s", chain[2])  # the head moved back: turns 3 to 5 are unreached
    fork = store.append_many("s", [say("fork a"), say("fork b")], parent=chain[0].id)
    store.append_node("s", chain[1])  # back again: turn 2 and the fork are unreached too
    report = store.prune(unreachable=True, dry_run=False)
    gone = {node.id for node in [*chain[2:], *fork]}
    assert set(report.branches[0].node_ids) == gone
    assert {n.id for n in store.load_session("s").all()} == {chain[0].id, chain[1].id}
    assert store.head("s") == chain[1].id
    assert store.load_path("s") == [chain[0].turn, chain[1].turn]


def test_a_compacted_sessions_old_branch_is_unreached(store: SessionStore) -> None:
    old = store.append_many("s", [say("old one"), say("old two")])
    new_root = SessionGraph("s").next_node(say("[condensed earlier context] old"))
    store.append_node("s", new_root)  # as compaction does: a new root, the head on it
    store.append("s", say("old two"))
    report = store.prune(unreachable=True)
    assert report.branches[0].node_ids == tuple(n.id for n in old)


def test_after_a_prune_everything_left_is_consistent(
    store: SessionStore, database_url: str, tmp_path: Path
) -> None:
    ids = build(store)
    views = view_rows(database_url)
    kept_sessions = ("kept", "forked")
    paths = {sid: store.load_path(sid) for sid in kept_sessions}
    exports = {sid: exported_lines(store, tmp_path, sid) for sid in kept_sessions}
    store.index_search_backlog()

    report = store.prune(tag="scratch", unreachable=True, dry_run=False)
    pruned = set(report.branches[0].node_ids)
    assert pruned == set(ids["forked"][2:5])

    # The full-text index: FTS5's own check, with and without the backlog indexed first.
    check_fts(database_url)
    store.index_search_backlog()
    check_fts(database_url)
    assert store.search("delta") == []
    assert store.search("foxtrot") == []
    assert [hit.session_id for hit in store.search("charlie")] == ["forked"]
    assert [hit.session_id for hit in store.search("alpha")] == ["kept"]

    # Every view: the deleted session and nodes are gone, the rest unchanged.
    after = view_rows(database_url)
    for view in VIEWS:
        expected = [
            row
            for row in views[view]
            if row["session_id"] != "scratch"
            and not any(row.get(column) in pruned for column in NODE_COLUMNS)
        ]
        if view == "session_stats":
            for row in expected:
                if row["session_id"] == "forked":
                    row.update(nodes=3, user_turns=2, assistant_turns=1, branches=1)
                    row.update(tool_calls=0)
        assert after[view] == expected, view

    # The remaining heads' paths, and their exports byte for byte.
    for sid in kept_sessions:
        assert store.load_path(sid) == paths[sid]
    assert exported_lines(store, tmp_path, "kept") == exports["kept"]
    forked = exported_lines(store, tmp_path, "forked")
    assert forked == [line for line in exports["forked"] if line_node(line) not in pruned]
    again = SessionStore(f"sqlite:///{tmp_path / 'again.db'}")
    try:
        (tmp_path / "forked.jsonl").write_bytes(b"".join(forked))
        again.import_jsonl(tmp_path / "forked.jsonl")
        assert again.load_path("forked") == paths["forked"]
        assert nodes_of(again)["forked"] == nodes_of(store)["forked"]
    finally:
        again.close()


def test_a_prune_needs_a_filter_and_good_arguments(store: SessionStore) -> None:
    store.append("s", say("hello"))
    with pytest.raises(InvalidArgumentError, match="needs a filter"):
        store.prune(dry_run=False)
    with pytest.raises(InvalidArgumentError, match="older_than is a duration >= 0"):
        store.prune(older_than=timedelta(seconds=-1))
    with pytest.raises(InvalidArgumentError, match=r"older_than is a datetime\.timedelta"):
        store.prune(older_than=30)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="naive"):
        store.update_session("s", expires_at=datetime(2030, 1, 1))
    with pytest.raises(InvalidArgumentError, match="expires_at is epoch ms"):
        store.update_session("s", expires_at=-1)
    with pytest.raises(InvalidArgumentError, match="after is a duration >= 0"):
        store.set_expiry_default(timedelta(days=-1))
    assert store.session_info("s").expires_at is None
    assert store.session_info("s").node_count == 1


@pytest.mark.parametrize("tag", ["", 5])
def test_an_empty_tag_is_refused_by_name_as_a_filter_and_as_a_tag(
    store: SessionStore, tag: Any
) -> None:
    """`prune(tag="")` matched no session (or only those given an empty tag, which
    `update_session` took): it, the listings' tag filter and a tag's expiry default refuse an
    empty tag by name, and so does `update_session`; nothing changes."""
    store.append("s", say("hello"))
    store.update_session("s", tags=["kept"])
    refused = f"tag: a tag is a non-empty string, not {tag!r}"
    with pytest.raises(InvalidArgumentError, match=f"^{refused}"):
        store.prune(tag=tag, dry_run=False)
    with pytest.raises(InvalidArgumentError, match=f"^{refused}"):
        store.prune(tag=tag, older_than=timedelta(0), dry_run=False)
    with pytest.raises(InvalidArgumentError, match=f"^{refused}"):
        store.sessions(tag=tag)
    with pytest.raises(InvalidArgumentError, match=f"^{refused}"):
        store.session_page(tag=tag)
    with pytest.raises(InvalidArgumentError, match=f"^{refused}"):
        store.set_expiry_default(timedelta(days=1), tag=tag)
    with pytest.raises(
        InvalidArgumentError, match=f"^tags: a tag is a non-empty string, not {tag!r}"
    ):
        store.update_session("s", tags=["other", tag])
    assert store.session_info("s").tags == ("kept",)
    assert store.expiry_defaults() == ExpiryDefaults()
    assert store.list_sessions() == ["s"]


@pytest.mark.parametrize("now", ["x", 1.5, -1, 2**63, datetime(2030, 1, 1)])
def test_a_prune_refuses_a_now_that_is_no_time(store: SessionStore, now: Any) -> None:
    """A `now` that is no epoch ms is refused by name on both backends (SQLite compared a
    string as later than every time, so every session had expired; PostgreSQL's error was
    its own SQL), and nothing is deleted."""
    store.append("s", say("hello"))
    store.update_session("s", expires_at=5 * DAY)
    with pytest.raises(InvalidArgumentError, match=r"^now "):
        store.prune(expired=True, dry_run=False, now=now)
    assert store.list_sessions() == ["s"]
    assert [s.id for s in store.prune(expired=True, now=6 * DAY).sessions] == ["s"]
    when = datetime(1970, 1, 7, tzinfo=UTC)
    assert [s.id for s in store.prune(expired=True, now=when).sessions] == ["s"]


# --- a prune's report is what it deletes, over random DAGs ----------------------------------


@st.composite
def stores(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Sessions as plans: each a list of appends (a parent index or None for the head), head
    moves back onto earlier nodes, a tag and an expiry."""
    sessions = []
    for number in range(draw(st.integers(1, 4))):
        steps: list[tuple[str, int | None]] = []
        for i in range(draw(st.integers(0, 8))):
            kind = draw(st.sampled_from(["append", "append", "fork", "move"])) if i else "append"
            steps.append((kind, draw(st.integers(0, i)) if kind != "append" else None))
        sessions.append(
            {
                "id": f"s{number}",
                "steps": steps,
                "tags": draw(st.lists(st.sampled_from(["a", "b"]), unique=True, max_size=2)),
                "expires_at": draw(st.sampled_from([None, 0, 2**62])),
            }
        )
    return sessions


def make(store: SessionStore, sessions: list[dict[str, Any]]) -> None:
    for old in store.list_sessions():
        store.delete_session(old)
    for session in sessions:
        sid: str = session["id"]
        made: list[SessionNode] = []
        for i, (kind, other) in enumerate(session["steps"]):
            picked = made[other % len(made)] if other is not None and made else None
            if kind == "move" and picked is not None:
                store.append_node(sid, picked)
            elif kind == "fork" and picked is not None:
                made.append(store.append(sid, say(f"{sid} turn {i}"), parent=picked.id))
            else:
                made.append(store.append(sid, say(f"{sid} turn {i}")))
        store.update_session(sid, tags=session["tags"], expires_at=session["expires_at"])


@settings(
    max_examples=20,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    sessions=stores(),
    tag=st.sampled_from([None, "a", "b"]),
    expired=st.booleans(),
    unreachable=st.booleans(),
)
def test_a_prunes_report_is_what_it_then_deletes(
    open_store: Callable[..., SessionStore],
    sessions: list[dict[str, Any]],
    tag: str | None,
    expired: bool,
    unreachable: bool,
) -> None:
    store = open_store()  # one per example, on the test's database, emptied first
    try:
        check_report_is_deletion(store, sessions, tag, expired, unreachable)
    finally:
        store.close()


def check_report_is_deletion(
    store: SessionStore,
    sessions: list[dict[str, Any]],
    tag: str | None,
    expired: bool,
    unreachable: bool,
) -> None:
    make(store, sessions)
    if tag is None and not expired and not unreachable:
        unreachable = True
    before = nodes_of(store)
    heads = {sid: store.head(sid) for sid in before}
    paths = {sid: store.load_path_nodes(sid) for sid in before}
    report = store.prune(tag=tag, expired=expired, unreachable=unreachable, now=1)
    done = store.prune(tag=tag, expired=expired, unreachable=unreachable, now=1, dry_run=False)
    assert done == PruneReport(report.sessions, report.branches, deleted=True)
    after = nodes_of(store)
    assert pairs(before) - pairs(after) == reported(report, before)
    assert set(before) - set(after) == {s.id for s in report.sessions}
    for sid, kept in after.items():  # every kept node's ancestors are kept; heads walk as before
        graph = store.load_session(sid)
        assert all(n.parent is None or n.parent in kept for n in graph.all())
        assert store.head(sid) == heads[sid]
        assert store.load_path_nodes(sid) == paths[sid]


# --- the command line -------------------------------------------------------------------------


def test_memstore_prune_reports_then_deletes_with_yes(database_url: str) -> None:
    with SessionStore(database_url) as store:
        ids = build(store)
    code, stdout, _ = invoke(database_url, "prune", "--tag", "scratch", "--unreachable")
    assert code == 0
    assert "would delete session scratch: 2 nodes" in stdout
    assert "would delete 3 nodes no head reaches in session forked" in stdout
    assert all(node_id[:8] in stdout for node_id in ids["forked"][2:5])
    assert "nothing was deleted: pass --yes to delete" in " ".join(stdout.split())
    code, stdout, _ = invoke(database_url, "prune", "--tag", "scratch", "--unreachable", "--json")
    report = json.loads(stdout)
    assert report["deleted"] is False
    assert [s["sessionId"] for s in report["sessions"]] == ["scratch"]
    assert report["branches"][0]["nodeIds"] == ids["forked"][2:5]
    assert report["nodeCount"] == 5
    with SessionStore(database_url) as store:
        assert store.list_sessions() == ["forked", "kept", "scratch"]

    code, stdout, _ = invoke(database_url, "prune", "--tag", "scratch", "--unreachable", "--yes")
    assert code == 0
    assert "deleted session scratch" in stdout
    with SessionStore(database_url) as store:
        assert store.list_sessions() == ["forked", "kept"]
        assert len(store.load_session("forked").all()) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "prune needs a filter: --older-than, --tag, --expired or --unreachable"),
        (("--older-than", "90"), "--older-than: '90' is no duration"),
        (("--older-than", "-1d"), "--older-than: '-1d' is no duration"),
        (("--tag", ""), "--tag: a tag is a non-empty string, not ''"),
        (("--tag", "", "--older-than", "0s"), "--tag: a tag is a non-empty string, not ''"),
    ],
)
def test_memstore_prune_refuses_bad_options(
    sqlite_url: str, args: tuple[str, ...], message: str
) -> None:
    with SessionStore(sqlite_url) as store:
        store.append("s", say("hello"))
    code, _, stderr = invoke(sqlite_url, "prune", *args, "--yes")
    assert code != 0
    assert message in stderr
    with SessionStore(sqlite_url) as store:
        assert store.list_sessions() == ["s"]


def test_memstore_prune_lists_a_few_short_ids_of_a_long_branch(database_url: str) -> None:
    """A branch of 1,000 turns no head reaches: its line names a few by their short ids and
    says how many more (it printed every whole id on one line)."""
    with SessionStore(database_url) as store:
        root = store.append("s", say("root"))
        branch = store.append_many("s", [say(f"turn {index}") for index in range(1000)])
        store.append("s", say("the other answer"), parent=root.id)
    code, stdout, _ = invoke(database_url, "prune", "--unreachable")
    assert code == 0, stdout
    [line] = [line for line in stdout.splitlines() if "no head reaches" in line]
    assert line.endswith(" and 992 more (--json lists them all)")
    assert len(line) < 250
    assert all(node.id[:8] in line for node in branch[:8])


def test_a_branch_deeper_than_sqlites_trigger_depth_is_pruned(store: SessionStore) -> None:
    """A compacted or rewound long session leaves a chain of thousands of nodes no head
    reaches: pruning it unlinks every parent before deleting (deleted a chunk at a time, the
    cascade through the parent key recursed down the rest of the chain, past SQLite's 1,000
    levels: "too many levels of trigger recursion")."""
    chain = store.append_many("long", [say(f"turn {i}") for i in range(1_600)])
    kept = store.append("long", say("a fresh start"), parent=chain[0].id)
    report = store.prune(unreachable=True, dry_run=False)
    assert [(b.session_id, len(b.node_ids)) for b in report.branches] == [("long", 1_599)]
    assert [node.id for node in store.load_session("long").all()] == [chain[0].id, kept.id]
    assert store.search("turn") == [] or {h.node_id for h in store.search("turn")} == {chain[0].id}


def test_a_pruned_branchs_usage_and_key_lines_leave_the_export(
    store: SessionStore, tmp_path: Path
) -> None:
    """The log's usage and key lines of pruned nodes go with them: the export named nodes it
    no longer held, first in the file, and an import of it was refused."""
    root = store.append("s", say("root"))
    old = store.append_keyed(
        "s",
        [say("old question"), say("old answer", "assistant")],
        ["k-old-1", "k-old-2"],
        usage=[None, {"inputTokens": 9, "model": "m"}],
    )
    kept = store.append(
        "s", say("new answer", "assistant"), parent=root.id, usage={"inputTokens": 4}
    )
    report = store.prune(unreachable=True, dry_run=False)
    assert report.branches[0].node_ids == tuple(node.id for node in old)
    lines = exported_lines(store, tmp_path, "s")
    named = set()
    for line in lines:  # node, head, usage and key lines
        record = json.loads(line)
        named.add(record["node"]["id"] if record["type"] == "node" else record.get("leaf"))
        named.add(record.get("node") if record["type"] in ("usage", "key") else None)
    assert named - {None} == {root.id, kept.id}
    assert not any(b"k-old" in line for line in lines)
    path = tmp_path / "s.exported.jsonl"
    path.write_bytes(b"".join(lines))
    store.import_jsonl(path, session_id="again")
    assert exported_lines(store, tmp_path, "again") == lines
    # the pruned call's 9 tokens stay in the session's total; the export does not carry them
    totals = {row.key: row.input_tokens for row in store.usage_stats("session")}
    assert totals == {"s": 13, "again": 4}
