"""Full-text search over turns: SQLite FTS5, PostgreSQL tsvector with a GIN index.

Every node has a search text (its text, thinking, tool names, tool inputs and outputs), and a
search finds every committed node. SQLite derives the text from `turn_json` in the `node_search`
view, over which the FTS5 table is external-content (the store fills it, triggers keep it on
delete and update); a write of a few nodes lists them in `nodes_fts_backlog` instead, which the
write that fills it indexes at once (`plans.SEARCH_BACKLOG`), a store that can write indexes
before it searches, and a read-only one matches in memory, with FTS5 itself. PostgreSQL stores
the text's tsvector in `nodes.search_vector` (folded in Python as it is written,
`tables.SearchVector`), under a GIN index, current with every write, and derives the text itself
from `turn_json` where it is read (`memstore_search_text`, migration 0036: the snippets); the
search matches and ranks the stored vectors, folding nothing per row, in the function
`memstore_search_keys` (migration 0036, after 0034's), which keeps the tenant's matches before it
ranks them and, handed to a role that row-level security does not bind (`search_role`), reads
the index for every login.

A query word holding characters of a script written without spaces (Chinese, Japanese, Thai, ...)
is searched for inside words instead: `search_chars` makes each such character a word of its
own, and the query word becomes a phrase of them, found with a second index of the same kind.

PostgreSQL cannot build a tsvector of more than 1 MiB, so its vectors hold the first
`PG_INDEXED_CHARS` characters of each column (at most 4 bytes each: it always fits). A turn whose
search text (or `search_chars`) is longer is still found by the rest of its text: when every word
of the query appears in its search text, ignoring case, as a substring (a partial index lists
these turns, so the check reads only them). SQLite's FTS5 has no such limit and indexes it all.

Both read words of letters and digits, case and accents aside (`memstore.store.folding`): FTS5
does so itself; PostgreSQL's vectors hold text folded in Python as `memstore_search_fold` folds
(accents off, punctuation as spaces, so that its parser sees FTS5's words), its queries too.
PostgreSQL's snippets are made here (`text_snippet`, which ignores accents too): `ts_headline`
would not see `naive` in `naïve`.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    ColumnElement,
    Float,
    Integer,
    LargeBinary,
    Select,
    Text,
    bindparam,
    case,
    cast,
    column,
    func,
    literal,
    literal_column,
    select,
    text,
    union_all,
)

from memstore.errors import InvalidArgumentError, InvalidSessionIdError
from memstore.store.folding import fold, sql_fold
from memstore.store.plans import NATIVE_AGENT, Plan, agent_of
from memstore.store.policy import Backend
from memstore.store.rows import UNSPACED, derived_text, search_chars, storable
from memstore.store.snippets import SNIPPET_CLOSE, SNIPPET_OPEN, text_snippet
from memstore.store.tables import (
    PG_INDEXED_CHARS,
    TS_CONFIG,
    node_search,
    nodes,
    nodes_fts,
    nodes_fts_backlog,
    nodes_fts_chars,
    of_tenant,
    of_visible_session,
    sessions,
)
from memstore.store.time_limits import check_seconds, time_limited
from memstore.types import is_storable_text

__all__ = ["SearchHit", "fts5_query", "search", "text_snippet"]

_HAS_UNSPACED = re.compile(f"[{UNSPACED}]")
_TOKEN = re.compile(r"[^\W_]+")  # a run of letters and digits: a word of FTS5's unicode61
MAX_QUERY_WORDS = 64
"""The most different words a search query may hold (a repeated word counts once): the time a
search takes grows with the square of its words on both databases."""
_HIT_COLUMNS = (nodes.c.session_id, nodes.c.id.label("node_id"), nodes.c.role, nodes.c.created_at)


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


def query_words(query: str) -> list[str]:
    """The words of a query, each once (case aside), without those holding no letter or digit
    (which match nothing), in order.

    Raises:
        InvalidArgumentError: more than MAX_QUERY_WORDS different words.
    """
    words: dict[str, str] = {}
    for word in query.split():
        if _TOKEN.search(word):
            words.setdefault(word.casefold(), word)
    if len(words) > MAX_QUERY_WORDS:
        raise InvalidArgumentError(
            f"a search query holds at most {MAX_QUERY_WORDS} different words, this one "
            f"{len(words)}: search for fewer"
        )
    return list(words.values())


def _pg_words_query(words: list[str]) -> ColumnElement[Any]:
    """Words as a PostgreSQL tsquery that means "all of these words", whatever they hold (no
    operators): each word, folded, a phrase of its runs of letters and digits, as FTS5 reads it."""
    phrases = [
        func.phraseto_tsquery(TS_CONFIG, " ".join(_TOKEN.findall(fold(word)))) for word in words
    ]
    tsquery: ColumnElement[Any] = phrases[0]
    for phrase in phrases[1:]:
        tsquery = tsquery.op("&&")(phrase)
    return tsquery


def _split_query(query: str) -> tuple[list[str], list[str]]:
    """A query's words: those matched as whole words, and those holding characters of a script
    written without spaces, matched inside words as phrases of their characters."""
    words: list[str] = []
    unspaced: list[str] = []
    for word in query.split():
        (unspaced if _HAS_UNSPACED.search(word) else words).append(word)
    return words, unspaced


def _fts5_phrases(unspaced: list[str]) -> str:
    """Unspaced query words as an FTS5 query of phrases of their characters, all required."""
    return " ".join('"' + search_chars(word).replace('"', '""') + '"' for word in unspaced)


def _sqlite_phrase_matches(
    words: list[str], unspaced: list[str], backlog: Mapping[int, float] | None = None
) -> Select[Any]:
    """Turns matching the unspaced words' phrases and the other words. With `backlog` (the
    ranks of the backlog's turns that hold the other words, found in memory), those turns
    instead of the ones `nodes_fts` holds."""
    table: ColumnElement[Any] = literal_column("nodes_fts_chars")
    rank: ColumnElement[Any] = -func.bm25(table)
    statement = select(nodes.c.pk).select_from(
        nodes_fts_chars.join(nodes, nodes.c.pk == nodes_fts_chars.c.rowid)
    )
    statement = statement.where(table.op("MATCH")(_fts5_phrases(unspaced)))
    if backlog is not None:
        statement = statement.where(nodes.c.pk.in_(list(backlog)))
        rank = rank + case(dict(backlog), value=nodes.c.pk, else_=0.0)
    elif words:
        statement = statement.join(nodes_fts, nodes_fts.c.rowid == nodes.c.pk)
        statement = statement.where(
            literal_column("nodes_fts").op("MATCH")(fts5_query(" ".join(words)))
        )
        rank = rank - func.bm25(literal_column("nodes_fts"))
    return statement.add_columns(rank.label("rank"))


def _postgres_matches(
    words: list[str], unspaced: list[str], session_id: str | None, limit: int
) -> Any:
    """The best `limit` of the tenant's turns matching the query, as (pk, rank) rows of
    `memstore_search_keys` (migration 0036): the tenant filtered before ranking, and the
    full-text indexes read even for a login that row-level security binds, once an operator
    has handed the function to a role that the policies do not bind."""
    chars: ColumnElement[Any] = literal_column("NULL::tsquery")
    if unspaced:
        phrases = [func.phraseto_tsquery(TS_CONFIG, fold(search_chars(word))) for word in unspaced]
        chars = phrases[0]
        for phrase in phrases[1:]:
            chars = chars.op("&&")(phrase)
    word_query = _pg_words_query(words) if words else literal_column("NULL::tsquery")
    folded = [sql_fold(word) for word in words + unspaced]
    oversized = bindparam("oversized", folded, type_=ARRAY(Text))
    found = func.memstore_search_keys(
        word_query,
        chars,
        oversized,
        literal(session_id, Text),
        literal(limit, Integer),
    )
    return found.table_valued(column("pk", BigInteger), column("rank", Float)).alias("best")


def _phrase_search(
    backend: Backend,
    words: list[str],
    unspaced: list[str],
    session_id: str | None,
    limit: int,
    backlog: Mapping[int, str] | None = None,
) -> Select[Any]:
    """The best matches of a query with unspaced words, with their search text (the snippet is
    made in Python: the indexes hold single characters, not the text around them)."""
    if not backend.writes_text_index:  # PostgreSQL's stored search vectors
        return _postgres_hits(words, unspaced, session_id, limit, derived_search_text())
    found = [_sqlite_phrase_matches(words, unspaced)]
    if words and backlog:  # the backlog's turns are not in `nodes_fts`: match them here
        ranks = _matches_in_memory(backlog, fts5_query(" ".join(words)))
        found.append(_sqlite_phrase_matches(words, unspaced, ranks))
    for index, statement in enumerate(found):
        if session_id is not None:
            statement = statement.where(nodes.c.session_id == session_id)
        found[index] = statement.where(of_visible_session(nodes.c.session_id))
    matches = found[0] if len(found) == 1 else union_all(*found).subquery().select()
    best = matches.order_by(text("rank DESC"), text("pk")).limit(limit).subquery()
    hits = select(*_HIT_COLUMNS, best.c.rank).join_from(nodes, best, nodes.c.pk == best.c.pk)
    # SQLite derives the search text from the turn (migration 0016)
    hits = hits.join(node_search, node_search.c.pk == nodes.c.pk)
    hits = hits.add_columns(cast(node_search.c.search_text, LargeBinary).label("search_text"))
    return hits.order_by(best.c.rank.desc(), nodes.c.pk)


def _text(value: str | bytes) -> str:
    """Text SQLite derived from a turn's JSON, read as bytes: a lone surrogate in the turn (which
    JSON escapes) reads as U+FFFD, as the stored copies of the text had it before migration 0016."""
    return derived_text(value) if isinstance(value, bytes) else value


SQLITE_SNIPPET_CHARS = 100_000
"""FTS5's snippet() takes time quadratic in a term's occurrences in one text (minutes for a
3.6 MB file listing): turns whose JSON is longer get their snippet made here (`text_snippet`)."""


def _sqlite_search(query: str) -> Select[Any]:
    match = literal_column("nodes_fts").op("MATCH")(fts5_query(query))
    made = func.snippet(literal_column("nodes_fts"), 0, SNIPPET_OPEN, SNIPPET_CLOSE, "…", 12)
    long_turn = func.length(nodes.c.turn_json) > SQLITE_SNIPPET_CHARS
    # decoded by `_text`: it may hold a lone surrogate
    snippet = case((long_turn, None), else_=cast(made, LargeBinary))
    rank = -func.bm25(literal_column("nodes_fts"))
    return (
        select(
            *_HIT_COLUMNS,
            snippet.label("snippet"),
            rank.label("rank"),
        )
        .select_from(nodes_fts.join(nodes, nodes.c.pk == nodes_fts.c.rowid))
        .where(match)
    )


def derived_search_text() -> ColumnElement[str]:
    """A node's search text on PostgreSQL, derived from its turn in SQL (migration 0036), as
    `rows.search_text` makes it."""
    return func.memstore_search_text(nodes.c.turn_json, type_=Text)


def _postgres_hits(
    words: list[str],
    unspaced: list[str],
    session_id: str | None,
    limit: int,
    shown: ColumnElement[Any],
) -> Select[Any]:
    """The best matches of a query on PostgreSQL, with the search text `shown` (all of it, or
    the part the index holds) for the snippet made in Python."""
    best = _postgres_matches(words, unspaced, session_id, limit)
    hits = select(*_HIT_COLUMNS, best.c.rank, shown.label("search_text"))
    hits = hits.join_from(nodes, best, nodes.c.pk == best.c.pk).where(of_tenant(nodes))
    return hits.order_by(best.c.rank.desc(), nodes.c.pk)


def search(
    backend: Backend,
    query: str,
    *,
    session_id: str | None = None,
    limit: int = 20,
    timeout: float | None = None,
) -> Plan[list[SearchHit]]:
    """The best `limit` turns matching every word of `query`, best first, each statement
    stopped after `timeout` seconds (None: no limit; see `time_limits`)."""
    seconds = check_seconds(timeout, "a search time limit")
    stopped = (
        f"the search ran longer than {seconds or 0:g} s and was stopped (a longer timeout "
        "allows more: memstore search --timeout SECONDS, or search(..., timeout=SECONDS))"
    )
    plan = _search(backend, query, session_id=session_id, limit=limit)
    return (yield from time_limited(plan, backend, seconds, stopped))


def _search(
    backend: Backend, query: str, *, session_id: str | None, limit: int
) -> Plan[list[SearchHit]]:
    if not isinstance(query, str):
        raise InvalidArgumentError(f"a search query is text, not {type(query).__name__}")
    if type(limit) is not int or limit <= 0:
        raise InvalidArgumentError(f"search limit must be a positive whole number, got {limit!r}")
    if session_id is not None and not isinstance(session_id, str):
        raise InvalidSessionIdError(f"a session id is a string, not {type(session_id).__name__}")
    if session_id is not None and not is_storable_text(session_id):
        return []  # NUL or a lone surrogate: no stored session can have this id
    query = " ".join(query_words(storable(query)))  # storable: no NUL or lone surrogates
    if not query:
        return []
    words, unspaced = _split_query(query)
    backlog = (yield from _backlog_texts()) if backend.search_backlog else {}
    for setting in backend.search_setup:
        yield text(setting)
    if unspaced or not backend.writes_text_index:
        if unspaced:
            rows = yield _phrase_search(backend, words, unspaced, session_id, limit, backlog)
        else:
            shown = func.left(derived_search_text(), literal_column(str(PG_INDEXED_CHARS)))
            rows = yield _postgres_hits(words, [], session_id, limit, shown)
        terms = words + unspaced
        found = [
            SearchHit(
                row.session_id,
                row.node_id,
                row.role,
                row.created_at,
                text_snippet(_text(row.search_text), terms),
                row.rank,
            )
            for row in rows
        ]
        return (yield from _with_agents(found))
    statement = _sqlite_search(query).where(of_visible_session(nodes.c.session_id))
    if session_id is not None:
        statement = statement.where(nodes.c.session_id == session_id)
    statement = statement.order_by(text("rank DESC"), nodes.c.pk).limit(limit)
    hits = [
        SearchHit(**{**row._mapping, "snippet": row.snippet and _text(row.snippet)})
        for row in (yield statement)
    ]
    hits = yield from _with_long_snippets(hits, query.split())
    if backlog:
        more = yield from _backlog_hits(backlog, query, session_id)
        hits = sorted([*hits, *more], key=lambda hit: -hit.rank)[:limit]
    return (yield from _with_agents(hits))


def _backlog_texts() -> Plan[dict[int, str]]:
    """The search texts of the tenant's turns in SQLite's full-text backlog (a store that can
    write indexes them before it searches; a read-only one finds them here), by key."""
    text = cast(node_search.c.search_text, LargeBinary)
    mine = of_tenant(node_search) & node_search.c.pk.in_(select(nodes_fts_backlog.c.pk))
    rows = yield select(node_search.c.pk, text).where(mine)  # ranked among the tenant's only
    return {pk: _text(found) for pk, found in rows}


def _matches_in_memory(texts: Mapping[int, str], query: str) -> dict[int, float]:
    """The keys of the `texts` that FTS5 `query` matches, with their rank (higher is better),
    found by SQLite's FTS5 itself in a private in-memory index (ranked among these texts)."""
    with closing(sqlite3.connect(":memory:")) as memory:
        memory.execute("CREATE VIRTUAL TABLE waiting USING fts5(search_text)")
        memory.executemany("INSERT INTO waiting (rowid, search_text) VALUES (?, ?)", texts.items())
        found = "SELECT rowid, -bm25(waiting) FROM waiting WHERE waiting MATCH ?"
        return dict(memory.execute(found, (query,)).fetchall())


