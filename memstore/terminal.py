"""How the command line draws sessions in a terminal (Rich): trees, transcripts, tables."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from memstore import jsjson
from memstore.blocks import block_class
from memstore.graph import SessionGraph
from memstore.render._common import turn_preview
from memstore.types import SessionNode

__all__ = ["data_table", "format_time", "render_transcript", "render_tree", "short_ids"]

PREVIEW = 70
TEXT_MIN_WIDTH = 12  # what a text column keeps, at least, beside whole copyable columns


def format_time(epoch_ms: int) -> str:
    """An epoch-millisecond time as UTC, to the second."""
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _one_line(node: SessionNode) -> str:
    return escape(turn_preview(node, PREVIEW))


SHORT_ID = 8
"""Characters of a node id shown at least; more where another id of the session shares them."""


def short_ids(ids: Sequence[str], minimum: int = SHORT_ID) -> dict[str, str]:
    """Each id's shortest prefix (of at least `minimum` characters) that no other id starts
    with, as git shortens hashes; an id that starts another is shown whole (it resolves as
    itself). `show --leaf` resolves any of these to the id it came from."""
    ordered = sorted(set(ids))
    shared = [0] * len(ordered)
    for index in range(1, len(ordered)):
        common = _common_prefix(ordered[index - 1], ordered[index])
        shared[index - 1] = max(shared[index - 1], common)
        shared[index] = common
    return {
        node_id: node_id[: max(minimum, common + 1)]
        for node_id, common in zip(ordered, shared, strict=True)
    }


def _common_prefix(first: str, second: str) -> int:
    """How many leading characters two strings share."""
    length = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        length += 1
    return length


def _label(node: SessionNode, head: str | None, short: str) -> str:
    # The marker comes before the preview, which a narrow terminal cuts.
    marker = " [bold yellow]◀ head[/bold yellow]" if node.id == head else ""
    return f"[dim]{escape(short)}[/dim]{marker} [b]{node.turn.role}[/b]: {_one_line(node)}"


def render_tree(graph: SessionGraph) -> Tree:
    """The session DAG as a Rich tree, the head marked.

    A run of turns without a fork is one entry, a line per turn, without a connector of its
    own; a fork hangs its branches under the run's last turn, each with its connector
    (`├──`, `└──`). So a continuation and a branch never look alike, and a deep session stays
    narrow.
    """
    children: dict[str | None, list[SessionNode]] = {}
    for node in graph.all():
        children.setdefault(node.parent, []).append(node)
    short = short_ids([node.id for node in graph.all()])
    tree = Tree(f"[bold]{escape(graph.session_id)}[/bold]")
    pending = [(tree, root) for root in reversed(children.get(None, []))]
    while pending:
        container, first = pending.pop()
        run = [first]
        while len(kids := children.get(run[-1].id, [])) == 1:
            run.append(kids[0])
        lines = "\n".join(_label(node, graph.leaf, short[node.id]) for node in run)
        label = Text.from_markup(lines, overflow="ellipsis")
        label.no_wrap = True  # a turn is one line: a wrapped one would look like another turn
        item = container.add(label)
        pending.extend((item, kid) for kid in reversed(kids))
    return tree


SHOWN_BLOCKS = 1000
"""Blocks of one turn that `show` prints, at most; a marker says how many more there are."""
SHOWN_CHARS = 20_000
"""Characters of one block's text (or JSON) that `show` prints, at most; a marker says how
many more there are. `show` is a terminal view: `export` writes every block whole."""


def _cut(text: str) -> str:
    """`text`, or its first SHOWN_CHARS characters and a line saying how many more it has."""
    if len(text) <= SHOWN_CHARS:
        return text
    rest = len(text) - SHOWN_CHARS
    return f"{text[:SHOWN_CHARS]}\n… {rest:,} more characters (export the session to read all)"


def _block(block: dict[str, Any]) -> RenderableType:
    view = block_class(block.get("kind")).view(block)
    if view.form == "prose":
        return Text(_cut(view.text))
    if view.form == "aside":
        return Text(_cut(view.text), style="dim italic")
    if view.form == "picture":
        size = len(view.data_base64)
        return Text(f"[image {view.media_type}, {size} base64 characters]", style="magenta")
    if view.form == "note":
        return Text(f"[{_cut(view.text)}]", style="yellow")
    title = " ".join(part for part in (view.label, view.name) if part)
    if view.call_id is not None:
        title += f" [{view.call_id}]"
    style = "red" if view.failed is True else "green" if view.answers_call else "cyan"
    body = Syntax(_cut(jsjson.dumps(view.value)), "json", word_wrap=True)
    return Panel(body, title=escape(title), style=style if view.call_id else "yellow")


def render_transcript(nodes: list[SessionNode]) -> RenderableType:
    """One path's turns, each with its role, time and blocks: at most SHOWN_BLOCKS blocks of
    a turn and SHOWN_CHARS characters of a block, so that any stored turn shows in seconds."""
    parts: list[RenderableType] = []
    for node in nodes:
        heading = Text(
            f"{node.turn.role} · {format_time(node.created_at)} · {node.id[:12]}", style="bold"
        )
        parts.append(heading)
        blocks = node.turn.blocks
        parts.extend(_block(block.model_dump()) for block in blocks[:SHOWN_BLOCKS])
        if len(blocks) > SHOWN_BLOCKS:
            more = len(blocks) - SHOWN_BLOCKS
            note = f"… {more:,} more blocks (export the session to read all)"
            parts.append(Text(note, style="dim"))
        parts.append(Text(""))
    return Group(*parts)


def data_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    copyable: Sequence[bool],
    width: int,
    title: str | None = None,
    spare: Sequence[str] = (),
    one_line: Sequence[str] = (),
) -> Table:
    """A table that never cuts a copyable cell (an id, a number, a time) with an ellipsis.

    Copyable columns are shown whole when they fit `width` beside a narrow share for each text
    column (text columns wrap). When they do not, the `spare` columns are left out, in the order
    given, until they do; when even that is not enough, every column folds onto more lines.
    The `one_line` columns (a title) keep one line, cut with an ellipsis: a long one does not
    make its row tall.
    """
    columns = list(range(len(headers)))
    widths = [
        max([cell_len(header), *(cell_len(row[index]) for row in rows)])
        for index, header in enumerate(headers)
    ]
    left_out = iter([headers.index(name) for name in spare])
    while not (whole := _fits(columns, widths, copyable, width)):
        dropped = next(left_out, None)
        if dropped is None:
            columns = list(range(len(headers)))
            break
        columns.remove(dropped)
    headers = [headers[index] for index in columns]
    widths = [widths[index] for index in columns]
    copyable = [copyable[index] for index in columns]
    cut = [header in one_line for header in headers]
    rows = [[row[index] for index in columns] for row in rows]
    table = Table(title=title, show_edge=False, pad_edge=False)
    for header, size, copy in zip(headers, widths, copyable, strict=True):
        if copy and whole:
            table.add_column(header, no_wrap=True, min_width=size)
        elif whole:
            table.add_column(header, overflow="fold", min_width=min(size, TEXT_MIN_WIDTH))
        else:
            table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(text, single) for text, single in zip(row, cut, strict=True)))
    return table


def _cell(text: str, one_line: bool) -> Text:
    """A table cell: on one line cut with an ellipsis, or wrapping as its column says."""
    if one_line:
        return Text(text.replace("\n", " "), no_wrap=True, overflow="ellipsis")
    return Text(text)


def _fits(
    columns: Sequence[int], widths: Sequence[int], copyable: Sequence[bool], width: int
) -> bool:
    """Whether `columns` fit `width`: copyable cells whole, the others at a narrow share."""
    frame = 3 * (len(columns) - 1)  # " │ " between columns; no outer edges to spend width on
    needed = sum(widths[i] if copyable[i] else min(widths[i], TEXT_MIN_WIDTH) for i in columns)
    return frame + needed <= width
