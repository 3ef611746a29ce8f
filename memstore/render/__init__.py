"""Readable transcripts of a session: one branch as Markdown, the whole tree as one HTML page.

`render_markdown` writes the path from the root to one leaf (the head by default);
`render_html` writes a self-contained page (inline CSS and script, no network) that shows every
branch and lets the reader pick one.
"""

from memstore.render._html import render_html
from memstore.render._markdown import render_markdown

__all__ = ["render_html", "render_markdown"]