def _backlog_hits(
    backlog: Mapping[int, str], query: str, session_id: str | None
) -> Plan[list[SearchHit]]:
    """The hits among the backlog's turns, which `nodes_fts` does not hold yet."""
    ranks = _matches_in_memory(backlog, fts5_query(query))
    if not ranks:
        return []
    statement = select(*_HIT_COLUMNS, nodes.c.pk).where(
        nodes.c.pk.in_(list(ranks)), of_visible_session(nodes.c.session_id)
    )
    if session_id is not None:
        statement = statement.where(nodes.c.session_id == session_id)
    terms = query.split()
    return [
        SearchHit(
            row.session_id,
            row.node_id,
            row.role,
            row.created_at,
            text_snippet(backlog[row.pk], terms),
            ranks[row.pk],
        )
        for row in (yield statement)
    ]


def _with_long_snippets(hits: list[SearchHit], terms: list[str]) -> Plan[list[SearchHit]]:
    """SQLite's hits, those without a snippet (long turns) given one made here."""
    done: list[SearchHit] = []
    for hit in hits:
        if hit.snippet is None:
            where = of_tenant(nodes) & (nodes.c.session_id == hit.session_id)
            where &= nodes.c.id == hit.node_id
            column = cast(node_search.c.search_text, LargeBinary)  # derived (migration 0016)
            lookup = select(column).join_from(nodes, node_search, node_search.c.pk == nodes.c.pk)
            (found,) = yield lookup.where(where)
            hit = dataclasses.replace(hit, snippet=text_snippet(_text(found[0]), terms))
        done.append(hit)
    return done


def _with_agents(hits: list[SearchHit]) -> Plan[list[SearchHit]]:
    """The hits, each naming the agent its session came from."""
    if not hits:
        return hits
    ids = sorted({hit.session_id for hit in hits})
    rows = yield select(sessions.c.id, sessions.c.meta).where(
        of_tenant(sessions), sessions.c.id.in_(ids)
    )
    agents = {row.id: agent_of(row.meta) for row in rows}
    return [dataclasses.replace(hit, agent=agents[hit.session_id]) for hit in hits]
