"""`memstore demo`: a small, realistic example built in the user's database and shown back."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.table import Table

from memstore.condense import estimate_context_tokens, find_cut_point, should_compact
from memstore.errors import QueryError
from memstore.graph import SessionGraph
from memstore.jsonl import JsonlSessionStore, session_file
from memstore.store import SessionStore
from memstore.terminal import data_table, render_tree
from memstore.types import ModelCard

__all__ = ["DEMO_TAG", "build_demo_sessions", "run_demo", "write_legacy_files"]

DEMO_TAG = "memstore-demo"
SQL_EXAMPLE = (
    "SELECT tool_name, count(*) AS calls, sum(is_error) AS failed FROM tool_calls "
    "GROUP BY tool_name ORDER BY calls DESC, tool_name"
)
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: fixed, so the demo's ids are the same


def _text(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "blocks": [{"kind": "text", "text": text}]}


def _call(call_id: str, name: str, arguments: dict[str, Any], thinking: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "blocks": [
            {"kind": "thinking", "text": thinking},
            {"kind": "tool_call", "id": call_id, "name": name, "input": arguments},
        ],
    }


def _result(call_id: str, output: Any, *, error: bool = False) -> dict[str, Any]:
    block = {"kind": "tool_result", "callId": call_id, "output": output, "isError": error}
    return {"role": "user", "blocks": [block]}


def _parser_session(graph: SessionGraph) -> None:
    graph.append(_text("user", "The config parser crashes on empty files. Can you fix it?"))
    graph.append(_call("c1", "read_file", {"path": "src/config.py"}, "Read the parser first."))
    graph.append(_result("c1", "def parse(text):\n    return json.loads(text)\n"))
    ask = graph.append(
        _text("assistant", "json.loads('') raises. Return {} or raise a clear error?")
    )
    graph.append(_text("user", "Return an empty config."))
    graph.append(
        _call(
            "c2",
            "edit_file",
            {
                "path": "src/config.py",
                "line": 2,
                "text": "    return json.loads(text) if text.strip() else {}",
            },
            "A one-line guard is enough.",
        )
    )
    graph.append(_result("c2", {"ok": True, "diff": "+1 -1"}))
    graph.append(_call("c3", "run_tests", {"args": ["-q", "tests/test_config.py"]}, "Verify."))
    graph.append(_result("c3", "4 passed in 0.12s"))
    graph.append(_text("assistant", "Fixed: empty files now parse to {} and the tests pass."))
    graph.branch_from(ask.id)  # the user changes their mind: a second branch
    graph.append(_text("user", "Actually, raise a clear error that names the file."))
    graph.append(_text("assistant", "Done: ConfigError('config.toml is empty') is raised now."))


def _flaky_session(graph: SessionGraph) -> None:
    graph.append(_text("user", "test_upload fails about one run in ten. Why?"))
    graph.append(
        _call(
            "c1",
            "run_tests",
            {"args": ["-k", "upload", "--count", "20"]},
            "Reproduce it several times.",
        )
    )
    graph.append(_result("c1", {"exit": 1, "failed": 2, "passed": 18}, error=True))
    graph.append(
        _call(
            "c2",
            "grep",
            {"pattern": "sleep\\(", "path": "tests/"},
            "Timing-dependent tests often sleep.",
        )
    )
    graph.append(_result("c2", ["tests/test_upload.py:41:    time.sleep(0.1)"]))
    graph.append(
        _text(
            "assistant",
            "The test sleeps 100 ms and hopes the upload finished. "
            "Waiting on the upload's completion event removes the race.",
        )
    )


DEMO_SESSIONS = {
    "demo-config-parser": ("Fix the config parser's crash on empty files", _parser_session),
    "demo-flaky-test": ("Find why test_upload is flaky", _flaky_session),
}


def _build(session_id: str) -> SessionGraph:
    graph = SessionGraph(session_id, clock=itertools.count(START_MS, 7_000).__next__)
    DEMO_SESSIONS[session_id.removeprefix("legacy-")][1](graph)
    return graph


def build_demo_sessions(store: SessionStore) -> list[str]:
    """(Re)create the demo sessions in `store` through the Python API; returns their ids."""
    for session_id, (title, _) in DEMO_SESSIONS.items():
        store.delete_session(session_id)
        graph = _build(session_id)
        for node in graph.all():
            store.append_node(session_id, node)
        if graph.leaf is not None:
            store.append_node(session_id, graph.branch_from(graph.leaf))
        store.update_session(session_id, title=title, tags=[DEMO_TAG])
    return list(DEMO_SESSIONS)


def write_legacy_files(root: Path) -> list[Path]:
    """Legacy JSONL files as the original TypeScript store wrote them (via JsonlSessionStore)."""
    files = JsonlSessionStore(root)
    for session_id in DEMO_SESSIONS:
        legacy_id = f"legacy-{session_id}"
        session_file(root, legacy_id).unlink(missing_ok=True)
        graph = _build(legacy_id)
        for node in graph.all():
            files.append_node(legacy_id, node)
    return [session_file(root, f"legacy-{session_id}") for session_id in DEMO_SESSIONS]


def _sessions_table(store: SessionStore, width: int) -> RenderableType:
    rows = []
    for info in store.sessions():
        short = store.short_node_ids(info.id, [info.head] if info.head else [])
        head = short.get(info.head or "", "")
        rows.append((info.id, str(info.node_count), str(info.branch_count), head, info.title or ""))
    headers = ("session", "nodes", "branches", "head", "title")
    copyable = (True, True, True, True, False)
    return data_table(
        headers, rows, copyable=copyable, width=width, title="sessions", one_line=("title",)
    )


def _search_table(store: SessionStore, query: str) -> Table:
    table = Table("session", "role", "snippet", title=f"search: {query!r}")
    for hit in store.search(query, limit=5):
        table.add_row(escape(hit.session_id), hit.role, escape(hit.snippet.replace("\n", " ")))
    return table


def _sql_table(store: SessionStore, statement: str) -> Table:
    result = store.read_only_query(statement)
    table = Table(*result.columns, title="sql: most used tools and their failures")
    for row in result.rows:
        table.add_row(*(escape(str(value)) for value in row))
    return table


def _show_sql(store: SessionStore, console: Console) -> None:
    """The SQL step, or one line saying why it was skipped and how to run it (a PostgreSQL
    superuser login, as in most development setups, may not run read-only queries)."""
    try:
        console.print(_sql_table(store, SQL_EXAMPLE))
    except QueryError as exc:
        console.print(f"sql: skipped: {escape(str(exc))}", soft_wrap=True, highlight=False)


def _condensation_line(store: SessionStore) -> str:
    path = store.load_path("demo-config-parser")
    card = ModelCard(id="small-model", context_window=100)
    return (
        f"head path: {len(path)} turns, ~{estimate_context_tokens(path)} tokens; with a "
        f"{card.context_window}-token window, condense: {should_compact(path, card)}, keeping "
        f"turns from #{find_cut_point(path, 2)} on (never splitting a tool call from its result)"
    )


def run_demo(store: SessionStore, console: Console, workdir: Path) -> None:
    """Build sessions through the API, import legacy JSONL files written as the original did,
    then show the sessions, a tree, a search, a SQL query and a byte-identical export."""
    build_demo_sessions(store)
    legacy = write_legacy_files(workdir / "legacy-jsonl")
    for path in legacy:
        store.delete_session(path.stem)
    report = store.import_jsonl(workdir / "legacy-jsonl")
    console.print(
        f"imported {len(report.files)} legacy JSONL files from {workdir / 'legacy-jsonl'}: "
        f"{report.records} records, {report.nodes} nodes"
    )
    console.print(_sessions_table(store, console.width))
    console.print(render_tree(store.load_session("demo-config-parser")))
    console.print(_search_table(store, "upload race"))
    _show_sql(store, console)
    exported = workdir / "exported.jsonl"
    store.export_jsonl(legacy[0].stem, exported)
    same = exported.read_bytes() == legacy[0].read_bytes()
    console.print(
        f"exported {legacy[0].stem} -> {exported}: byte-identical to the original: {same}"
    )
    console.print(_condensation_line(store))
