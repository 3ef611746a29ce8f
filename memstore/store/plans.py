"""What every store operation does, written once for the sync and the async store.

An operation is a *plan*: a generator that yields SQLAlchemy statements and receives each one's
(buffered) result. `SessionStore` drives plans on a `Connection`, `AsyncSessionStore` on an
`AsyncConnection`, each inside one transaction; a plan that raises rolls the transaction back.
An error a statement raises is thrown into the plan, which may clean up before it re-raises; a
plan may also end its transaction part-way (`COMMIT`, `ROLLBACK`: SQLite's chunked imports).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from operator import itemgetter
from typing import Any, Protocol, TypeAlias, TypeVar, cast

from sqlalchemy import (
    ColumnElement,
    Executable,
    Select,
    Table,
    bindparam,
    case,
    delete,
    false,
    func,
    insert,
    literal,
    select,
    text,
    true,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from memstore import jsjson
from memstore.errors import (
    AmbiguousNodeError,
    HeadMovedError,
    InvalidArgumentError,
    InvalidNodeIdError,
    InvalidSessionIdError,
    NodeConflictError,
    SessionExistsError,
    UnknownNodeError,
    UnknownSessionError,
)
from memstore.graph import SessionGraph
from memstore.hashing import hash_node
from memstore.store.bulk import paused_gc
from memstore.store.owners import refuse_if_importing
from memstore.store.prepared import Params, Prepared
from memstore.store.rows import search_text, stored_rows
from memstore.store.tables import (
    IN_STORED_ORDER,
    NOT_IMPORTING,
    Id,
    node_blocks,
    nodes,
    of_visible_session,
    records,
    session_tags,
    sessions,
)
from memstore.types import (
    MAX_CREATED_AT,
    MIN_CREATED_AT,
    SessionNode,
    Turn,
    TurnLike,
    is_storable_text,
    parse_turn,
    validate_session_id,
)

__all__ = [
    "COMMIT",
    "NATIVE_AGENT",
    "ROLLBACK",
    "UNSET",
    "Boundary",
    "ConnectionStep",
    "Plan",
    "SessionInfo",
    "Step",
    "StoreStats",
    "Unset",
    "agent_of",
]

T = TypeVar("T")


class Boundary(Enum):
    """A step that ends the plan's transaction: the next statement begins another. Only SQLite's
    chunked imports yield them (see `memstore.store.importing`)."""

    COMMIT = "commit"
    ROLLBACK = "rollback"


COMMIT = Boundary.COMMIT
ROLLBACK = Boundary.ROLLBACK


class ConnectionStep:
    """A step the driver takes on its connection itself, not a statement: SQLite's progress
    handler for a time limit (`time_limits.SqliteTimeLimit`)."""


Step: TypeAlias = Executable | tuple[Executable | Prepared, Params] | Boundary | ConnectionStep
"""A statement, or a statement and its parameters (a list of rows: executemany), a
transaction boundary, or a step on the connection."""


class StepResult(Protocol):
    """What a plan may ask of a step's result: SQLAlchemy's CursorResult, or the same calls on
    the rows of a statement the driver ran on its cursor (`prepared.PreparedRows`)."""

    def __iter__(self) -> Iterator[Any]: ...
    def first(self) -> Any: ...
    def one(self) -> Any: ...
    def all(self) -> Sequence[Any]: ...
    def scalar_one_or_none(self) -> Any: ...
    def scalars(self) -> Iterable[Any]: ...
    @property
    def rowcount(self) -> int: ...


Plan: TypeAlias = Generator[Step, StepResult, T]
"""Receives each statement's result, of one shape whichever way the driver ran it (a streamed
query's rows as an iterator)."""


class Unset:
    """The type of `UNSET`: an argument that was not given (None is a meaningful value)."""

    _instance: Unset | None = None

    def __new__(cls) -> Unset:
        cls._instance = cls._instance or super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()

NATIVE_AGENT = "memstore"
"""The agent of a session written through memstore itself (as the `session_sources` view says)."""


def agent_of(metadata: Mapping[str, Any] | None) -> str:
    """Which agent wrote a session, from its metadata: `pi` or `claude-code` for an imported
    session file, else memstore itself."""
    agent = (metadata or {}).get("agent")
    return agent if isinstance(agent, str) else NATIVE_AGENT


@dataclass(frozen=True)
class SessionInfo:
    """A session's summary: its head, size, times (epoch ms) and user metadata."""

    id: str
    head: str | None
    node_count: int
    created_at: int
    updated_at: int
    branch_count: int = 0
    title: str | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def agent(self) -> str:
        """Which agent wrote the session (`memstore`, `pi` or `claude-code`)."""
        return agent_of(self.metadata)


def as_call(step: Step) -> tuple[Any, ...]:
    """The arguments of `connection.execute` for a step."""
    return step if isinstance(step, tuple) else (step,)


