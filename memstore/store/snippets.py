"""Snippets made in Python: the part of a turn's search text around the first word found, each
found word in [brackets], as SQLite's own snippets are (PostgreSQL's, and SQLite's for
unspaced words, long turns and the backlog)."""

from __future__ import annotations

import re

from memstore.store.folding import fold, fold_in_place

__all__ = ["SNIPPET_CHARS", "SNIPPET_CLOSE", "SNIPPET_OPEN", "text_snippet"]

SNIPPET_OPEN, SNIPPET_CLOSE = "[", "]"
SNIPPET_CHARS = 64  # a snippet's length when made here


def text_snippet(text: str, terms: list[str]) -> str:
    """The part of `text` around the first of `terms` found, each term in it bracketed, as the
    databases' own snippets are; case and accents aside, as search finds them."""
    folded_terms = sorted({fold(term) for term in terms} - {""}, key=len, reverse=True)
    pattern = re.compile("|".join(map(re.escape, folded_terms)) or "(?!)", re.I)
    folded = fold_in_place(text)  # the same length: a match is at the same place in `text`
    first = pattern.search(folded)
    start = 0 if first is None else max(0, first.start() - SNIPPET_CHARS // 3)
    end = min(len(text), max(start + SNIPPET_CHARS, first.end() if first else 0))
    marked, shown = [], start
    for match in pattern.finditer(folded, start, end):
        found = text[match.start() : match.end()]
        marked += [text[shown : match.start()], SNIPPET_OPEN, found, SNIPPET_CLOSE]
        shown = match.end()
    marked.append(text[shown:end])
    return ("…" if start else "") + "".join(marked) + ("…" if end < len(text) else "")
