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

from memstore.blocks import Block, BlockView
from memstore.render._common import (
    describe_size,
    image_bytes,
    one_line,
    pretty_json,
    value_preview,
)
from memstore.types import Turn

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


_PLAIN = re.compile(r"[^\W\d_][^\x00-\x1f!#$%&*+<=>@\[\\\]^_`{|}~\x7f]*")
"""A line the fast path may copy: a letter first, then letters, digits, spaces and the
punctuation that means nothing to CommonMark at the start or inside a line."""


def _plain_paragraphs(source: str) -> str | None:
    """CommonMark's HTML of `source` when it is plain paragraphs (lines matching `_PLAIN` without
    trailing spaces, blank lines between paragraphs), else None: what markdown-it would write,
    without its cost per turn, for the plain prose most turns hold."""
    paragraphs: list[str] = []
    lines: list[str] = []
    for line in source.split("\n"):
        if not line:
            if lines:
                paragraphs.append("\n".join(lines))
                lines = []
            continue
        if line[-1].isspace() or _PLAIN.fullmatch(line) is None:
            return None
        lines.append(line)
    if lines:
        paragraphs.append("\n".join(lines))
    return "".join(f"<p>{paragraph.replace(chr(34), '&quot;')}</p>\n" for paragraph in paragraphs)


def markdown_html(source: str) -> str:
    """A text block's Markdown as HTML, raw HTML in it shown as text, control characters as
    symbols."""
    plain = _plain_paragraphs(source)
    if plain is not None:
        return plain
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
    view = type(block).view(block.model_dump())
    if view.form == "prose":
        return f'<div class="text md">{markdown_html(view.text)}</div>'
    if view.form == "aside":
        preview = f'<span class="pv">{text(one_line(view.text))}</span>'
        return _folded(view.label, view.label, preview, _pre(view.text, "text"))
    if view.form == "picture":
        return _image(view)
    if view.form == "note":
        return f'<p class="note">[{text(view.text)}]</p>'
    return _record(view, tool_name)


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
    try:
        parts = [_pre(pretty_json(_without_texts(value, "", texts)), "json")]
    except RecursionError:  # nested deeper than a walk can go: shown whole, on one line
        return _pre(pretty_json(value), "json")
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


def _record(view: BlockView, tool_name: ToolNamer) -> str:
    """A labelled value folded: its name, status and a preview; inside, the call id and value."""
    name = view.name
    if view.answers_call and view.call_id is not None:
        name = tool_name(view.call_id) or "?"
    summary = f' <code class="name">{text(name)}</code>' if name is not None else ""
    summary += f'{_STATUS[view.failed]} <span class="pv">{text(value_preview(view.value))}</span>'
    note = ""
    if view.call_id is not None:
        note = _call_id("result of call" if view.answers_call else "call id", view.call_id)
    words = [*view.label.split(), "result" * view.answers_call, "err" * (view.failed is True)]
    css = " ".join(dict.fromkeys(word for word in words if word))
    body = _pre(view.value, "out") if view.verbatim else _value_body(view.value)
    return _folded(css, view.label, summary, body, note=note)


def _image(view: BlockView) -> str:
    size = image_bytes(view.data_base64)
    caption = f"{view.media_type} image, {describe_size(size, view.data_base64)}"
    if size is None or size > MAX_INLINE_IMAGE_BYTES or view.media_type not in INLINE_IMAGE_TYPES:
        return f'<p class="note">[{text(caption)}, not shown]</p>'
    source = f"data:{view.media_type};base64,{view.data_base64}"  # both checked: nothing to escape
    return (
        f'<figure class="image"><img alt="{attr(caption)}" src="{source}">'
        f"<figcaption>{text(caption)}</figcaption></figure>"
    )