def now_ms() -> int:
    """The current time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def node_from_row(row: Sequence[Any]) -> SessionNode:
    """A SessionNode from a `nodes` row that starts (id, parent_id, turn_json, created_at)."""
    turn = Turn._from_stored_text(row[2])
    return SessionNode._stored(row[0], row[1], turn, row[3])


def nodes_from_rows(rows: Iterable[Any]) -> list[SessionNode]:
    """SessionNodes from many `nodes` rows (as `node_from_row`, the turns built in one loop)."""
    node = SessionNode._stored
    with paused_gc():
        rows = rows if isinstance(rows, list) else list(rows)
        turns = Turn._from_stored_texts([row[2] for row in rows])
        return [node(row[0], row[1], turn, row[3]) for row, turn in zip(rows, turns, strict=True)]


MAX_NODE_ID = 255


def node_id_problem(node_id: str) -> str | None:
    """Why the store cannot hold `node_id`, or None when it can."""
    if len(node_id) > MAX_NODE_ID:
        return f"is longer than {MAX_NODE_ID} characters"
    if not is_storable_text(node_id):
        return "holds NUL or a lone surrogate"
    return None


def lookup_id(session_id: str) -> str:
    """The key to look a session up by. An id that no database can store (it holds NUL or a
    lone surrogate) names no session: it becomes '', which no session has, so that reads find
    nothing instead of failing in the driver.

    Raises:
        InvalidSessionIdError: `session_id` is not a string at all.
    """
    if not isinstance(session_id, str):
        raise InvalidSessionIdError(f"a session id is a string, not {type(session_id).__name__}")
    return session_id if is_storable_text(session_id) else ""


_SESSION_HEAD = Prepared(
    select(sessions.c.head).where(sessions.c.id == bindparam("session_id"), NOT_IMPORTING)
)


def _session_row(session_id: str) -> Step:
    """The session's row (its head), if it exists (one being imported is absent)."""
    return _SESSION_HEAD, {"session_id": lookup_id(session_id)}


# The append path's statements, compiled once and run on the driver's cursor (see `prepared`).
# Creates the session row if missing and returns its head, locking the row against other writers
# until the transaction ends (a no-op update is what takes the lock on PostgreSQL).
_ENSURE_SESSION = {
    dialect: Prepared(
        module.insert(sessions)
        .values(
            id=bindparam("session_id"),
            head=None,
            created_at=bindparam("now"),
            updated_at=bindparam("now"),
        )
        .on_conflict_do_update(index_elements=[sessions.c.id], set_={"head": sessions.c.head})
        .returning(sessions.c.head, sessions.c.importing)
    )
    for dialect, module in (("postgresql", postgresql), ("sqlite", sqlite))
}


def _node_by_key(node_id: str) -> Select[Any]:
    return select(nodes.c.id, nodes.c.parent_id, nodes.c.created_at, nodes.c.turn_json).where(
        nodes.c.session_id == bindparam("session_id"), nodes.c.id == bindparam(node_id)
    )


