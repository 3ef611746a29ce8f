"""How the command line draws sessions in a terminal (Rich): trees, transcripts, tables."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.panel import Panel
from rich.rule import Rule
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from memstore import jsjson
from memstore.blocks import block_class
from memstore.graph import SessionGraph, short_id
from memstore.render._common import turn_preview
from memstore.types import SessionNode

__all__ = ["data_table", "format_time", "render_transcript", "render_tree"]

PREVIEW = 70
TEXT_MIN_WIDTH = 12  # what a text column keeps, at least, beside whole copyable columns


def format_time(epoch_ms: int) -> str:
    """An epoch-millisecond time as UTC, to the second."""
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _one_line(node: SessionNode) -> str:
    return escape(turn_preview(node, PREVIEW))


def _label(node: SessionNode, head: str | None, short: str) -> str:
    # The marker comes before the preview, which a narrow terminal cuts.
    marker = " [bold yellow]◀ head[/bold yellow]" if node.id == head else ""
    return f"[dim]{escape(short)}[/dim]{marker} [b]{node.turn.role}[/b]: {_one_line(node)}"


FOLD_KEEP = 3
"""Turns `tree` shows at each end of a run without a fork; the ones between fold into one line."""


def render_tree(graph: SessionGraph, *, depth: int | None = None, fold: bool = True) -> Tree:
    """The session DAG as a Rich tree, the head marked.

    A run of turns without a fork is one entry, a line per turn, without a connector of its
    own; a fork hangs its branches under the run's last turn, each with its connector
    (`├──`, `└──`). So a continuation and a branch never look alike, and a deep session stays
    narrow. With `fold`, a long run shows its first and last FOLD_KEEP turns (and the head)
    and one line counting the turns between. With `depth`, branches more than `depth` forks
    below a root are not drawn: their fork says how many branches and turns it holds.
    """
    children: dict[str | None, list[SessionNode]] = {}
    for node in graph.all():
        children.setdefault(node.parent, []).append(node)
    tree = Tree(f"[bold]{escape(graph.session_id)}[/bold]")
    pending = [(tree, root, 0) for root in reversed(children.get(None, []))]
    entries: list[tuple[Tree, list[SessionNode | int]]] = []
    while pending:
        container, first, level = pending.pop()
        run = [first]
        while len(kids := children.get(run[-1].id, [])) == 1:
            run.append(kids[0])
        lines: list[SessionNode | int] = _folded(run, graph.leaf) if fold else [*run]
        item = container.add("")
        entries.append((item, lines))
        if depth is not None and level >= depth and kids:
            item.add(_hidden_branches(kids, children, graph.leaf))
            continue
        pending.extend((item, kid, level + 1) for kid in reversed(kids))
    ordered = sorted(node.id for node in graph.all())
    for item, lines in entries:
        label = Text.from_markup(
            "\n".join(
                f"[dim]… {line:,} turns …[/dim]"
                if isinstance(line, int)
                else _label(line, graph.leaf, _short(line.id, ordered))
                for line in lines
            ),
            overflow="ellipsis",
        )
        label.no_wrap = True  # a turn is one line: a wrapped one would look like another turn
        item.label = label
    return tree


def _short(node_id: str, ordered: list[str]) -> str:
    """A node id's short form among the session's `ordered` ids (see `short_ids`), found
    without shortening every id of the session."""
    at = bisect_left(ordered, node_id)
    before = ordered[at - 1] if at else None
    after = ordered[at + 1] if at + 1 < len(ordered) else None
    return short_id(node_id, before, after)


def _folded(run: list[SessionNode], head: str | None) -> list[SessionNode | int]:
    """The turns of a run to draw, each gap of two or more turns between them as its size."""
    keep = {*range(FOLD_KEEP), *range(len(run) - FOLD_KEEP, len(run))}
    keep.update(index for index, node in enumerate(run) if node.id == head)
    lines: list[SessionNode | int] = []
    gap: list[SessionNode] = []
    for index, node in enumerate(run):
        if index not in keep:
            gap.append(node)
            continue
        lines.extend(gap if len(gap) < 2 else [len(gap)])
        gap = []
        lines.append(node)
    return lines


def _hidden_branches(
    kids: list[SessionNode], children: dict[str | None, list[SessionNode]], head: str | None
) -> Text:
    """The line standing for the branches below a fork that `depth` leaves out."""
    turns, holds_head = 0, False
    stack = list(kids)
    while stack:
        node = stack.pop()
        turns += 1
        holds_head = holds_head or node.id == head
        stack.extend(children.get(node.id, []))
    where = ", the head among them" if holds_head else ""
    line = f"… {len(kids)} branches, {turns:,} turns below{where} (raise --depth)"
    return Text(line, style="dim")


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
    body: RenderableType
    if view.verbatim:  # a tool's output as text: its lines, not a JSON string of them
        body = Text(_cut(view.value))
    else:
        body = Syntax(_cut(jsjson.dumps(view.value)), "json", word_wrap=True)
    return Panel(body, title=escape(title), style=style if view.call_id else "yellow")


def render_transcript(
    nodes: list[SessionNode], short: Mapping[str, str] | None = None
) -> RenderableType:
    """One path's turns, each with its role, time, id and blocks: at most SHOWN_BLOCKS blocks
    of a turn and SHOWN_CHARS characters of a block, so that any stored turn shows in seconds.
    An id is shown as `short` has it (unique in the session: `show --leaf` takes it back), or
    whole."""
    short = short or {}
    parts: list[RenderableType] = []
    for node in nodes:
        heading = Text(
            f"{node.turn.role} · {format_time(node.created_at)} · {short.get(node.id, node.id)}",
            style="bold",
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


Narrow = Literal["records", "entries"]
"""How `data_table` lays rows out when its columns do not fit: `records`, a block per row of
"header  value" lines (as psql's expanded display); `entries`, a line of the copyable values
and under it the text, indented, at the terminal's whole width (search hits)."""


def data_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    copyable: Sequence[bool],
    width: int,
    title: str | None = None,
    spare: Sequence[str] = (),
    one_line: Sequence[str] = (),
    readable: Mapping[str, int] | None = None,
    narrow: Narrow = "records",
) -> RenderableType:
    """A table that never cuts a copyable cell (an id, a number, a time) with an ellipsis,
    nor a header in the middle of a word.

    Copyable columns are shown whole when they fit `width` beside a share for each text
    column (text columns wrap): TEXT_MIN_WIDTH characters, or what `readable` asks for the
    column, and never less than its header. When they do not, the `spare` columns are left out,
    in the order given, until they do; when even that is not enough, the rows are laid out
    one below the other as `narrow` says. The `one_line` columns (a title) keep one line, cut
    with an ellipsis: a long one does not make its row tall.
    """
    least = [
        cell_len(header) if copy else max(cell_len(header), (readable or {}).get(header, 0))
        for header, copy in zip(headers, copyable, strict=True)
    ]
    widths = [
        max([least[index], *(cell_len(row[index]) for row in rows)])
        for index in range(len(headers))
    ]
    columns = list(range(len(headers)))
    left_out = iter([headers.index(name) for name in spare])
    while not _fits(columns, widths, least, copyable, width):
        dropped = next(left_out, None)
        if dropped is None:
            if narrow == "entries":
                return _entries(headers, rows, copyable, title)
            return _records(headers, rows, one_line, title)
        columns.remove(dropped)
    table = Table(title=title, show_edge=False, pad_edge=False)
    for index in columns:
        if copyable[index]:
            table.add_column(headers[index], no_wrap=True, min_width=widths[index])
        else:
            text_width = min(widths[index], max(least[index], TEXT_MIN_WIDTH))
            table.add_column(headers[index], overflow="fold", min_width=text_width)
    for row in rows:
        table.add_row(*(_cell(row[index], headers[index] in one_line) for index in columns))
    return table


