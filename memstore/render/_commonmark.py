"""The few CommonMark rules that keep one piece of text from swallowing the rest of a document.

A fenced code block or a raw HTML block (`<pre>`, `<script>`, `<!--`, ...) that a text opens and
never closes runs to the end of the document; `close_open_blocks` adds the missing closing line.
Code spans and fences are made longer than any backtick run inside them.
"""

from __future__ import annotations

import re

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
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
    match = _FENCE.match(line)
    if match is None:
        return None
    run, info = match.groups()
    if run[0] == "`" and "`" in info:
        return None  # a backtick fence's info string may not hold a backtick
    return run


def _closes_fence(line: str, opening: str) -> bool:
    match = _FENCE.match(line)
    if match is None:
        return False
    run, rest = match.groups()
    return run[0] == opening[0] and len(run) >= len(opening) and not rest.strip()


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
