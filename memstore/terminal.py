"""How the command line draws sessions in a terminal (Rich): trees, transcripts, tables."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text
from rich.tree import Tree

from memstore import jsjson
from memstore.blocks import block_class
from memstore.graph import SessionGraph
from memstore.render._common import turn_preview
from memstore.types import SessionNode

__all__ = ["format_time", "render_transcript", "render_tree"]

PREVIEW = 70


def format_time(epoch_ms: int) -> str:
    """An epoch-millisecond time as UTC, to the second."""
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _one_line(node: SessionNode) -> str:
    return escape(turn_preview(node, PREVIEW))


def _label(node: SessionNode, head: str | None) -> str:
    marker = " [bold yellow]◀ head[/bold yellow]" if node.id == head else ""
    return f"[dim]{node.id[:8]}[/dim] [b]{node.turn.role}[/b]: {_one_line(node)}{marker}"


def render_tree(graph: SessionGraph) -> Tree:
    """The session DAG as a Rich tree, the head marked.

    A run of turns without a fork stays at one indentation; at a fork, each branch nests under
    its first turn, so a deep session stays narrow.
    """
    children: dict[str | None, list[SessionNode]] = {}
    for node in graph.all():
        children.setdefault(node.parent, []).append(node)
    tree = Tree(f"[bold]{escape(graph.session_id)}[/bold]")
    roots = children.get(None, [])
    # (where the line goes, the node, whether it starts a branch that holds its own run)
    pending = [(tree, root, len(roots) > 1) for root in reversed(roots)]
    while pending:
        container, node, starts_branch = pending.pop()
        item = container.add(_label(node, graph.leaf))
        kids = children.get(node.id, [])
        if len(kids) == 1:
            pending.append((item if starts_branch else container, kids[0], False))
        else:
            pending.extend((item, kid, True) for kid in reversed(kids))
    return tree


def _block(block: dict[str, Any]) -> RenderableType:
    view = block_class(block.get("kind")).view(block)
    if view.form == "prose":
        return Text(view.text)
    if view.form == "aside":
        return Text(view.text, style="dim italic")
    if view.form == "picture":
        size = len(view.data_base64)
        return Text(f"[image {view.media_type}, {size} base64 characters]", style="magenta")
    if view.form == "note":
        return Text(f"[{view.text}]", style="yellow")
    title = " ".join(part for part in (view.label, view.name) if part)
    if view.call_id is not None:
        title += f" [{view.call_id}]"
    style = "red" if view.failed is True else "green" if view.answers_call else "cyan"
    body = Syntax(jsjson.dumps(view.value), "json", word_wrap=True)
    return Panel(body, title=escape(title), style=style if view.call_id else "yellow")


def render_transcript(nodes: list[SessionNode]) -> RenderableType:
    """One path's turns, each with its role, time and blocks."""
    parts: list[RenderableType] = []
    for node in nodes:
        wire = node.turn.to_json()
        heading = Text(
            f"{wire['role']} · {format_time(node.created_at)} · {node.id[:12]}", style="bold"
        )
        parts.append(heading)
        parts.extend(_block(block) for block in wire["blocks"])
        parts.append(Text(""))
    return Group(*parts)
