"""One branch of a session as a Markdown transcript."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from memstore.blocks import BlockView
from memstore.graph import SessionGraph
from memstore.render._common import (
    describe_size,
    image_bytes,
    iso_time,
    pretty_json,
    scrub,
)
from memstore.render._commonmark import (
    close_open_blocks,
    code_span,
    fenced,
    split_lines,
    stands_alone,
)
from memstore.types import Block, SessionNode

__all__ = ["render_markdown"]


def render_markdown(
    graph: SessionGraph, leaf: str | None = None, *, title: str | None = None
) -> str:
    """The transcript of one branch, from the root to `leaf` (default: the head), as Markdown.

    Text blocks are kept as Markdown (raw HTML and links in them pass through as written), unless
    they would run into what follows them (a fence or HTML block left open, inside a list or not):
    those are fenced as plain text, so every turn's heading stays a heading. Thinking is quoted;
    tool calls and results, and blocks of unknown kinds, are fenced code blocks; images are one
    line naming their type and size (their data is never written).

    Raises:
        UnknownNodeError: the session has no node `leaf`.
        BrokenLineageError: a parent link on the way to `leaf` leads nowhere.
    """
    leaf = graph.leaf if leaf is None else leaf
    path = graph.path_nodes(leaf) if leaf is not None else []
    sections = [_preamble(graph, path, title)]
    tool_names: dict[str, str] = {}
    for number, node in enumerate(path, start=1):
        sections.append(_turn(node, number, tool_names))
    return scrub("\n\n".join(sections) + "\n")


def _preamble(graph: SessionGraph, path: list[SessionNode], title: str | None) -> str:
    heading = " ".join((title or f"Session {graph.session_id}").split())
    lines = [f"# {heading}", "", f"- Session: {code_span(graph.session_id)}"]
    if not path:
        missing = "has no head: pass a leaf to render" if graph.size else "has no turns"
        return "\n".join([*lines, "", f"_This session {missing}._"])
    head = " (the head)" if path[-1].id == graph.leaf else " (not the head)"
    lines.append(f"- Branch: {len(path)} turns, ending at {code_span(path[-1].id)}{head}")
    lines.append(f"- From {iso_time(path[0].created_at)} to {iso_time(path[-1].created_at)}")
    return "\n".join(lines)


def _turn(node: SessionNode, number: int, tool_names: dict[str, str]) -> str:
    """One turn; if its texts together still run past its end, again with every text fenced."""
    turn = _turn_markdown(node, number, tool_names, literal=False)
    if stands_alone(turn):
        return turn
    return _turn_markdown(node, number, tool_names, literal=True)


def _turn_markdown(
    node: SessionNode, number: int, tool_names: dict[str, str], *, literal: bool
) -> str:
    heading = f"## {number} · {node.turn.role} · {iso_time(node.created_at)}"
    parts = [heading, *_blocks(node.turn.blocks, tool_names, literal)]
    if len(parts) == 1:
        parts.append("_(no content)_")
    return "\n\n".join(parts)


def _blocks(blocks: tuple[Block, ...], tool_names: dict[str, str], literal: bool) -> Iterator[str]:
    for block in blocks:
        view = type(block).view(block.model_dump())
        if view.form == "record" and view.call_id is not None and view.name is not None:
            tool_names[view.call_id] = view.name
        yield _block(view, tool_names, literal)


def _block(view: BlockView, tool_names: Mapping[str, str], literal: bool) -> str:
    if view.form == "prose":
        return _text(view.text, literal) if view.text.strip() else "_(empty text)_"
    if view.form == "aside":
        return _quote(f"**{view.label.capitalize()}**\n\n{_text(view.text, literal)}")
    if view.form == "picture":
        size = describe_size(image_bytes(view.data_base64), view.data_base64)
        return f"_Image:_ {code_span(view.media_type)}, {size} (not embedded)"
    if view.form == "note":
        note = _text(view.text, literal)
        return note if "\n" in note else f"_{note}_"
    return _record(view, tool_names)


def _text(text: str, literal: bool) -> str:
    """A text as Markdown, or fenced as plain text when it would run into what follows it."""
    if not literal:
        closed = close_open_blocks(text)
        if stands_alone(closed):
            return closed
    return fenced(text, "text")


def _record(view: BlockView, tool_names: Mapping[str, str]) -> str:
    """A labelled value: its label, name and call id, then the value fenced."""
    name = tool_names.get(view.call_id) if view.answers_call and view.call_id else view.name
    label = f"**{view.label.capitalize()}**"
    if name is not None:
        label += f" {code_span(name)}"
    if view.call_id is not None:
        label += f" · id {code_span(view.call_id)}"
    if view.verbatim:
        return f"{label}\n\n{fenced(view.value, 'text')}"
    return f"{label}\n\n{fenced(pretty_json(view.value), 'json')}"


def _quote(text: str) -> str:
    """`text` as a blockquote: every line, blank ones too, behind `>`."""
    return "\n".join(f"> {line}" if line.strip() else ">" for line in split_lines(text))
