"""Erasure (`erase`, `vacuum`, receipts): on SQLite and PostgreSQL, sync and async (see conftest).

A distinctive string appended, imported from JSONL, copied by compaction and by a fork, and
indexed by search is found nowhere after its subject is erased: not by `load_path`, search, the
Markdown and HTML views, the JSONL export, SQL over every table and view, nor (SQLite) the file's
bytes after `vacuum`. The DAG stays walkable, other sessions are untouched, receipts are written,
and refused input changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy

from memstore import (
    CompactionPolicy,
    ErasureReceipt,
    ModelCard,
    NodeUsage,
    SessionGraph,
    SessionStore,
)
from memstore.errors import (
    InvalidArgumentError,
    JsonlError,
    UnknownNodeError,
    UnknownSessionError,
)
from memstore.invokers import extractive
from memstore.render import render_html, render_markdown

from .test_cli import invoke

SECRET = "ZebraQuux7731"
WIDE = "秘密甲乙丙"  # text of a script without spaces: SQLite's second full-text index
CARD = ModelCard(id="summarizer", context_window=4000, max_output_tokens=500)


def said(text: str, user: str | None = None, role: str = "user") -> dict[str, Any]:
    turn: dict[str, Any] = {"role": role, "blocks": [{"kind": "text", "text": text}]}
    if user is not None:
        turn["user_id"] = user
    return turn


def tool_pair(user: str) -> list[dict[str, Any]]:
    call = {"kind": "tool_call", "id": "c1", "name": "lookup", "input": {"q": SECRET}}
    result = {"kind": "tool_result", "callId": "c1", "output": f"{SECRET} found"}
    return [
        {"role": "assistant", "blocks": [call], "user_id": user},
        {"role": "user", "blocks": [result], "user_id": user},
    ]


def fill(store: SessionStore, tmp_path: Path) -> None:
    """'shared': alice's turns (the secret) among bob's, compacted (a summary made from
    alice's turns, one of them re-appended) and forked; 'imported': alice's turn from a JSONL
    file kept as its original bytes; 'bob': bob's alone."""
    store.append("shared", said("hello from bob", "u-bob"))
    store.append("shared", said(f"alice says {SECRET} {WIDE}", "u-alice"))
    for turn in tool_pair("u-alice"):
        store.append("shared", turn)
    for index in range(8):
        store.append("shared", said(f"bob's turn {index}", "u-bob", "assistant"))
    store.append("shared", said(f"alice again {SECRET}", "u-alice"))
    store.append("shared", said("bob's last word", "u-bob", "assistant"))
    result = store.compact_session("shared", CARD, extractive(), CompactionPolicy(keep_recent=2))
    assert result.changed
    store.append("shared", said("after the compaction", "u-bob"))
    store.fork_session("shared", None, "forked")
    graph = SessionGraph("imported", lambda: 1_700_000_000_000)
    nodes = [graph.append(said("imported hello")), graph.append(said(f"{SECRET}!", "u-alice"))]
    lines = []
    for node in nodes:  # spaced: not the canonical bytes, so the store keeps the line itself
        lines.append(json.dumps({"type": "node", "node": node.to_json()}, ensure_ascii=False))
        lines.append(json.dumps({"type": "head", "leaf": node.id}))
    source = tmp_path / "imported.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store.import_jsonl(source, session_id="imported")
    store.append("bob", said("bob alone", "u-bob"))
    store.append("bob", said("a reply", None, "assistant"))


def everything_sql(database_url: str) -> str:
    """Every row of every table and view memstore's database holds, as text (blobs decoded)."""
    engine = sqlalchemy.create_engine(database_url)
    found: list[str] = []
    try:
        with engine.connect() as connection:
            inspector = sqlalchemy.inspect(connection)
            names = [*inspector.get_table_names(), *inspector.get_view_names()]
            if engine.dialect.name == "sqlite":
                names = list(
                    connection.exec_driver_sql(
                        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
                    ).scalars()
                )
            for name in sorted(names):
                rows = []  # in a stable order: a table's rows come back in any
                for row in connection.exec_driver_sql(f'SELECT * FROM "{name}"'):
                    values = [
                        bytes(value).decode("utf-8", "replace")
                        if isinstance(value, bytes | memoryview)
                        else str(value)
                        for value in row
                    ]
                    rows.append("\t".join(values))
                found.extend(sorted(rows))
    finally:
        engine.dispose()
    return "\n".join(found)


def traces(store: SessionStore, tmp_path: Path, database_url: str) -> list[str]:
    """Where the secret is found: the APIs, views, exports, and SQL."""
    where: list[str] = []
    for session_id in store.list_sessions():
        graph = store.load_session(session_id)
        path = json.dumps([turn.to_json() for turn in store.load_path(session_id)])
        if SECRET in path or WIDE in path:
            where.append(f"load_path {session_id}")
        if SECRET in render_markdown(graph) or SECRET in render_html(graph):
            where.append(f"views {session_id}")
        exported = tmp_path / f"{session_id}.out.jsonl"
        store.export_session(session_id, exported)
        if SECRET.encode() in exported.read_bytes():
            where.append(f"export {session_id}")
    if store.search(SECRET) or store.search(WIDE):
        where.append("search")
    text = everything_sql(database_url).lower()
    if SECRET.lower() in text or WIDE in text:
        where.append("sql")
    return where


def file_bytes(database_url: str) -> bytes:
    path = Path(database_url.removeprefix("sqlite:///"))
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def test_erasing_a_subject_leaves_no_trace(
    store: SessionStore, tmp_path: Path, database_url: str
) -> None:
    fill(store, tmp_path)
    bob_before = tmp_path / "bob.before.jsonl"
    store.export_session("bob", bob_before)
    lengths = {sid: len(store.load_path(sid)) for sid in store.list_sessions()}
    assert {"load_path shared", "load_path forked", "export imported", "search", "sql"} <= set(
        traces(store, tmp_path, database_url)
    )

    dry = store.erase(subject=("user_id", "u-alice"), reason="GDPR request 17")
    assert not dry.erased
    assert dry.receipt is None
    assert dry.summaries >= 1
    assert set(dry.nodes) == {"shared", "forked", "imported"}
    assert store.erasures() == []
    report = store.erase(subject=("user_id", "u-alice"), reason="GDPR request 17", dry_run=False)
    assert report.erased
    assert report.nodes == dry.nodes
    assert report.summaries == dry.summaries
    store.vacuum()

    assert traces(store, tmp_path, database_url) == []
    assert {sid: len(store.load_path(sid)) for sid in store.list_sessions()} == lengths
    shown = render_markdown(store.load_session("shared"))
    assert "[erased]" in shown
    assert "bob's last word" in shown
    store.export_session("bob", tmp_path / "bob.after.jsonl")
    assert (tmp_path / "bob.after.jsonl").read_bytes() == bob_before.read_bytes()
    exported = (tmp_path / "imported.out.jsonl").read_text(encoding="utf-8")
    assert '"erased":{"at":' in exported
    assert "imported hello" in exported
    assert store.search("bob")
    assert store.search("hello")
    [receipt] = store.erasures()
    assert isinstance(receipt, ErasureReceipt)
    assert receipt.id == report.receipt
    assert receipt.scope == "subject"
    assert receipt.target == "user_id=u-alice"
    assert receipt.reason == "GDPR request 17"
    assert receipt.nodes_erased == report.node_count
    assert receipt.sessions_deleted == 0
    assert receipt.summaries_erased == report.summaries
    assert receipt.sessions == ()
    assert receipt.nodes == report.nodes
    assert type(receipt.erased_at) is int
    assert receipt.erased_at > 1_700_000_000_000
    assert receipt.nodes["imported"] == tuple(report.nodes["imported"])
    if database_url.startswith("sqlite"):
        raw = file_bytes(database_url)
        for secret in (SECRET, SECRET.lower(), WIDE):
            assert secret.encode() not in raw


def test_an_erased_nodes_usage_and_key_lines_leave_the_export(
    store: SessionStore, tmp_path: Path
) -> None:
    """The log's usage and key lines of an erased node went with its rows (before, the export
    still carried them, and an import brought the key back)."""
    usage = NodeUsage(input_tokens=7, model="m-1")
    erased, kept = store.append_keyed(
        "s",
        [said(f"alice says {SECRET}"), said("bob")],
        ["key-alice", "key-bob"],
        usage=[usage] * 2,
    )
    store.erase(session_id="s", node_id=erased.id, reason="request 3", dry_run=False)
    store.export_session("s", tmp_path / "s.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    carried = {(line["type"], line["node"]) for line in lines if line["type"] in {"usage", "key"}}
    assert carried == {("usage", kept.id), ("key", kept.id)}
    assert "key-alice" not in (tmp_path / "s.jsonl").read_text()


def test_a_tombstone_keeps_the_dag_and_tool_pairs(store: SessionStore) -> None:
    store.append("s", said("start"))
    for turn in tool_pair("u-alice"):
        store.append("s", turn)
    store.append("s", said("end"))
    before = store.load_session("s").all()
    call = before[1]
    store.erase(session_id="s", node_id=call.id, reason="asked", dry_run=False)
    after = store.load_session("s").all()
    assert [(n.id, n.parent, n.created_at, n.turn.role) for n in after] == [
        (n.id, n.parent, n.created_at, n.turn.role) for n in before
    ]
    wire = after[1].turn.to_json()
    assert wire["blocks"] == [{"kind": "tool_call", "id": "c1", "name": "lookup", "input": {}}]
    assert wire["memstore"]["erased"]["erasure"] == store.erasures()[0].id
    assert after[2].turn.to_json() == before[2].turn.to_json()  # a node alone, no copies
    assert store.search("lookup") == [] or all(h.node_id != call.id for h in store.search(SECRET))


def test_erasing_a_session_deletes_it_and_its_copies(store: SessionStore, tmp_path: Path) -> None:
    store.append("s", said(f"only here {SECRET}"))
    store.append("s", said("reply", None, "assistant"))
    store.fork_session("s", None, "copy")
    store.append("copy", said("the fork goes on"))
    store.append("other", said("unrelated"))
    report = store.erase(session_id="s", reason="closed account", dry_run=False)
    assert report.sessions == ("s",)
    assert set(report.nodes) == {"copy"}
    assert "s" not in store.list_sessions()
    assert store.search(SECRET) == []
    assert [t.to_json()["blocks"][0]["text"] for t in store.load_path("copy")] == [
        "[erased]",
        "[erased]",
        "the fork goes on",
    ]
    [receipt] = store.erasures()
    assert (receipt.scope, receipt.target, receipt.sessions_deleted) == ("session", "s", 1)
    assert (receipt.sessions, receipt.nodes) == (("s",), report.nodes)
    assert store.load_path("other")[0].to_json() == said("unrelated")


def test_refused_input_changes_nothing(
    open_store: Callable[..., SessionStore], database_url: str
) -> None:
    store = open_store()
    store.append("s", said(SECRET))
    before = everything_sql(database_url)
    with pytest.raises(UnknownSessionError, match="nope"):
        store.erase(session_id="nope", reason="r", dry_run=False)
    with pytest.raises(UnknownNodeError, match="missing"):
        store.erase(session_id="s", node_id="missing", reason="r", dry_run=False)
    with pytest.raises(InvalidArgumentError, match="reason"):
        store.erase(session_id="s", reason=" ", dry_run=False)
    with pytest.raises(InvalidArgumentError, match="subject key"):
        store.erase(subject=('a"b', "x"), reason="r", dry_run=False)
    with pytest.raises(InvalidArgumentError):
        store.erase(session_id="s", subject=("k", "v"), reason="r", dry_run=False)
    with pytest.raises(InvalidArgumentError, match=r"^now "):
        store.erase(session_id="s", reason="r", now="soon", dry_run=False)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="limit"):
        store.erasures(limit=-1)
    assert everything_sql(database_url) == before
    assert store.erasures() == []


def test_a_reason_or_subject_the_database_cannot_store_is_refused_by_name(
    open_store: Callable[..., SessionStore], database_url: str
) -> None:
    """PostgreSQL's text holds no NUL: a reason or subject with one is an InvalidArgumentError
    naming it there (it was the driver's DatabaseError, also in a dry run); SQLite erases."""
    store = open_store()
    store.append("s", said("hello", "u-1"))
    before = everything_sql(database_url)
    calls: list[Callable[[], object]] = [
        lambda: store.erase(session_id="s", reason="request\x00 17", dry_run=False),
        lambda: store.erase(subject=("user_id", "u-1\x00"), reason="r"),
    ]
    for call, name in zip(calls, ("reason", "subject value"), strict=True):
        if database_url.startswith("postgresql"):
            with pytest.raises(InvalidArgumentError, match=f"^{name} holds a NUL"):
                call()
            assert everything_sql(database_url) == before
        else:
            call()


def test_a_subject_named_only_in_session_metadata_erases_those_sessions(
    store: SessionStore, tmp_path: Path, database_url: str
) -> None:
    """No turn carries the key: the sessions whose metadata names the subject go whole, and
    their forks keep tombstones in place of the copied turns."""
    store.append("carol-1", said(f"carol's {SECRET}"))
    store.append("carol-1", said("an answer", None, "assistant"))
    store.update_session("carol-1", metadata={"user_id": "u-carol", "plan": "pro"})
    store.fork_session("carol-1", None, "carol-fork")
    store.append("carol-fork", said("the fork's own turn"))
    store.append("dave", said("dave's turn"))
    store.update_session("dave", metadata={"user_id": "u-dave"})
    report = store.erase(subject=("user_id", "u-carol"), reason="closed", dry_run=False)
    assert report.sessions == ("carol-1",)
    assert dict(report.nodes) == {"carol-fork": report.nodes["carol-fork"]}
    assert len(report.nodes["carol-fork"]) == 2
    store.vacuum()
    assert store.list_sessions() == ["carol-fork", "dave"]
    assert [turn.to_json()["blocks"][0]["text"] for turn in store.load_path("carol-fork")] == [
        "[erased]",
        "[erased]",
        "the fork's own turn",
    ]
    assert traces(store, tmp_path, database_url) == []
    [receipt] = store.erasures()
    assert (receipt.sessions_deleted, receipt.nodes_erased) == (1, 2)
    if database_url.startswith("sqlite"):
        assert SECRET.encode() not in file_bytes(database_url)


# --- the command line -------------------------------------------------------------------------


def test_memstore_erase_reports_then_erases_with_yes(database_url: str, tmp_path: Path) -> None:
    with SessionStore(database_url) as store:
        fill(store, tmp_path)
        dry = store.erase(subject=("user_id", "u-alice"), reason="r")
    args = ("erase", "--subject", "user_id=u-alice", "--reason", "GDPR request 17")
    code, stdout, _ = invoke(database_url, *args)
    assert code == 0, stdout
    text = " ".join(stdout.split())
    for session_id, ids in dry.nodes.items():
        nodes = f"{len(ids)} node" + ("s" if len(ids) > 1 else "")
        assert f"would erase {nodes} in session {session_id} (tombstones):" in text
        assert all(node_id[:8] in text for node_id in ids)
    assert f"would erase 0 sessions and {dry.node_count} nodes, {dry.summaries} of them" in text
    assert "nothing was erased: pass --yes to erase" in text
    code, stdout, _ = invoke(database_url, *args, "--json")
    report = json.loads(stdout)
    assert report["erased"] is False
    assert report["receipt"] is None
    assert report["target"] == {"key": "user_id", "value": "u-alice"}
    assert {entry["sessionId"]: entry["nodeIds"] for entry in report["nodes"]} == {
        session_id: list(ids) for session_id, ids in dry.nodes.items()
    }
    assert report["nodeCount"] == dry.node_count
    assert invoke(database_url, "erasures", "--json")[1].strip() == "[]"

    code, stdout, _ = invoke(database_url, *args, "--yes")
    assert code == 0
    assert f"erased 0 sessions and {dry.node_count} nodes" in stdout
    assert "receipt 1" in stdout
    assert ("memstore vacuum" in stdout) == database_url.startswith("sqlite")
    code, stdout, _ = invoke(database_url, "vacuum")
    assert code == 0
    assert ("vacuumed" if database_url.startswith("sqlite") else "nothing to do") in stdout

    # every view of the command line shows the tombstones as such, and the secret nowhere
    views = {
        "show": invoke(database_url, "show", "shared")[1],
        "tree": invoke(database_url, "tree", "shared")[1],
        "show --json": invoke(database_url, "show", "shared", "--json")[1],
        "search": invoke(database_url, "search", SECRET, "--json")[1],
        "sql": invoke(database_url, "sql", "SELECT * FROM nodes", "--json")[1],
        "export": (
            invoke(database_url, "export", "--all", "-o", str(tmp_path / "out"))[1]
            + "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "out").iterdir())
        ),
    }
    for suffix in ("html", "md"):  # the HTML page and the Markdown transcript
        page = tmp_path / f"shared.{suffix}"
        assert invoke(database_url, "export", "shared", "-o", str(page))[0] == 0
        views[suffix] = page.read_text(encoding="utf-8")
    assert [name for name, shown in views.items() if SECRET in shown or WIDE in shown] == []
    for name in ("show", "tree", "html", "md"):
        assert "[erased]" in views[name], name
    assert "bob&#x27;s last word" in views["html"] or "bob's last word" in views["html"]
    assert json.loads(views["search"]) == []
    if database_url.startswith("sqlite"):
        assert SECRET.encode() not in file_bytes(database_url)

    code, stdout, _ = invoke(database_url, "erasures")
    assert code == 0
    assert "user_id=u-alice" in stdout
    assert "GDPR request" in stdout  # the reason wraps on a narrow terminal
    code, stdout, _ = invoke(database_url, "erasures", "--json")
    [receipt] = json.loads(stdout)
    assert list(receipt) == [
        "id",
        "erasedAt",
        "scope",
        "target",
        "reason",
        "sessionsDeleted",
        "nodesErased",
        "summariesErased",
        "sessions",
        "nodes",
    ]
    assert receipt["id"] == 1
    assert type(receipt["erasedAt"]) is int
    assert (receipt["sessionsDeleted"], receipt["summariesErased"]) == (0, dry.summaries)
    assert receipt["sessions"] == []
    assert receipt["scope"] == "subject"
    assert receipt["target"] == {"key": "user_id", "value": "u-alice"}
    assert receipt["reason"] == "GDPR request 17"
    assert receipt["nodesErased"] == dry.node_count
    assert receipt["nodes"] == report["nodes"]


def test_memstore_erasures_keeps_what_each_erasure_did_at_80_columns(database_url: str) -> None:
    """At 80 columns the table left out the sessions column (with the summaries): a session
    erased whole read as `nodes 0`. The scope (the target's form says it) and the summaries go
    first; the counts stay, in the table or, when it cannot fit, one receipt per block."""
    from typer.testing import CliRunner

    from memstore.cli import app

    def at_80() -> list[str]:
        result = CliRunner().invoke(app, ["--db", database_url, "erasures"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert all(len(line) <= 80 for line in lines), result.stdout
        return lines

    with SessionStore(database_url) as store:
        store.append("chat-7", said("hello", "u-alice"))
        store.append("chat-8", said("hello again"))
        store.erase(session_id="chat-8", reason="closed account", dry_run=False)
    header, _, row = at_80()
    headers = [name.strip() for name in header.split("┃")]
    assert headers == ["receipt", "erased (UTC)", "sessions", "nodes", "target", "reason"]
    assert row.split("│")[2:5] == [" 1        ", " 0     ", " chat-8 "]
    with SessionStore(database_url) as store:
        store.erase(subject=("user_id", "u-alice"), reason="GDPR request #17", dry_run=False)
    shown = " ".join(at_80())
    for field in ("sessions", "nodes", "user_id=u-alice", "chat-8", "GDPR request #17"):
        assert field in shown


def test_memstore_erase_lists_a_few_short_ids_of_thousands(database_url: str) -> None:
    """A subject's 1,200 turns in one session: the report's line names a few nodes by their
    short ids and says how many more (it printed every whole id, 40 kB on one line)."""
    with SessionStore(database_url) as store:
        store.append_many("s", [said(f"turn {index}", "u-alice") for index in range(1200)])
        ids = store.erase(subject=("user_id", "u-alice"), reason="r").nodes["s"]
    code, stdout, _ = invoke(database_url, "erase", "--subject", "user_id=u-alice", "--reason", "r")
    assert code == 0, stdout
    [line] = [line for line in stdout.splitlines() if "(tombstones)" in line]
    assert line.startswith("would erase 1200 nodes in session s (tombstones): ")
    assert line.endswith(" and 1192 more (--json lists them all)")
    assert len(line) < 250
    assert all(node_id[:8] in line for node_id in ids[:8])
    code, stdout, _ = invoke(
        database_url, "erase", "--subject", "user_id=u-alice", "--reason", "r", "--json"
    )
    assert json.loads(stdout)["nodes"] == [{"sessionId": "s", "nodeIds": list(ids)}]


def test_memstore_erase_takes_a_session_or_a_nodes_short_id(sqlite_url: str) -> None:
    with SessionStore(sqlite_url) as store:
        store.append("s", said("start"))
        node = store.append("s", said(f"the {SECRET}", None, "assistant"))
        store.append("s", said("end"))
        store.append("gone", said("all of it"))
    short = node.id[:8]
    code, stdout, _ = invoke(
        sqlite_url, "erase", "--session", "s", "--node", short, "--reason", "r", "--yes", "--json"
    )
    assert code == 0, stdout
    report = json.loads(stdout)
    assert report["target"] == {"sessionId": "s", "nodeId": node.id}
    assert report["nodes"] == [{"sessionId": "s", "nodeIds": [node.id]}]
    code, stdout, _ = invoke(sqlite_url, "erase", "--session", "gone", "--reason", "r", "--yes")
    assert code == 0
    assert "erased session gone whole (deleted)" in stdout
    code, stdout, _ = invoke(sqlite_url, "erasures", "--json")
    assert [(r["scope"], r["target"]) for r in json.loads(stdout)] == [
        ("session", {"sessionId": "gone"}),
        ("node", {"sessionId": "s", "nodeId": node.id}),
    ]
    with SessionStore(sqlite_url) as store:
        assert store.list_sessions() == ["s"]
        shown = [turn.to_json()["blocks"][0]["text"] for turn in store.load_path("s")]
        assert shown == ["start", "[erased]", "end"]


@pytest.mark.parametrize("tenant", [None, "acme"])
def test_memstore_erase_of_a_session_counts_the_nodes_it_holds(
    sqlite_url: str, tenant: str | None
) -> None:
    """A whole session's erasure says how many nodes go with it, as `prune` does (it said
    "0 nodes", the count of tombstones only)."""
    with SessionStore(sqlite_url, tenant=tenant or "") as store:
        for number in range(3):
            store.append("s", said(f"turn {number}"))
    chosen = ["--tenant", tenant] if tenant else []
    erase = ["erase", "--session", "s", "--reason", "r", *chosen]

    code, dry, _ = invoke(sqlite_url, *erase)
    assert code == 0, dry
    assert "would erase session s whole (deleted): 3 nodes" in dry
    assert "would erase 1 session and 3 nodes;" in dry
    code, listed, _ = invoke(sqlite_url, *erase, "--json")
    assert json.loads(listed)["sessions"] == [{"sessionId": "s", "nodeCount": 3}]  # and --json
    code, done, _ = invoke(sqlite_url, *erase, "--yes")
    assert code == 0, done
    assert "erased session s whole (deleted): 3 nodes" in done
    assert "erased 1 session and 3 nodes;" in done


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--subject", "user_id", "--reason", "r"), "--subject: 'user_id' is not KEY=VALUE"),
        (("--node", "abc", "--reason", "r"), "--node needs --session"),
        (("--session", "s", "--reason", " "), "error: --reason: say why"),
        (("--session", "nope", "--reason", "r"), "no session 'nope'"),
        (("--session", "s", "--node", "ffff", "--reason", "r"), "ffff"),
        (("--reason", "r"), "erase needs --session (with --node: one node) or --subject"),
        (
            ("--session", "s", "--subject", "k=v", "--reason", "r"),
            "erase a subject (--subject), or a session or node (--session, --node): not both",
        ),
        (("--subject", "a b=x", "--reason", "r"), "error: --subject key 'a b': letters"),
        (("--subject", "k=", "--reason", "r"), "error: --subject value is a non-empty string"),
    ],
)
def test_memstore_erase_refuses_bad_options(
    sqlite_url: str, args: tuple[str, ...], message: str
) -> None:
    with SessionStore(sqlite_url) as store:
        store.append("s", said(SECRET))
    before = everything_sql(sqlite_url)
    code, _, stderr = invoke(sqlite_url, "erase", *args, "--yes")
    assert code != 0
    assert message in " ".join(stderr.split())
    assert everything_sql(sqlite_url) == before


# --- export and import of tombstones --------------------------------------------------------


def test_an_export_with_tombstones_imports_again_with_ids_checked(
    store: SessionStore, tmp_path: Path
) -> None:
    """The tombstones' ids no longer hash their content, and the import (which checks ids by
    default) takes them: as a new session, and again into the session it came from."""
    fill(store, tmp_path)
    store.erase(subject=("user_id", "u-alice"), reason="r", dry_run=False)
    for session_id in ("shared", "imported"):
        exported = tmp_path / f"{session_id}.jsonl"
        store.export_session(session_id, exported)
        assert '"erased":{"at":' in exported.read_text(encoding="utf-8")
        report = store.import_jsonl(exported, session_id=f"{session_id}-again")
        assert report.warnings == []
        again = tmp_path / f"{session_id}-again.jsonl"
        store.export_session(f"{session_id}-again", again)
        assert again.read_bytes() == exported.read_bytes()
        assert (
            store.load_session(f"{session_id}-again").all() == store.load_session(session_id).all()
        )
        store.import_jsonl(exported, session_id=session_id)  # nothing new: the same lines
        assert store.load_path(session_id) == store.load_path(f"{session_id}-again")


def test_only_a_true_tombstone_escapes_the_id_check(store: SessionStore, tmp_path: Path) -> None:
    """A node whose id does not hash its content is refused unless its turn is exactly a
    tombstone: one with anything more (a word left in a block, another key) is not."""
    store.append("s", said("start"))
    store.append("s", said(f"the {SECRET}", None, "assistant"))
    node = store.load_session("s").all()[1]
    store.erase(session_id="s", node_id=node.id, reason="r", dry_run=False)
    exported = tmp_path / "s.jsonl"
    store.export_session("s", exported)
    text = exported.read_text(encoding="utf-8")
    forged = {
        "a word kept": text.replace('"text":"[erased]"', f'"text":"[erased] {SECRET}"'),
        "another key": text.replace('"memstore":{"erased"', '"user_id":"u-1","memstore":{"erased"'),
        "a time as text": re.sub(r'"at":(\d+)', r'"at":"\1"', text),
    }
    for name, changed in forged.items():
        assert changed != text, name
        path = tmp_path / f"forged-{len(name)}.jsonl"
        path.write_text(changed, encoding="utf-8")
        with pytest.raises(JsonlError, match="is not its content hash"):
            store.import_jsonl(path, session_id="forged")
        assert "forged" not in store.list_sessions(), name


@pytest.mark.parametrize(
    "turn",
    [
        said("hello"),
        {"role": "user", "blocks": [{"kind": "thinking", "thinking": "x"}], "extra": 1},
        {"role": "assistant", "blocks": tool_pair("u")[0]["blocks"]},
        {"role": "user", "blocks": tool_pair("u")[1]["blocks"]},
        {"role": "user", "blocks": []},
    ],
)
def test_a_tombstone_is_recognised_as_one_and_an_ordinary_turn_is_not(turn: dict[str, Any]) -> None:
    from memstore import jsjson
    from memstore.tombstones import is_tombstone, tombstone

    text = jsjson.dumps(turn)
    grave = jsjson.dumps(tombstone(turn["role"], text, 1_700_000_000_000, 3))
    assert is_tombstone(grave)
    assert not is_tombstone(text)
    with_text = json.loads(grave)
    with_text["blocks"].append({"kind": "text", "text": SECRET})
    assert not is_tombstone(jsjson.dumps(with_text))
    if with_text["blocks"][0]["kind"] == "tool_call":
        with_text["blocks"][0]["input"] = {"q": SECRET}
        assert not is_tombstone(jsjson.dumps(with_text))
    assert not is_tombstone(grave.replace('"erasure":3', '"erasure":3,"by":"x"'))
    assert not is_tombstone(json.dumps(json.loads(grave)))  # spaced: not as erase writes it


def test_a_summary_is_erased_when_only_a_fork_still_holds_what_it_condensed(
    store: SessionStore, tmp_path: Path, database_url: str
) -> None:
    """Compaction, a fork of the condensed branch, then a prune of that branch from the
    compacted session: the summary's `fromNodeId` is in the fork alone, and its path there
    holds the subject's turns, so the summary is erased (it was missed: its path was looked
    for in its own session only)."""
    store.append("s", said(f"alice says {SECRET}", "u-alice"))
    for index in range(6):
        store.append("s", said(f"bob's turn {index}", "u-bob", "assistant"))
    old_head = store.head("s")
    result = store.compact_session("s", CARD, extractive(), CompactionPolicy(keep_recent=2))
    assert result.changed
    store.fork_session("s", old_head, "copy")
    assert store.prune(unreachable=True, dry_run=False).node_count == 7
    report = store.erase(subject=("user_id", "u-alice"), reason="r", dry_run=False)
    assert report.summaries == 1
    assert report.nodes["s"] == (result.summary_node_id,)
    summary = store.load_path("s")[0].to_json()
    assert summary["blocks"] == [{"kind": "text", "text": "[erased]"}]
    store.vacuum()
    assert traces(store, tmp_path, database_url) == []


def test_erasing_hundreds_of_nodes_of_one_session(store: SessionStore, tmp_path: Path) -> None:
    """600 of a subject's turns with usage in one session (SQLite refused the erasure: the
    condition on their usage lines was 1,200 LIKEs deep, past its expression depth of 1,000)."""
    turns = [said(f"{SECRET} {index}", "u-alice") for index in range(600)]
    store.append_many("s", turns, usage=[{"inputTokens": 1}] * 600)
    report = store.erase(subject=("user_id", "u-alice"), reason="r", dry_run=False)
    assert report.node_count == 600
    store.export_session("s", tmp_path / "s.jsonl")
    exported = (tmp_path / "s.jsonl").read_text(encoding="utf-8")
    assert SECRET not in exported
    assert '"type":"usage"' not in exported
    assert store.usage_stats("session") == []


def test_receipts_are_rows_that_sql_reads(store: SessionStore) -> None:
    """The receipts through `read_only_query` (what `memstore sql` runs), on both backends:
    what, when and why, and never the content."""
    store.append("s", said(f"the {SECRET}", "u-alice"))
    store.append("t", said("bye"))
    store.erase(subject=("user_id", "u-alice"), reason="GDPR request 17", dry_run=False)
    store.erase(session_id="t", reason="closed account", dry_run=False)
    result = store.read_only_query(
        "SELECT id, scope, target, reason, sessions_deleted, nodes_erased, targets_json,"
        " erased_at FROM erasures ORDER BY id"
    )
    rows = [tuple(row) for row in result.rows]
    assert [row[:6] for row in rows] == [
        (1, "subject", "user_id=u-alice", "GDPR request 17", 0, 1),
        (2, "session", "t", "closed account", 1, 0),
    ]
    assert json.loads(rows[1][6]) == {"sessions": ["t"], "nodes": {}}
    assert all(isinstance(row[7], int) and row[7] > 1_700_000_000_000 for row in rows)
    assert SECRET not in repr(rows)


def summary_hashes(store: SessionStore) -> list[tuple[str, str, str]]:
    rows = store.read_only_query("SELECT session_id, node_id, subject_hash FROM summary_subjects")
    return sorted(rows.rows)


def test_a_summary_is_erased_by_subject_after_a_prune_deleted_what_it_condensed(
    store: SessionStore, tmp_path: Path, database_url: str
) -> None:
    """Compaction made a summary holding u-42's string; a prune deleted the condensed branch
    from every session, so no path tells what the summary was made from. The prune kept the
    hashes of the condensed turns' fields for it, and erasing the subject reaches it."""
    store.append("s", said(f"u-42 says {SECRET} {WIDE}", "u-42"))
    for index in range(6):
        store.append("s", said(f"bob's turn {index}", "u-bob", "assistant"))
    result = store.compact_session("s", CARD, extractive(), CompactionPolicy(keep_recent=2))
    summary = store.load_path("s")[0].to_json()
    assert SECRET in json.dumps(summary, ensure_ascii=False)
    assert store.prune(unreachable=True, dry_run=False).node_count == 7
    hashed = hashlib.sha256(b"user_id\0u-42").hexdigest()
    recorded = summary_hashes(store)
    assert ("s", result.summary_node_id, hashed) in recorded
    assert not any(SECRET in row[2] or "u-42" in row[2] for row in recorded)  # hashes only
    dry = store.erase(subject=("user_id", "u-42"), reason="r")
    assert dry.summaries == 1
    report = store.erase(subject=("user_id", "u-42"), reason="r", dry_run=False)
    assert report.summaries == 1
    assert report.nodes == {"s": (result.summary_node_id,)}
    assert store.load_path("s")[0].to_json()["blocks"] == [{"kind": "text", "text": "[erased]"}]
    assert summary_hashes(store) == []  # the tombstoned summary's rows go
    store.vacuum()
    assert traces(store, tmp_path, database_url) == []
    if database_url.startswith("sqlite"):
        raw = file_bytes(database_url)
        for secret in (SECRET, SECRET.lower(), WIDE):
            assert secret.encode() not in raw


def test_a_summary_of_a_summary_inherits_what_the_first_condensed(
    store: SessionStore, tmp_path: Path, database_url: str
) -> None:
    """Two compactions, then one prune deletes both condensed branches: the second summary
    (made from the first) carries the hashes of the first's condensed turns."""
    store.append("s", said(f"u-42 says {SECRET}", "u-42"))
    for index in range(6):
        store.append("s", said(f"bob's turn {index}", "u-bob", "assistant"))
    store.compact_session("s", CARD, extractive(), CompactionPolicy(keep_recent=2))
    for index in range(6):
        store.append("s", said(f"bob's later turn {index}", "u-bob", "assistant"))
    second = store.compact_session("s", CARD, extractive(), CompactionPolicy(keep_recent=2))
    store.prune(unreachable=True, dry_run=False)
    assert [row[1] for row in summary_hashes(store)].count(str(second.summary_node_id)) >= 2
    report = store.erase(subject=("user_id", "u-42"), reason="r", dry_run=False)
    assert report.nodes == {"s": (second.summary_node_id,)}
    assert report.summaries == 1
    store.vacuum()
    assert traces(store, tmp_path, database_url) == []
    store.append("t", said("u-7 speaks", "u-7"))  # a session erased whole takes its rows
    for index in range(4):
        store.append("t", said(f"bob's turn {index}", "u-bob", "assistant"))
    store.compact_session("t", CARD, extractive(), CompactionPolicy(keep_recent=2))
    store.prune(unreachable=True, dry_run=False)
    assert {row[0] for row in summary_hashes(store)} == {"t"}
    store.erase(session_id="t", reason="r", dry_run=False)
    assert summary_hashes(store) == []
