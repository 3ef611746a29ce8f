"""The blocks of one turn as HTML: text as Markdown, tool calls, results and thinking folded.

Text blocks are rendered as CommonMark (with tables and strikethrough) by markdown-it-py with raw
HTML turned off: any HTML a turn holds is shown as text, never parsed as markup, and links to
`javascript:`, `data:` and the like stay text. Markdown images are not rendered (the page loads
nothing from the network). Everything else is escaped here with `html.escape`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from html import escape
from typing import TYPE_CHECKING, Any, TypeAlias

from memstore.render._common import (
    describe_size,
    image_bytes,
    one_line,
    pretty_json,
    value_preview,
)
from memstore.types import (
    Block,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    Turn,
    UnknownBlock,
)

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = ["INLINE_IMAGE_TYPES", "MAX_INLINE_IMAGE_BYTES", "blocks_html"]

INLINE_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Raster types shown inline; others (SVG above all) only as a placeholder."""
MAX_INLINE_IMAGE_BYTES = 512 * 1024
"""Larger images are described, not embedded, so a page stays a reasonable size."""
_STATUS: dict[bool | None, str] = {
    True: ' <span class="badge err">error</span>',
    False: ' <span class="badge ok">ok</span>',
    None: "",
}


ToolNamer: TypeAlias = Callable[[str], str | None]
"""Names the tool of a call id, or None when the call is not found."""


_CONTROL_PICTURES = {code: 0x2400 + code for code in range(0x20) if chr(code) not in "\t\n\r"}
_CONTROL_PICTURES[0x7F] = 0x2421
"""Control characters HTML does not allow in text, mapped to the symbols that picture them."""
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _picture_controls(value: str) -> str:
    return value.translate(_CONTROL_PICTURES) if _CONTROL.search(value) else value


def text(value: str) -> str:
    """`value` escaped for an element's content, control characters shown as symbols."""
    return _picture_controls(escape(value, quote=False))


def attr(value: str) -> str:
    """`value` escaped for a double-quoted attribute, control characters shown as symbols."""
    return _picture_controls(escape(value, quote=True))


@cache
def _markdown() -> MarkdownIt:
    """The Markdown parser of text blocks: CommonMark with tables and strikethrough, no raw HTML,
    no images; links open without telling the target where they came from."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    parser.disable("image")

    def link_open(self: Any, tokens: Any, index: int, options: Any, env: Any) -> str:
        tokens[index].attrSet("rel", "noopener noreferrer nofollow")
        return str(self.renderToken(tokens, index, options, env))

    parser.add_render_rule("link_open", link_open)
    return parser


def markdown_html(source: str) -> str:
    """A text block's Markdown as HTML, raw HTML in it shown as text, control characters as
    symbols."""
    return str(_markdown().render(_picture_controls(source)))


def blocks_html(turn: Turn, tool_name: ToolNamer) -> str:
    """Every block of `turn`, then its extra keys if any; `tool_name(call_id)` names a call."""
    parts = [_block(block, tool_name) for block in turn.blocks]
    if not parts:
        parts.append('<p class="note">(no content)</p>')
    if turn.model_extra:
        metadata = _pre(pretty_json(turn.model_extra), "json")
        parts.append(_folded("meta", "turn metadata", "", metadata))
    return "".join(parts)


def _block(block: Block, tool_name: ToolNamer) -> str:
    if isinstance(block, TextBlock):
        return f'<div class="text md">{markdown_html(block.text)}</div>'
    if isinstance(block, ThinkingBlock):
        preview = f'<span class="pv">{text(one_line(block.text))}</span>'
        return _folded("thinking", "thinking", preview, _pre(block.text, "text"))
    if isinstance(block, ToolCallBlock):
        return _tool_call(block)
    if isinstance(block, ToolResultBlock):
        return _tool_result(block, tool_name(block.call_id))
    if isinstance(block, ImageBlock):
        return _image(block)
    return _unknown(block)


def _folded(kind: str, tag: str, summary: str, body: str, *, note: str = "") -> str:
    """A `<details>`: a tag and a summary line; inside, `note` then `body` (HTML)."""
    return (
        f'<details class="{kind}"><summary><span class="tag">{tag}</span>{summary}</summary>'
        f"{note}{body}</details>"
    )


def _pre(body: str, css: str) -> str:
    """`body` as preformatted text."""
    lead = "\n" if body.startswith(("\n", "\r")) else ""  # a parser drops one newline after <pre>
    return f'<pre class="{css}">{lead}{text(body)}</pre>'


def _value_body(value: Any) -> str:
    """A tool input or output: a string as text; other JSON indented, with its multi-line
    strings taken out and shown as text under their paths, so output reads as printed."""
    if isinstance(value, str):
        return _pre(value, "out")
    texts: list[tuple[str, str]] = []
    parts = [_pre(pretty_json(_without_texts(value, "", texts)), "json")]
    for path, body in texts:
        parts.append(f'<p class="kv">{text(path)}</p>{_pre(body, "out")}')
    return "".join(parts)


def _without_texts(value: Any, path: str, texts: list[tuple[str, str]]) -> Any:
    """`value` with each multi-line string (kept in `texts`) replaced by a note of where it is."""
    if isinstance(value, str) and "\n" in value.rstrip("\n"):
        texts.append((path, value))
        return f"(text of {value.count(chr(10)) + 1} lines, shown below as {path})"
    if isinstance(value, dict):
        return {key: _without_texts(item, _join(path, key), texts) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_texts(item, f"{path}[{i}]", texts) for i, item in enumerate(value)]
    return value


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _call_id(label: str, call_id: str) -> str:
    return f'<p class="kv">{label} <code>{text(call_id)}</code></p>'


def _tool_call(block: ToolCallBlock) -> str:
    summary = (
        f' <code class="name">{text(block.name)}</code>'
        f' <span class="pv">{text(value_preview(block.input))}</span>'
    )
    note = _call_id("call id", block.id)
    return _folded("tool call", "tool call", summary, _value_body(block.input), note=note)


def _tool_result(block: ToolResultBlock, name: str | None) -> str:
    summary = (
        f' <code class="name">{text(name or "?")}</code>{_STATUS[block.is_error]}'
        f' <span class="pv">{text(value_preview(block.output))}</span>'
    )
    kind = "tool result err" if block.is_error else "tool result"
    note = _call_id("result of call", block.call_id)
    return _folded(kind, "result", summary, _value_body(block.output), note=note)


def _image(block: ImageBlock) -> str:
    size = image_bytes(block.data_base64)
    caption = f"{block.media_type} image, {describe_size(size, block.data_base64)}"
    if size is None or size > MAX_INLINE_IMAGE_BYTES or block.media_type not in INLINE_IMAGE_TYPES:
        return f'<p class="note">[{text(caption)}, not shown]</p>'
    source = (
        f"data:{block.media_type};base64,{block.data_base64}"  # both checked: nothing to escape
    )
    return (
        f'<figure class="image"><img alt="{attr(caption)}" src="{source}">'
        f"<figcaption>{text(caption)}</figcaption></figure>"
    )


def _unknown(block: UnknownBlock) -> str:
    summary = f' <code class="name">{text(repr(block.kind))}</code>'
    body = _pre(pretty_json(block.model_dump()), "json")
    return _folded("unknown", "unknown block", summary, body)