# Two lookups by key, not `id IN (:node_id, :parent_id)`: PostgreSQL may read an IN list on the
# index's second column as a filter over the whole session, when it thinks the session small.
_NODE_AND_PARENT = Prepared(union_all(_node_by_key("node_id"), _node_by_key("parent_id")))
# The same for a few more keys (a batch appended at once, with its parent), in sizes of powers of
# two, the unused keys NULL (which matches no row): one prepared statement per size.
_KEYED_LOOKUP_SIZES = (4, 8, 16, 32)
_NODES_BY_KEYS = {
    size: Prepared(union_all(*(_node_by_key(f"key_{index}") for index in range(size))))
    for size in _KEYED_LOOKUP_SIZES
}
_NODES_BY_ID = select(nodes.c.id, nodes.c.parent_id, nodes.c.turn_json, nodes.c.created_at).where(
    nodes.c.session_id == bindparam("session_id"),
    nodes.c.id.in_(bindparam("node_ids", expanding=True)),
)
_SESSION_NODES = Prepared(
    select(nodes.c.id, nodes.c.parent_id, nodes.c.turn_json, nodes.c.created_at)
    .where(nodes.c.session_id == bindparam("session_id"), IN_STORED_ORDER)
    .order_by(nodes.c.pk)
)
_MOVE_HEAD = Prepared(
    update(sessions)
    .where(sessions.c.id == bindparam("session_id"))
    .values(head=bindparam("new_head"), updated_at=bindparam("now"))
)
# Inserts of whole rows (every column but the generated key), one row per parameter dict.
INSERT_NODES = Prepared.insert(nodes, [c.name for c in nodes.columns if c.name != "pk"])
BLOCK_ROWS = 10_000
"""Block rows inserted by one statement, at most."""
INSERT_BLOCKS = Prepared.insert(node_blocks, [c.name for c in node_blocks.columns])
INSERT_RECORDS = Prepared.insert(records, [c.name for c in records.columns if c.name != "pk"])
# SQLite's full-text index is filled by the store, one statement per batch of new nodes, not by
# an insert trigger: a trigger runs in a statement savepoint, where FTS5 flushes its pending
# terms, so every node became a tiny index segment to merge (half of a bulk import's time). The
# batch's texts come as one JSON array of [id, text] pairs, computed in Python as the rows were:
# the same text the `node_search` view derives from `turn_json` (which the index's snippets and
# delete triggers read), without deriving it in SQL again (three times as long as indexing it).
_INDEXED_TEXTS = """INSERT INTO {table} (rowid, {column})
SELECT n.pk, t.value ->> '$[1]' FROM json_each(:texts) AS t
CROSS JOIN nodes AS n ON n.session_id = :session_id AND n.id = t.value ->> '$[0]'"""
_INDEX_NODES = Prepared(text(_INDEXED_TEXTS.format(table="nodes_fts", column="search_text")))
# The index of characters of scripts without spaces holds only the nodes that have some.
_INDEX_CHARS = Prepared(text(_INDEXED_TEXTS.format(table="nodes_fts_chars", column="search_chars")))
# A long text is indexed by itself, bound as it is: through JSON, SQLite copied it about eight
# times (json_each's value, then `->>`), 260 MB for a 30 MB turn.
_INDEXED_TEXT = """INSERT INTO {table} (rowid, {column})
SELECT pk, :text FROM nodes WHERE session_id = :session_id AND id = :key"""
_INDEX_NODE = Prepared(text(_INDEXED_TEXT.format(table="nodes_fts", column="search_text")))
_INDEX_NODE_CHARS = Prepared(
    text(_INDEXED_TEXT.format(table="nodes_fts_chars", column="search_chars"))
)
# SQLite's full-text index costs a commit about 150 us whatever it adds (FTS5 writes a new
# segment, its structure and averages records and the document's size: half of an append's
# pages). Writes of fewer than SEARCH_BACKLOG nodes list them in `nodes_fts_backlog` (migration
# 0019) instead; the write that brings the backlog to SEARCH_BACKLOG nodes indexes them all, in
# one segment. Searches index the backlog first (a read-only store searches it in memory).
SEARCH_BACKLOG = 256
# The backlog's size comes back with the insert: one statement (on an asyncio connection, each
# is a round trip to the driver's thread).
_INTO_BACKLOG = Prepared(
    text(
        "INSERT INTO nodes_fts_backlog (pk) SELECT pk FROM nodes WHERE session_id = :session_id "
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
LONG_TEXT = 1 << 20
"""Characters from which a node's search text is indexed by itself, not in its batch's JSON."""


def ensure_session(dialect: str, session_id: str, now: int) -> Plan[str | None]:
    """Create the session row if missing, lock it against other writers, return its head.

    Raises:
        SessionImportingError: an import of the session is still running.
    """
    upsert = _ENSURE_SESSION["postgresql" if dialect == "postgresql" else "sqlite"]
    ((head, importing),) = yield upsert, {"session_id": session_id, "now": now}
    refuse_if_importing(session_id, importing)
    return cast(str | None, head)


def node_rows(session_id: str, node_ids: Iterable[str]) -> Step:
    """The stored nodes among `node_ids` (id, parent_id, turn_json, created_at)."""
    return _NODES_BY_ID, {"session_id": session_id, "node_ids": list(node_ids)}


def stored_ids(dialect: str, session_id: str, node_ids: Sequence[str]) -> Select[Any]:
    """The ids among `node_ids` that the session holds (see `lookup_by_ids`)."""
    return lookup_by_ids(dialect, session_id, node_ids, (nodes.c.id,))


def lookup_by_ids(
    dialect: str, session_id: str, node_ids: Sequence[str], columns: Sequence[Any]
) -> Select[Any]:
    """`columns` of the session's nodes whose ids are among `node_ids`.

    On PostgreSQL each id is looked up by itself (a LATERAL subquery with LIMIT 1, per id): as
    `id IN (...)`, the planner may read the whole session instead, when it thinks it small.
    """
    if dialect != "postgresql":
        return select(*columns).where(nodes.c.session_id == session_id, nodes.c.id.in_(node_ids))
    given = (
        func.unnest(literal(list(node_ids), postgresql.ARRAY(Id)))
        .table_valued("id")
        .render_derived("given")
    )
    found = (
        select(*columns)
        .where(nodes.c.session_id == session_id, nodes.c.id == given.c.id)
        .limit(1)
        .lateral("found")
    )
    return select(*found.c).select_from(given).join(found, true())


def append_node(
    dialect: str,
    session_id: str,
    node: SessionNode,
    expected_head: str | Unset | None = UNSET,
) -> Plan[None]:
    """Store `node` (unless it is there already) and move the head to it, atomically."""
    validate_session_id(session_id)
    for node_id in (node.id, node.parent):
        if node_id is not None and (problem := node_id_problem(node_id)):
            raise InvalidNodeIdError(f"session {session_id!r}: node id {node_id[:40]!r} {problem}")
    now = now_ms()
    head = yield from ensure_session(dialect, session_id, now)
    if not isinstance(expected_head, Unset) and head != expected_head:
        raise HeadMovedError(session_id, expected_head, head)
    lookup = {"session_id": session_id, "node_id": node.id, "parent_id": node.parent}
    found = {row[0]: row[1:] for row in (yield _NODE_AND_PARENT, lookup)}
    if node.parent is not None and node.parent not in found:
        raise UnknownNodeError(session_id, node.parent)
    existing = found.get(node.id)
    if existing is None:
        yield from insert_nodes(dialect, session_id, [node])
    elif existing != (node.parent, node.created_at, node.turn.json_text()):
        raise NodeConflictError(
            f"session {session_id!r} already holds node {node.id!r} with different content"
        )
    record = {"session_id": session_id, "kind": "append", "node_id": node.id, "raw": None}
    yield INSERT_RECORDS, record
    yield _MOVE_HEAD, {"session_id": session_id, "new_head": node.id, "now": now}


def chain_nodes(parent: str | None, turns: Sequence[Turn], created_at: int) -> list[SessionNode]:
    """`turns` as a chain of content-addressed nodes under `parent`, all made at `created_at`."""
    chain: list[SessionNode] = []
    for turn in turns:
        node_id = hash_node(parent, turn, created_at)
        chain.append(SessionNode._stored(node_id, parent, turn, created_at))
        parent = node_id
    return chain


def append_turns(
    dialect: str,
    session_id: str,
    turns: Iterable[TurnLike],
    expected_head: str | Unset | None = UNSET,
    created_at: int | None = None,
    parent: str | Unset = UNSET,
) -> Plan[list[SessionNode]]:
    """Chain `turns` onto the head as it is inside this transaction (or onto `parent`: a fork)
    and move the head to the last, writing one `append` record per turn (what appending them
    one by one writes).

    The first statement locks the session row against other writers (SQLite's BEGIN IMMEDIATE
    has taken the database's write lock already), so concurrent calls queue up and each one's
    chain hangs from the last one's: one linear chain, no retry. A repeat (see
    `SessionStore.append_many`) writes nothing and returns the nodes stored the first time.
    """
    validate_session_id(session_id)
    if isinstance(turns, str | bytes | Mapping | Turn):
        raise InvalidArgumentError("append_many takes a list of turns, not one turn")
    parsed = [parse_turn(turn) for turn in turns]
    if created_at is not None and type(created_at) is not int:
        raise InvalidArgumentError(f"created_at is epoch milliseconds (an int), not {created_at!r}")
    for node_id in (expected_head, parent):
        if isinstance(node_id, str) and (problem := node_id_problem(node_id)):
            shown = node_id[:40]
            raise InvalidNodeIdError(f"session {session_id!r}: node id {shown!r} {problem}")
    return _append_turns(dialect, session_id, parsed, expected_head, created_at, parent)


def _append_turns(
    dialect: str,
    session_id: str,
    turns: Sequence[Turn],
    expected_head: str | Unset | None,
    created_at: int | None,
    parent: str | Unset,
) -> Plan[list[SessionNode]]:
    if not turns:
        return []
    now = now_ms()
    head = yield from ensure_session(dialect, session_id, now)
    stamp = now if created_at is None else created_at
    if not isinstance(expected_head, Unset) and head != expected_head:
        base = expected_head if isinstance(parent, Unset) else parent
        landed = chain_nodes(base, turns, stamp)
        if created_at is not None and (yield from _holds_chain(dialect, session_id, landed)):
            return landed
        raise HeadMovedError(session_id, expected_head, head)
    chain = chain_nodes(head if isinstance(parent, Unset) else parent, turns, stamp)
    yield from _store_chain(dialect, session_id, chain, now)
    return chain


_LOOKUP_CHUNK = 500  # ids per lookup: SQLite caps a statement's parameters


def _stored_node_rows(
    dialect: str, session_id: str, node_ids: Sequence[str]
) -> Plan[dict[str, tuple[Any, ...]]]:
    """The session's nodes among `node_ids`: id -> (parent_id, created_at, turn_json)."""
    if len(node_ids) <= 2:  # the append path's prepared statement: two lookups by key
        wanted = [*node_ids, None][:2]
        lookup = {"session_id": session_id, "node_id": wanted[0], "parent_id": wanted[1]}
        rows = yield _NODE_AND_PARENT, lookup
        return {row[0]: tuple(row[1:]) for row in rows}
    size = next((size for size in _KEYED_LOOKUP_SIZES if len(node_ids) <= size), None)
    if size is not None:  # a batch's: as many lookups by key, prepared
        keys = dict(zip((f"key_{index}" for index in range(size)), node_ids, strict=False))
        keyed = {f"key_{index}": None for index in range(size)} | keys
        rows = yield _NODES_BY_KEYS[size], {"session_id": session_id, **keyed}
        return {row[0]: tuple(row[1:]) for row in rows}
    columns = (nodes.c.id, nodes.c.parent_id, nodes.c.created_at, nodes.c.turn_json)
    found: dict[str, tuple[Any, ...]] = {}
    for start in range(0, len(node_ids), _LOOKUP_CHUNK):
        chunk = node_ids[start : start + _LOOKUP_CHUNK]
        for row in (yield lookup_by_ids(dialect, session_id, chunk, columns)):
            found[row[0]] = tuple(row[1:])
    return found


def _refuse_other_content(session_id: str, node: SessionNode, stored: tuple[Any, ...]) -> None:
    """Raise NodeConflictError if the stored row of `node`'s id holds other content."""
    if stored != (node.parent, node.created_at, node.turn.json_text()):
        raise NodeConflictError(
            f"session {session_id!r} already holds node {node.id!r} with different content"
        )


def _holds_chain(dialect: str, session_id: str, chain: Sequence[SessionNode]) -> Plan[bool]:
    """Whether the session holds every node of `chain` already (the batch landed before)."""
    found = yield from _stored_node_rows(dialect, session_id, [node.id for node in chain])
    for node in chain:
        if node.id not in found:
            return False
        _refuse_other_content(session_id, node, found[node.id])
    return True


def _store_chain(
    dialect: str, session_id: str, chain: Sequence[SessionNode], now: int
) -> Plan[None]:
    """Insert the chain's new nodes, log one append per node and move the head to the last."""
    parent = chain[0].parent
    wanted = [node.id for node in chain] + ([parent] if parent is not None else [])
    found = yield from _stored_node_rows(dialect, session_id, wanted)
    if parent is not None and parent not in found:
        raise UnknownNodeError(session_id, parent)
    new: list[SessionNode] = []
    for node in chain:
        if node.id in found:
            _refuse_other_content(session_id, node, found[node.id])
        else:
            new.append(node)
    if new:
        yield from insert_nodes(dialect, session_id, new)
    logged = [
        {"session_id": session_id, "kind": "append", "node_id": node.id, "raw": None}
        for node in chain
    ]
    yield INSERT_RECORDS, logged[0] if len(logged) == 1 else logged
    yield _MOVE_HEAD, {"session_id": session_id, "new_head": chain[-1].id, "now": now}


def insert_nodes(dialect: str, session_id: str, new_nodes: Sequence[SessionNode]) -> Plan[None]:
    """Insert nodes (parents first) with their blocks."""
    node_rows: list[dict[str, Any]] = []
    blocks: list[Iterable[dict[str, Any]]] = []
    for node in new_nodes:
        if not MIN_CREATED_AT <= node.created_at <= MAX_CREATED_AT:
            raise InvalidArgumentError(
                f"session {session_id!r}: node {node.id[:40]!r} has created_at {node.created_at}, "
                "out of the range the databases hold (-2**63 to 2**63-1 epoch milliseconds)"
            )
        text = node.turn.json_text()
        turn = jsjson.loads(text)  # the wire dict, for the derived columns: faster than to_json
        row, rows = stored_rows(session_id, node.id, node.parent, node.created_at, turn, text)
        node_rows.append(row)
        blocks.append(rows)
    yield from insert_rows(dialect, session_id, node_rows, itertools.chain.from_iterable(blocks))


def insert_rows(
    dialect: str,
    session_id: str,
    node_rows: Sequence[Mapping[str, Any]],
    blocks: Iterable[Mapping[str, Any]],
) -> Plan[None]:
    """Insert one session's `nodes` rows (parents first) and their `node_blocks` rows, a
    bounded batch at a time (the rows may be built as they are read), and index the nodes'
    text for full-text search."""
    indexed = dialect == "sqlite"  # PostgreSQL's index is an expression index on `nodes`
    if node_rows:
        yield INSERT_NODES, node_rows
    rows = iter(blocks)
    while batch := list(itertools.islice(rows, BLOCK_ROWS)):
        yield INSERT_BLOCKS, batch
    if indexed and node_rows:
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


def load_session(session_id: str) -> Plan[SessionGraph]:
    """Every node of the session, in the order stored, and its head."""
    row = (yield _session_row(session_id)).first()
    if row is None:
        return SessionGraph.hydrate(session_id, [], None)
    head = row[0]
    rows = yield _SESSION_NODES, {"session_id": lookup_id(session_id)}
    return SessionGraph.hydrate(session_id, nodes_from_rows(rows), head)


def _path_query(dialect: str) -> Select[Any]:
    """Walk parent links from `:leaf` towards the root (at most `:limit` nodes), giving each
    node's row and depth (1: the leaf), in no particular order.

    The recursive part carries each node's key and parent only; the turns are read once, by key,
    after the walk (carrying them through the recursion copied every turn into its work table).
    On PostgreSQL each step, and each read of a turn, is a LATERAL subquery with LIMIT 1, which
    the planner must run once per node (an index lookup): as a plain join it may pick a hash
    join, reading the whole session once per step, when its statistics are stale. The caller
    sorts by depth: a sort in the database would copy every turn once more (to disk, past
    `work_mem`), where the rows come out of the walk nearly in order already.
    """
    if dialect != "postgresql":
        return _sqlite_path_query()
    session_id: Any = bindparam("session_id")
    start = select(nodes.c.pk, nodes.c.parent_id, literal(1).label("depth")).where(
        nodes.c.session_id == session_id,
        nodes.c.id == bindparam("leaf"),
        of_visible_session(session_id),  # of the parameter: checked once, not per row
    )
    path = start.cte("path", recursive=True)
    parent = (
        select(nodes.c.pk, nodes.c.parent_id)
        .where(nodes.c.session_id == session_id, nodes.c.id == path.c.parent_id)
        .limit(1)
        .lateral("parent")
    )
    step = select(parent.c.pk, parent.c.parent_id, (path.c.depth + 1).label("depth"))
    step = step.join_from(path, parent, true()).where(path.c.depth < bindparam("limit"))
    path = path.union_all(step)
    columns = (nodes.c.id, nodes.c.parent_id, nodes.c.turn_json, nodes.c.created_at)
    row = select(*columns).where(nodes.c.pk == path.c.pk).limit(1).lateral("row")
    return select(*row.c, path.c.depth).join_from(path, row, true())


def _sqlite_path_query() -> Select[Any]:
    """SQLite's walk: the recursive part carries each node's key and parent only (SQLite's
    planner always walks the unique index, one node at a time), and the turns are read once,
    by key, root first. Carrying the turns through the walk copied each into the queue of the
    recursion: it took twice as long as reading the whole session."""
    session_id: Any = bindparam("session_id")
    start = select(nodes.c.pk, nodes.c.parent_id, literal(1).label("depth")).where(
        nodes.c.session_id == session_id,
        nodes.c.id == bindparam("leaf"),
        of_visible_session(session_id),  # of the parameter: checked once, not per row
    )
    path = start.cte("path", recursive=True)
    parent = nodes.alias("parent")
    step = select(parent.c.pk, parent.c.parent_id, (path.c.depth + 1).label("depth")).where(
        parent.c.session_id == session_id,
        parent.c.id == path.c.parent_id,
        path.c.depth < bindparam("limit"),
    )
    path = path.union_all(step)
    walked = select(path.c.pk, path.c.depth).order_by(path.c.depth.desc()).subquery("walked")
    return select(
        nodes.c.id, nodes.c.parent_id, nodes.c.turn_json, nodes.c.created_at, walked.c.depth
    ).join_from(walked, nodes, nodes.c.pk == walked.c.pk)


_PATHS = {dialect: Prepared(_path_query(dialect)) for dialect in ("postgresql", "sqlite")}
_NO_LIMIT = 2**31 - 1
_DEPTH = 4  # the depth's column in a row of `_PATHS`


def _starts_on_tool_result(turn: Turn) -> bool:
    return any(block.kind == "tool_result" for block in turn.blocks)


def _chain_check() -> Select[Any]:
    """Where a whole path ends and whether it can be read flat, in one statement: the leaf
    (`:leaf`, else the session's head), its key, and whether the session is one chain (one
    root, no node with two children: index scans, about 1 ms per 5,000 nodes on SQLite). No
    row: no such session, or one being imported."""
    session_id: Any = bindparam("session_id")
    leaf = func.coalesce(bindparam("leaf", type_=Id), sessions.c.head)
    of_session = nodes.c.session_id == session_id
    linked = nodes.c.parent_id.is_not(None)

    def count(*where: ColumnElement[bool]) -> Any:
        return select(func.count()).select_from(nodes).where(of_session, *where).scalar_subquery()

    # Grouped in the order of the partial index on (session_id, parent_id): no temporary table
    # (count(DISTINCT parent_id) built one), and it stops at the first node with two children.
    forked = (
        select(nodes.c.parent_id)
        .where(of_session, linked)
        .group_by(nodes.c.parent_id)
        .having(func.count() > 1)
        .exists()
    )
    leaf_key = select(nodes.c.pk).where(of_session, nodes.c.id == leaf).scalar_subquery()
    # The roots are counted only when no node has two children: a branchy session's first fork
    # is found a few index entries in, where counting reads the whole session.
    one_chain = case((~forked, count(IN_STORED_ORDER) - count(linked) == 1), else_=false())
    return select(leaf, leaf_key, one_chain).where(sessions.c.id == session_id, NOT_IMPORTING)


_CHAIN_CHECK = Prepared(_chain_check())


def _chain_rows(dialect: str, *, times: bool) -> Select[Any]:
    """The nodes stored up to the leaf (`:leaf_key`): in a session that is one chain, where each
    node is stored after its parent, the path to the leaf (the reader checks that it is).
    SQLite reads them in stored order from its index. On PostgreSQL they come with their keys,
    and the reader sorts them, as it sorts a walk's rows: a sort in the database, which its
    planner may prefer to the index, copies every turn once more (to disk, past `work_mem`).
    Without `times`, no `created_at` (for turns without their nodes)."""
    columns = [nodes.c.id, nodes.c.parent_id, nodes.c.turn_json]
    query = select(*columns, *([nodes.c.created_at] if times else [])).where(
        nodes.c.session_id == bindparam("session_id"),
        IN_STORED_ORDER,
        nodes.c.pk <= bindparam("leaf_key"),
    )
    return query.add_columns(nodes.c.pk) if dialect == "postgresql" else query.order_by(nodes.c.pk)


_CHAIN_ROWS = {
    (dialect, times): Prepared(_chain_rows(dialect, times=times))
    for dialect in ("postgresql", "sqlite")
    for times in (False, True)
}
_KEY = -1  # the key's column in a row of PostgreSQL's `_CHAIN_ROWS`


def _is_path_to(rows: Sequence[Any], leaf: str) -> bool:
    """Whether `rows` (id, parent_id, ...) are a path: a root, then each the child of the row
    before, up to `leaf`. Stored order puts parents first, but this does not trust it."""
    ids = [row[0] for row in rows]
    return bool(ids) and ids[-1] == leaf and [row[1] for row in rows] == [None, *ids[:-1]]


def _walked_rows(dialect: str, session_id: str, leaf: str, limit: int) -> Plan[list[Any]]:
    """The rows (id, parent_id, turn_json, created_at, depth) of the path to `leaf`, at most
    `limit` of them, walked in SQL from the leaf; root first."""
    walk = _PATHS["postgresql" if dialect == "postgresql" else "sqlite"]
    key = {"session_id": lookup_id(session_id), "leaf": lookup_id(leaf), "limit": limit}
    return sorted((yield walk, key), key=itemgetter(_DEPTH), reverse=True)


def _whole_path_rows(
    dialect: str, session_id: str, leaf: str | None, *, times: bool = True
) -> Plan[Sequence[Any]]:
    """The rows (id, parent_id, turn_json, created_at, ...) of the path from the root to `leaf`
    (default: the head), root first; none for an empty or missing session (without `times`,
    the rows may lack `created_at`: for turns without their nodes). A session that is
    one chain is read flat, in the order stored (a walk looks each node up by its key: twice
    as long); any other, or one whose rows are no path, is walked.

    Raises:
        UnknownNodeError: the session has no node `leaf`.
    """
    key = lookup_id(session_id)
    given = None if leaf is None else lookup_id(leaf)
    found = (yield _CHAIN_CHECK, {"session_id": key, "leaf": given}).first()
    if found is None or found[0] is None:
        if leaf is None:
            return []
        raise UnknownNodeError(session_id, leaf)
    end, end_key, one_chain = found
    if end_key is None:
        raise UnknownNodeError(session_id, end if leaf is None else leaf)
    if one_chain:
        rows = yield from _rows_stored_up_to(dialect, key, end_key, times=times)
        if _is_path_to(rows, end):
            return rows
    return (yield from _walked_rows(dialect, session_id, end, _NO_LIMIT))


def _rows_stored_up_to(
    dialect: str, session_id: str, leaf_key: int, *, times: bool
) -> Plan[Sequence[Any]]:
    """The rows of `_CHAIN_ROWS`, in the order stored."""
    params = {"session_id": session_id, "leaf_key": leaf_key}
    if dialect == "postgresql":
        return sorted((yield _CHAIN_ROWS["postgresql", times], params), key=itemgetter(_KEY))
    return (yield _CHAIN_ROWS["sqlite", times], params).all()


def _newest_path_nodes(
    dialect: str, session_id: str, leaf: str | None, last: int
) -> Plan[list[SessionNode]]:
    """The newest `last` nodes of the path to `leaf` (default: the head), walked in SQL (a
    walk of `last` steps, where a flat read would read the whole session), moved back so that
    the first is never a tool_result cut off from its tool_call."""
    if leaf is None:
        leaf = (yield _session_row(session_id)).scalar_one_or_none()
        if leaf is None:
            return []
    if last == 0:
        return []
    with paused_gc():  # the rows too: fetching them triggered collections of the whole heap
        path = nodes_from_rows((yield from _walked_rows(dialect, session_id, leaf, last)))
    if not path:
        raise UnknownNodeError(session_id, leaf)
    while path[0].parent is not None and _starts_on_tool_result(path[0].turn):
        (row,) = yield node_rows(session_id, [path[0].parent])
        path.insert(0, node_from_row(row))
    return path


def _check_path_arguments(leaf: object, last: object) -> None:
    """Refuse a leaf that is no string and a `last` that is no whole number >= 0."""
    if leaf is not None and not isinstance(leaf, str):
        raise InvalidNodeIdError(f"a node id is a string, not {type(leaf).__name__}")
    if last is not None and (type(last) is not int or last < 0):
        raise InvalidArgumentError(f"last must be a whole number >= 0, got {last!r}")


def load_path_nodes(
    dialect: str, session_id: str, leaf: str | None = None, last: int | None = None
) -> Plan[list[SessionNode]]:
    """The nodes from the root (or the newest `last`, moved back off a tool_result) to `leaf`."""
    _check_path_arguments(leaf, last)
    if last is not None:
        return (yield from _newest_path_nodes(dialect, session_id, leaf, min(last, _NO_LIMIT)))
    with paused_gc():  # the rows too: fetching them triggered collections of the whole heap
        return nodes_from_rows((yield from _whole_path_rows(dialect, session_id, leaf)))


def load_path(
    dialect: str, session_id: str, leaf: str | None = None, last: int | None = None
) -> Plan[list[Turn]]:
    """The turns of `load_path_nodes`, without the nodes: a long path's turns are built in one
    loop, and no node is built to be thrown away."""
    _check_path_arguments(leaf, last)
    if last is not None:
        path = yield from _newest_path_nodes(dialect, session_id, leaf, min(last, _NO_LIMIT))
        return [node.turn for node in path]
    with paused_gc():
        rows = yield from _whole_path_rows(dialect, session_id, leaf, times=False)
        return Turn._from_stored_texts([row[2] for row in rows])


def head(session_id: str) -> Plan[str | None]:
    """The session's head, or None for an empty or missing session."""
    value: str | None = (yield _session_row(session_id)).scalar_one_or_none()
    return value


SHOWN_CANDIDATES = 10


def resolve_node_id(session_id: str, node_id: str) -> Plan[str]:
    """The id of the session's node that `node_id` names: that id itself, or the one id that
    starts with it (a short id, as git takes them).

    Raises:
        UnknownNodeError: no node's id is or starts with `node_id`.
        AmbiguousNodeError: several do; it lists them.
    """
    owned = (nodes.c.session_id == lookup_id(session_id)) & of_visible_session(nodes.c.session_id)
    wanted = lookup_id(node_id)
    if wanted and (yield select(nodes.c.id).where(owned, nodes.c.id == wanted)).first():
        return node_id
    starts = func.substr(nodes.c.id, 1, len(wanted)) == wanted
    query = select(nodes.c.id).where(owned, starts).order_by(nodes.c.id)
    found = list((yield query.limit(SHOWN_CANDIDATES + 1)).scalars()) if wanted else []
    if len(found) == 1:
        return str(found[0])
    if not found:
        raise UnknownNodeError(session_id, node_id)
    more = len(found) > SHOWN_CANDIDATES
    raise AmbiguousNodeError(session_id, node_id, found[:SHOWN_CANDIDATES], more)


def list_session_ids() -> Plan[list[str]]:
    """Every session id, sorted."""
    return list(
        (yield select(sessions.c.id).where(NOT_IMPORTING).order_by(sessions.c.id)).scalars()
    )


_FLOAT_INTEGERS = 2**1023  # beyond this a JSON number is no float the database compares


def _metadata_filter(key: str, value: Any) -> ColumnElement[bool]:
    if not isinstance(key, str):
        raise InvalidArgumentError(f"metadata filter keys are strings, not {key!r}")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _FLOAT_INTEGERS:
        raise InvalidArgumentError(f"metadata filter {key!r}: the number is too large to compare")
    element = sessions.c.meta[key]
    comparison: ColumnElement[bool]
    if isinstance(value, bool):
        comparison = element.as_boolean() == value
    elif isinstance(value, int | float):
        comparison = element.as_float() == value
    elif isinstance(value, str):
        comparison = element.as_string() == value
    else:
        raise InvalidArgumentError(
            f"metadata filter {key!r}: only str, number and bool values can be matched, "
            f"not {type(value).__name__}"
        )
    return comparison


def _tip_count() -> Any:
    """Per session: nodes that no node names as parent, i.e. the tips of its branches."""
    child = nodes.alias("child")
    has_child = select(child.c.id).where(
        child.c.session_id == nodes.c.session_id, child.c.parent_id == nodes.c.id
    )
    return (
        select(func.count())
        .where(nodes.c.session_id == sessions.c.id, ~has_child.exists())
        .scalar_subquery()
    )


@dataclass(frozen=True)
class StoreStats:
    """Totals over the whole store; `records` counts JSONL lines, as an import reports them."""

    sessions: int
    nodes: int
    records: int
    tool_calls: int
    failed_tool_calls: int
    top_tools: tuple[tuple[str, int], ...]


def _visible_count(table: Table, *where: ColumnElement[bool]) -> Any:
    """How many rows of `table` match `where`, but for sessions being imported: a count of all
    and one of theirs (none but while an import runs), so that counting all stays fast."""
    importing = select(sessions.c.id).where(sessions.c.importing.is_not(None))
    everything = select(func.count()).select_from(table).where(*where)
    theirs = everything.where(table.c.session_id.in_(importing))
    return everything.scalar_subquery() - theirs.scalar_subquery()


def store_stats(top: int = 10) -> Plan[StoreStats]:
    """Counts of sessions, nodes, records and tool calls, and the most used tools."""
    totals = (
        yield select(
            select(func.count()).where(NOT_IMPORTING).scalar_subquery(),
            _visible_count(nodes),
            _visible_count(records),
            _visible_count(records, records.c.kind == "append"),
            _visible_count(node_blocks, node_blocks.c.kind == "tool_call"),
            _visible_count(node_blocks, node_blocks.c.is_error == 1),
        )
    ).one()
    calls = func.count().label("calls")
    tools = yield (
        select(node_blocks.c.tool_name, calls)
        .where(node_blocks.c.kind == "tool_call", of_visible_session(node_blocks.c.session_id))
        .group_by(node_blocks.c.tool_name)
        .order_by(calls.desc(), node_blocks.c.tool_name)
        .limit(top)
    )
    session_count, node_count, rows, appends, call_count, failed_count = map(int, tuple(totals))
    return StoreStats(
        sessions=session_count,
        nodes=node_count,
        records=rows + appends,  # an append row stands for a node line and a head line
        tool_calls=call_count,
        failed_tool_calls=failed_count,
        top_tools=tuple((row.tool_name or "", row.calls) for row in tools),
    )


def list_sessions(
    *,
    tag: str | None = None,
    title_contains: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    limit: int | None = None,
    session_id: str | None = None,
) -> Plan[list[SessionInfo]]:
    """Sessions, most recently updated first, filtered by tag, title and metadata values."""
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    count = select(func.count()).where(nodes.c.session_id == sessions.c.id).scalar_subquery()
    query = select(sessions, count.label("node_count"), _tip_count().label("branch_count"))
    query = query.where(NOT_IMPORTING).order_by(sessions.c.updated_at.desc(), sessions.c.id)
    if session_id is not None:
        query = query.where(sessions.c.id == lookup_id(session_id))
    if tag is not None:
        tagged = select(session_tags.c.session_id).where(session_tags.c.tag == tag)
        query = query.where(sessions.c.id.in_(tagged))
    if title_contains is not None:
        query = query.where(sessions.c.title.contains(title_contains, autoescape=True))
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidArgumentError(f"a metadata filter is a mapping, not {metadata!r}")
    for key, value in (metadata or {}).items():
        query = query.where(_metadata_filter(key, value))
    if limit is not None and (type(limit) is not int or limit < 0):
        raise InvalidArgumentError(f"a session list limit is a whole number >= 0, not {limit!r}")
    if limit is not None:
        query = query.limit(limit)
    rows = list((yield query))
    tags: dict[str, list[str]] = {}
    if rows:
        tag_rows = (
            yield select(session_tags)
            .where(session_tags.c.session_id.in_([row.id for row in rows]))
            .order_by(session_tags.c.tag)
        )
        for tag_row in tag_rows:
            tags.setdefault(tag_row.session_id, []).append(tag_row.tag)
    return [
        SessionInfo(
            id=row.id,
            head=row.head,
            node_count=row.node_count,
            branch_count=row.branch_count,
            created_at=row.created_at,
            updated_at=row.updated_at,
            title=row.title,
            tags=tuple(tags.get(row.id, ())),
            metadata=row.meta or {},
        )
        for row in rows
    ]


def session_info(session_id: str) -> Plan[SessionInfo]:
    """One session's summary. Raises UnknownSessionError when it does not exist."""
    found = yield from list_sessions(session_id=session_id)
    if not found:
        raise UnknownSessionError(f"no session {session_id!r}")
    return found[0]


def delete_session(session_id: str) -> Plan[bool]:
    """Delete a session with all its nodes and records; False when there was none."""
    # Unlink parents first: cascading through the parent foreign key would recurse once per
    # level of the DAG, which SQLite refuses beyond 1,000 levels.
    key = lookup_id(session_id)
    marker = (yield select(sessions.c.importing).where(sessions.c.id == key)).scalar_one_or_none()
    refuse_if_importing(session_id, marker)
    yield update(nodes).where(nodes.c.session_id == key).values(parent_id=None)
    result = yield delete(sessions).where(sessions.c.id == key)
    return bool(result.rowcount)


def update_session(
    dialect: str,
    session_id: str,
    *,
    title: str | Unset | None = UNSET,
    tags: Sequence[str] | Unset = UNSET,
    metadata: Mapping[str, Any] | Unset | None = UNSET,
) -> Plan[None]:
    """Set a session's title, tags or metadata (creating an empty session if needed)."""
    validate_session_id(session_id)
    yield from ensure_session(dialect, session_id, now_ms())
    values: dict[str, Any] = {}
    if not isinstance(title, Unset):
        values["title"] = title
    if not isinstance(metadata, Unset):
        values["meta"] = dict(metadata) if metadata is not None else None
    if values:
        yield update(sessions).where(sessions.c.id == session_id).values(**values)
    if not isinstance(tags, Unset):
        if isinstance(tags, str):
            raise InvalidArgumentError("tags must be a sequence of strings, not one string")
        yield delete(session_tags).where(session_tags.c.session_id == session_id)
        unique = sorted(set(tags))
        if unique:
            yield insert(session_tags).values(
                [{"session_id": session_id, "tag": tag} for tag in unique]
            )


def fork_session(dialect: str, source_id: str, leaf: str | None, new_id: str) -> Plan[str | None]:
    """Copy the path to `leaf` (default: the head) of one session into a new session.

    The new session's records are those the original writer would have written for appending
    the path's nodes one by one. Returns the new session's head.
    """
    validate_session_id(new_id)
    if (yield _session_row(source_id)).first() is None:
        raise UnknownSessionError(f"no session {source_id!r}")
    taken = (yield select(sessions.c.importing).where(sessions.c.id == new_id)).first()
    if taken is not None:
        refuse_if_importing(new_id, taken.importing)
        raise SessionExistsError(f"session {new_id!r} already exists; choose another id")
    path = yield from load_path_nodes(dialect, source_id, leaf)
    now = now_ms()
    new_head = path[-1].id if path else None
    yield insert(sessions).values(id=new_id, head=new_head, created_at=now, updated_at=now)
    if path:
        yield from insert_nodes(dialect, new_id, path)
        yield insert(records).values(
            [
                {"session_id": new_id, "kind": "append", "node_id": node.id, "raw": None}
                for node in path
            ]
        )
    return new_head
