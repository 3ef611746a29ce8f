"""Full-text search over turns: SQLite FTS5, PostgreSQL tsvector with a GIN index.

Every node carries `search_text` (its text, thinking, tool names, tool inputs and outputs), set
when it is stored and indexed in the same transaction (SQLite: the store fills an FTS5 table,
which triggers keep on delete and update; PostgreSQL: an expression GIN index), so search is
current after every append and import.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, func, literal_column, select, text

from memstore.errors import InvalidArgumentError, InvalidSessionIdError
from memstore.store.plans import NATIVE_AGENT, Plan, agent_of
from memstore.store.rows import storable
from memstore.store.tables import nodes, nodes_fts, sessions
from memstore.types import is_storable_text

__all__ = ["SearchHit", "fts5_query", "search"]

TS_CONFIG = "simple"  # no stemming, like FTS5's unicode61: the same matches on both backends
SNIPPET_OPEN, SNIPPET_CLOSE = "[", "]"


@dataclass(frozen=True)
class SearchHit:
    """One matching turn; `rank` is higher for better matches (comparable within one query)."""

    session_id: str
    node_id: str
    role: str
    created_at: int
    snippet: str
    rank: float
    agent: str = NATIVE_AGENT
    """Which agent wrote the session: `memstore`, or `pi` / `claude-code` for imported files."""


def fts5_query(query: str) -> str:
    """A user's words as an FTS5 query that means "all of these words", whatever they contain
    (quotes, operators, SQL): each word becomes a quoted FTS5 string."""
    words = query.split()
    return " ".join('"' + word.replace('"', '""') + '"' for word in words)


def _sqlite_search(query: str) -> Select[Any]:
    match = literal_column("nodes_fts").op("MATCH")(fts5_query(query))
    snippet = func.snippet(literal_column("nodes_fts"), 0, SNIPPET_OPEN, SNIPPET_CLOSE, "…", 12)
    rank = -func.bm25(literal_column("nodes_fts"))
    return (
        select(
            nodes.c.session_id,
            nodes.c.id.label("node_id"),
            nodes.c.role,
            nodes.c.created_at,
            snippet.label("snippet"),
            rank.label("rank"),
        )
        .select_from(nodes_fts.join(nodes, nodes.c.pk == nodes_fts.c.rowid))
        .where(match)
    )


def _postgres_search(query: str) -> Select[Any]:
    tsquery = func.websearch_to_tsquery(TS_CONFIG, query)
    vector = func.to_tsvector(TS_CONFIG, nodes.c.search_text)
    options = f"StartSel={SNIPPET_OPEN}, StopSel={SNIPPET_CLOSE}, MaxWords=20, MinWords=6"
    snippet = func.ts_headline(TS_CONFIG, nodes.c.search_text, tsquery, options)
    return select(
        nodes.c.session_id,
        nodes.c.id.label("node_id"),
        nodes.c.role,
        nodes.c.created_at,
        snippet.label("snippet"),
        func.ts_rank(vector, tsquery).label("rank"),
    ).where(vector.op("@@")(tsquery))


def search(
    dialect: str, query: str, *, session_id: str | None = None, limit: int = 20
) -> Plan[list[SearchHit]]:
    """The best `limit` turns matching every word of `query`, best first."""
    if not isinstance(query, str):
        raise InvalidArgumentError(f"a search query is text, not {type(query).__name__}")
    if type(limit) is not int or limit <= 0:
        raise InvalidArgumentError(f"search limit must be a positive whole number, got {limit!r}")
    if session_id is not None and not isinstance(session_id, str):
        raise InvalidSessionIdError(f"a session id is a string, not {type(session_id).__name__}")
    if session_id is not None and not is_storable_text(session_id):
        return []  # NUL or a lone surrogate: no stored session can have this id
    query = storable(query)  # the database could not take NUL or lone surrogates
    if not query.split():
        return []
    statement = _postgres_search(query) if dialect == "postgresql" else _sqlite_search(query)
    if session_id is not None:
        statement = statement.where(nodes.c.session_id == session_id)
    statement = statement.order_by(text("rank DESC"), nodes.c.pk).limit(limit)
    hits = [SearchHit(**row._mapping) for row in (yield statement)]
    return (yield from _with_agents(hits))


def _with_agents(hits: list[SearchHit]) -> Plan[list[SearchHit]]:
    """The hits, each naming the agent its session came from."""
    if not hits:
        return hits
    ids = sorted({hit.session_id for hit in hits})
    rows = yield select(sessions.c.id, sessions.c.meta).where(sessions.c.id.in_(ids))
    agents = {row.id: agent_of(row.meta) for row in rows}
    return [dataclasses.replace(hit, agent=agents[hit.session_id]) for hit in hits]
