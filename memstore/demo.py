"""`memstore demo`: a small, realistic example built in the user's database and shown back."""

from __future__ import annotations

import itertools
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from memstore.condense import estimate_context_tokens, find_cut_point, should_compact
from memstore.graph import SessionGraph
from memstore.store import SessionStore
from memstore.types import ModelCard, SessionNode

__all__ = ["DEMO_TAG", "build_demo_sessions", "run_demo"]

DEMO_TAG = "memstore-demo"
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


def build_demo_sessions(store: SessionStore) -> list[str]:
    """(Re)create the demo sessions in `store`, with fixed clocks; returns their ids."""
    for session_id, (title, build) in DEMO_SESSIONS.items():
        store.delete_session(session_id)
        graph = SessionGraph(session_id, clock=itertools.count(START_MS, 7_000).__next__)
        build(graph)
        for node in graph.all():
            store.append_node(session_id, node)
        if graph.leaf is not None:
            store.append_node(session_id, graph.branch_from(graph.leaf))
        store.update_session(session_id, title=title, tags=[DEMO_TAG])
    return list(DEMO_SESSIONS)


def _one_line(node: SessionNode) -> str:
    parts = []
    for block in node.turn.to_json()["blocks"]:
        kind = block.get("kind")
        if kind == "text":
            parts.append(block["text"])
        elif kind == "tool_call":
            parts.append(f"[cyan]{block['name']}[/cyan]()")
        elif kind == "tool_result":
            parts.append("[red]error[/red]" if block.get("isError") else "[green]result[/green]")
    line = " ".join(parts).replace("\n", " ")
    return line if len(line) <= 70 else line[:69] + "…"


def render_tree(graph: SessionGraph) -> Tree:
    """The session DAG as a Rich tree: branches as siblings, the head marked."""
    children: dict[str | None, list[SessionNode]] = {}
    for node in graph.all():
        children.setdefault(node.parent, []).append(node)
    tree = Tree(f"[bold]{graph.session_id}[/bold]")

    def grow(branch: Tree, parent: str | None) -> None:
        for node in children.get(parent, []):
            marker = " [bold yellow]◀ head[/bold yellow]" if node.id == graph.leaf else ""
            label = f"[dim]{node.id[:8]}[/dim] [b]{node.turn.role}[/b]: {_one_line(node)}{marker}"
            grow(branch.add(label), node.id)

    grow(tree, None)
    return tree


def run_demo(store: SessionStore, console: Console) -> None:
    """Build the demo sessions and show them: the list, a tree, a path and its token budget."""
    build_demo_sessions(store)
    table = Table(title=f"sessions in {store.engine.url.render_as_string()}")
    for column in ("session", "nodes", "head", "title"):
        table.add_column(column)
    for info in store.sessions():
        table.add_row(info.id, str(info.node_count), (info.head or "")[:8], info.title or "")
    console.print(table)
    graph = store.load_session("demo-config-parser")
    console.print(render_tree(graph))
    path = store.load_path("demo-config-parser")
    tokens = estimate_context_tokens(path)
    card = ModelCard(id="small-model", context_window=100)
    console.print(
        f"head path: {len(path)} turns, ~{tokens} tokens; with a {card.context_window}-token "
        f"window, condense: {should_compact(path, card)}, keeping turns from "
        f"#{find_cut_point(path, 2)} on (never splitting a tool call from its result)"
    )