def _records(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    one_line: Sequence[str],
    title: str | None,
) -> RenderableType:
    """Each row as a numbered block of lines, a header and its value on each: every header
    whole however many columns a query has."""
    parts: list[RenderableType] = [Text(title, style="italic")] if title else []
    for number, row in enumerate(rows, 1):
        parts.append(Rule(f"row {number}", align="left", style="dim"))
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
        for header, value in zip(headers, row, strict=True):
            grid.add_row(header, _cell(value, header in one_line))
        parts.append(grid)
    return Group(*parts)


def _entries(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    copyable: Sequence[bool],
    title: str | None,
) -> RenderableType:
    """Each row as its copyable values on one line, then each text value under them,
    indented, with the terminal's whole width to wrap in."""
    parts: list[RenderableType] = [Text(title, style="italic")] if title else []
    for row in rows:
        values = [value for value, copy in zip(row, copyable, strict=True) if copy and value]
        parts.append(Text("  ".join(values), style="bold"))
        for value, copy in zip(row, copyable, strict=True):
            if not copy:
                parts.append(Padding(Text(value), (0, 0, 0, 2)))
        parts.append(Text(""))
    return Group(*parts)


def _cell(text: str, one_line: bool) -> Text:
    """A table cell: on one line cut with an ellipsis, or wrapping as its column says."""
    if one_line:
        return Text(text.replace("\n", " "), no_wrap=True, overflow="ellipsis")
    return Text(text)


def _fits(
    columns: Sequence[int],
    widths: Sequence[int],
    least: Sequence[int],
    copyable: Sequence[bool],
    width: int,
) -> bool:
    """Whether `columns` fit `width`: copyable cells and every header whole, each text column
    at its share (see `data_table`)."""
    frame = 3 * (len(columns) - 1)  # " │ " between columns; no outer edges to spend width on
    needed = sum(
        widths[i] if copyable[i] else min(widths[i], max(least[i], TEXT_MIN_WIDTH)) for i in columns
    )
    return frame + needed <= width
