"""The few CommonMark rules that keep one piece of text from swallowing the rest of a document.

A fenced code block or a raw HTML block (`<pre>`, `<script>`, `<!--`, ...) that a text opens and
never closes runs to the end of the document; `close_open_blocks` adds the missing closing line,
indented like the opening one so that a fence inside a list item is closed inside it. Lists and
quotes make a line-by-line reading unreliable, so `stands_alone` asks a CommonMark parser
(markdown-it-py) whether a heading written after the text is still a heading; the renderer fences
a text that fails. Code spans and fences are made longer than any backtick run inside them.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_FENCE = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)")
_HTML_BLOCKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r" {0,3}<(pre|script|style|textarea)(\s|>|$)", re.IGNORECASE), ""),
    (re.compile(r" {0,3}<!--"), "-->"),
    (re.compile(r" {0,3}<\?"), "?>"),
    (re.compile(r" {0,3}<![A-Za-z]"), ">"),
    (re.compile(r" {0,3}<!\[CDATA\["), "]]>"),
)
_BACKTICKS = re.compile(r"`+")


def split_lines(text: str) -> list[str]:
    """The lines of `text`, split at the line endings CommonMark knows (LF, CRLF, CR)."""
    return _LINE_BREAK.split(text)


def _fence_opening(line: str) -> str | None:
    """The closing line of the fence this line opens (its indent and run), or None."""
    match = _FENCE.match(line)
    if match is None:
        return None
    indent, run, info = match.groups()
    if run[0] == "`" and "`" in info:
        return None  # a backtick fence's info string may not hold a backtick
    return indent + run


def _closes_fence(line: str, opening: str) -> bool:
    match = _FENCE.match(line)
    if match is None:
        return False
    _, run, rest = match.groups()
    run_opened = opening.lstrip(" ")
    return run[0] == run_opened[0] and len(run) >= len(run_opened) and not rest.strip()


def _html_opening(line: str) -> str | None:
    """The text that ends the raw HTML block this line opens and leaves open, or None."""
    for pattern, end in _HTML_BLOCKS:
        match = pattern.match(line)
        if match is not None:
            end = end or f"</{match.group(1).lower()}>"
            return None if end in line[match.end() :].lower() else end
    return None


def close_open_blocks(text: str) -> str:
    """`text`, plus a closing line for a fence or raw HTML block it leaves open at its end."""
    fence: str | None = None
    html_end: str | None = None
    for line in split_lines(text):
        if fence is not None:
            fence = None if _closes_fence(line, fence) else fence
        elif html_end is not None:
            html_end = None if html_end in line.lower() else html_end
        else:
            fence = _fence_opening(line)
            html_end = None if fence is not None else _html_opening(line)
    closing = fence or html_end
    return text if closing is None else f"{text}\n{closing}"


_MAY_OPEN = re.compile(r"```|~~~|<")
"""What a text needs to hold to leave a block open that a heading after it cannot end."""
_SENTINEL = "memstore-sentinel-heading"


@cache
def _commonmark() -> MarkdownIt:
    """Plain CommonMark, raw HTML on: the Markdown export passes HTML through as written."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")


def stands_alone(markdown: str) -> bool:
    """Whether a top-level heading written after `markdown` (past a blank line) is a heading."""
    if _MAY_OPEN.search(markdown) is None:
        return True  # no fence or raw HTML block: the blank line and the heading end anything
    tokens = _commonmark().parse(f"{markdown}\n\n# {_SENTINEL}\n")
    if len(tokens) < 3:
        return False
    opening, inline, _ = tokens[-3:]
    return opening.type == "heading_open" and opening.level == 0 and inline.content == _SENTINEL


def longest_backtick_run(text: str) -> int:
    """The length of the longest run of backticks in `text` (0 when there is none)."""
    return max((len(run) for run in _BACKTICKS.findall(text)), default=0)


def code_span(text: str) -> str:
    """`text` on one line as an inline code span that no backtick inside can end."""
    line = " ".join(text.split()) or "(empty)"
    ticks = "`" * (longest_backtick_run(line) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{ticks}{pad}{line}{pad}{ticks}"


def fenced(body: str, info: str) -> str:
    """`body` as a fenced code block whose fence is longer than any backtick run inside it."""
    fence = "`" * max(3, longest_backtick_run(body) + 1)
    return f"{fence}{info}\n{body.rstrip(chr(10))}\n{fence}"
