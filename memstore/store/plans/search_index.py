"""Writing SQLite's full-text index: new nodes' texts, and the backlog that batches them.

PostgreSQL needs none of this: its index is an expression index on `nodes`.

SQLite's full-text index is filled by the store, one statement per batch of new nodes, not by
an insert trigger: a trigger runs in a statement savepoint, where FTS5 flushes its pending
terms, so every node became a tiny index segment to merge (half of a bulk import's time). The
batch's texts come as one JSON array of [id, text] pairs, computed in Python as the rows were:
the same text the `node_search` view derives from `turn_json` (which the index's snippets and
delete triggers read), without deriving it in SQL again (three times as long as indexing it).

SQLite's full-text index costs a commit about 150 us whatever it adds (FTS5 writes a new
segment, its structure and averages records and the document's size: half of an append's
pages). Writes of fewer than `SEARCH_BACKLOG` nodes list them in `nodes_fts_backlog` (migration
0019) instead; the write that brings the backlog to `SEARCH_BACKLOG` nodes indexes them all, in
one segment. Searches index the backlog first (a read-only store searches it in memory).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import text

from memstore import jsjson
from memstore.store.plans.contract import Plan
from memstore.store.prepared import Prepared
from memstore.store.rows import search_text
from memstore.store.tables import TENANT_KEY

__all__ = ["LONG_TEXT", "SEARCH_BACKLOG", "backlog_waiting", "index_backlog", "index_new_nodes"]

SEARCH_BACKLOG = 256
"""Nodes the backlog holds before a write indexes them all."""
LONG_TEXT = 1 << 20
"""Characters from which a node's search text is indexed by itself, not in its batch's JSON."""

_INDEXED_TEXTS = """INSERT INTO {table} (rowid, {column})
SELECT n.pk, t.value ->> '$[1]' FROM json_each(:texts) AS t
CROSS JOIN nodes AS n ON n.tenant = :{tenant} AND n.session_id = :session_id
    AND n.id = t.value ->> '$[0]'"""
_INDEX_NODES = Prepared(
    text(_INDEXED_TEXTS.format(table="nodes_fts", column="search_text", tenant=TENANT_KEY))
)
# The index of characters of scripts without spaces holds only the nodes that have some.
_INDEX_CHARS = Prepared(
    text(_INDEXED_TEXTS.format(table="nodes_fts_chars", column="search_chars", tenant=TENANT_KEY))
)
# A long text is indexed by itself, bound as it is: through JSON, SQLite copied it about eight
# times (json_each's value, then `->>`), 260 MB for a 30 MB turn.
_INDEXED_TEXT = """INSERT INTO {table} (rowid, {column})
SELECT pk, :text FROM nodes WHERE tenant = :{tenant} AND session_id = :session_id AND id = :key"""
_INDEX_NODE = Prepared(
    text(_INDEXED_TEXT.format(table="nodes_fts", column="search_text", tenant=TENANT_KEY))
)
_INDEX_NODE_CHARS = Prepared(
    text(_INDEXED_TEXT.format(table="nodes_fts_chars", column="search_chars", tenant=TENANT_KEY))
)
# The backlog's size comes back with the insert: one statement (on an asyncio connection, each
# is a round trip to the driver's thread).
_INTO_BACKLOG = Prepared(
    text(
        f"INSERT INTO nodes_fts_backlog (pk) SELECT pk FROM nodes WHERE tenant = :{TENANT_KEY} "
        "AND session_id = :session_id "
        "AND id IN (SELECT value FROM json_each(:node_ids)) "
        "RETURNING (SELECT count(*) FROM nodes_fts_backlog)"
    )
)
_BACKLOG_SIZE = Prepared(text("SELECT count(*) FROM nodes_fts_backlog"))
_BACKLOG_TURNS = Prepared(
    text("SELECT pk, turn_json FROM nodes WHERE pk IN (SELECT pk FROM nodes_fts_backlog)")
)
_INDEX_KEYS = Prepared(
    text(
        "INSERT INTO nodes_fts (rowid, search_text) "
        "SELECT t.value ->> '$[0]', t.value ->> '$[1]' FROM json_each(:texts) AS t"
    )
)
_INDEX_KEY = Prepared(text("INSERT INTO nodes_fts (rowid, search_text) VALUES (:key, :text)"))
_EMPTY_BACKLOG = Prepared(text("DELETE FROM nodes_fts_backlog"))


def index_new_nodes(session_id: str, node_rows: Sequence[Mapping[str, Any]]) -> Plan[None]:
    """Index the text of one session's newly inserted `nodes` rows (SQLite only): a few go to
    the backlog, a batch of `SEARCH_BACKLOG` or more is indexed at once."""
    if len(node_rows) < SEARCH_BACKLOG:
        yield from _defer_indexing(session_id, [row["id"] for row in node_rows])
    else:
        texts = [(row["id"], row["search_text"]) for row in node_rows]
        yield from _index(texts, _INDEX_NODES, _INDEX_NODE, session_id=session_id)
    chars = [(row["id"], row["search_chars"]) for row in node_rows if row["search_chars"]]
    yield from _index(chars, _INDEX_CHARS, _INDEX_NODE_CHARS, session_id=session_id)


def _defer_indexing(session_id: str, node_ids: Sequence[str]) -> Plan[None]:
    """Put a few new nodes in the full-text index's backlog; the write that fills it to
    `SEARCH_BACKLOG` indexes the whole backlog at once."""
    listed = {"session_id": session_id, "node_ids": jsjson.dumps(list(node_ids))}
    waiting = max((size for (size,) in (yield _INTO_BACKLOG, listed)), default=0)
    if waiting >= SEARCH_BACKLOG:
        yield from index_backlog()


def index_backlog() -> Plan[int]:
    """Index every node of SQLite's full-text backlog and empty it; returns how many. Their
    search texts are derived here, as the store derives a new node's: the `node_search` view
    derives the same text, four times as slowly."""
    rows: list[tuple[int, str]] = list((yield _BACKLOG_TURNS, {}))
    texts = [(pk, search_text(jsjson.loads(turn_json))) for pk, turn_json in rows]
    yield from _index(texts, _INDEX_KEYS, _INDEX_KEY)
    yield _EMPTY_BACKLOG, {}
    return len(rows)


def backlog_waiting() -> Plan[bool]:
    """Whether SQLite's full-text backlog holds nodes (a search indexes them first)."""
    ((waiting,),) = yield _BACKLOG_SIZE, {}
    return bool(waiting)


def _index(
    texts: Sequence[tuple[str | int, str]], batch: Prepared, one: Prepared, **common: str
) -> Plan[None]:
    """Add nodes' texts (node id or key, text) to a SQLite full-text index: the short ones in
    one statement, each long one by itself; `common`: the statements' other parameters."""
    short = [(key, words) for key, words in texts if len(words) < LONG_TEXT]
    if short:
        yield batch, {**common, "texts": jsjson.dumps(short)}
    for key, words in texts:
        if len(words) >= LONG_TEXT:
            yield one, {**common, "key": key, "text": words}
