"""The SQL schema of the session store, as SQLAlchemy Core tables.

Alembic revisions in `migrations/` create and evolve these tables; a test checks that the two agree.

- `sessions`: one row per session, with its head (live leaf) and user metadata. `importing`
  (SQLite, migration 0018) names the process importing a new session in committed chunks: until
  it is cleared, every read treats the session as absent (see `memstore.store.importing`).
  `expires_at` (migration 0023) is the epoch ms after which `prune(expired=True)` deletes it.
- `expiry_defaults` (migration 0023): how long after its last update a session without an
  `expires_at` expires: one row for the store (`scope` 'store', `tag` ''), one per tag.
- `session_tags`: the tags of a session, one row each (so filtering is a plain join).
- `nodes`: the content-addressed turns. A turn is stored as its exact JSON text; role and time
  get their own columns for queries. A node's parent must be a node of the same session.
- `node_blocks`: every block of every turn as a row (kind, text, tool name, call id, error flag,
  input and output as JSON text), derived from the turn when it is stored, for queries.
- `records`: the append log, in order, one row per line of the original JSONL file or per
  pair of lines: an `append` is what the original `appendNode` wrote (a node line and a head
  line naming it); `node`, `head` and `other` rows are single lines. `raw` keeps an imported
  line's exact text when it cannot be re-derived from the node (spacing, escapes, key order,
  unknown record types).
- `node_usage`: what the model call behind a node cost (provider, model, tokens, US dollars),
  one row per node whose source says so: `append(..., usage=)`, compaction's summaries, the
  framework adapters, and pi and Claude Code imports. The `usage` view (migration 0024) adds
  each node's time, day and role.
- `node_keys`: a key a writer gave a node, unique in its session (`append_keyed`: a Claude Agent
  SDK entry's `uuid`), so that an append skips the turns stored already by a primary-key lookup
  inside its transaction (migration 0021).
- `erasures` (migration 0026): one receipt per `erase`: when, its scope (`session`, `node`,
  `subject`) and target, the caller's reason, counts, and `targets_json` (the sessions deleted
  and the nodes tombstoned, by session); never the content erased.
- `nodes_fts` (SQLite only, made by migration 0002, not modelled here): the FTS5 index of a
  node's search text. The store fills it as it inserts nodes; triggers keep it on delete and
  update. Since migration 0016 it is external-content over the `node_search` view, which derives
  the search text from `nodes.turn_json` in SQL: SQLite stores a turn's text once.
- A turn's text is stored once, in `nodes.turn_json`: `node_blocks` keeps a block's key, kind,
  tool name, call id and error flag, and the views `blocks`, `turns` and `tool_calls` read its
  text, tool input and output out of the turn (SQLite since migration 0016, PostgreSQL since
  0037 with the SQL functions `memstore_block_text`, `memstore_block_json` and
  `memstore_turn_text`); the view `node_search` derives a node's search text from it (SQLite
  since 0016, PostgreSQL since 0036 with `memstore_search_text`), as `rows.search_text` makes it.
- `nodes_fts_chars` (SQLite only, made by migration 0012, not modelled here): a contentless FTS5
  index of `nodes.search_chars` (the characters of scripts written without spaces, one word each),
  for rows where it is not empty; filled and kept the same way.
- PostgreSQL's search vectors (`POSTGRESQL_ONLY`, migration 0024): `nodes.search_vector` and
  `nodes.search_chars_vector`, the tsvectors of the two texts (their first `PG_INDEXED_CHARS`
  characters), folded in Python as they are written (`SearchVector`), under plain GIN indexes
  (`ix_nodes_search`, `ix_nodes_search_chars`, not modelled here). NULL for an empty text.
- `nodes_fts_backlog` (SQLite only, made by migration 0019, not modelled here): the keys of nodes
  that writes of a few nodes added without indexing them in `nodes_fts`; the write that fills it
  to `plans.SEARCH_BACKLOG` indexes them all (one FTS5 segment instead of one per commit), and a
  search indexes it first.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Column,
    ColumnElement,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    bindparam,
    column,
    func,
    literal_column,
    select,
    table,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from memstore.store.folding import sql_fold

__all__ = [
    "DEFAULT_TENANT",
    "IN_STORED_ORDER",
    "NOT_IMPORTING",
    "PG_INDEXED_CHARS",
    "POSTGRESQL_ONLY",
    "TENANT",
    "TENANT_KEY",
    "TS_CONFIG",
    "SearchVector",
    "erasures",
    "expiry_defaults",
    "metadata",
    "node_blocks",
    "node_keys",
    "node_search",
    "node_usage",
    "nodes",
    "nodes_fts",
    "nodes_fts_backlog",
    "nodes_fts_chars",
    "of_tenant",
    "of_visible_session",
    "pruned_usage",
    "records",
    "session_tags",
    "sessions",
    "stored_on",
    "summary_subjects",
    "tenant_column",
]

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets a 64-bit identity.
SerialKey = BigInteger().with_variant(Integer(), "sqlite")
JsonObject = JSON().with_variant(JSONB(), "postgresql")
Id = String(255)
POSTGRESQL_ONLY = {"dialects": ("postgresql",)}
"""A column's `info` for a column only PostgreSQL has: its search vectors (migration 0022)."""


TS_CONFIG = "simple"  # no stemming, like FTS5's unicode61: the same matches on both backends
PG_INDEXED_CHARS = 250_000
"""How much of a text PostgreSQL's search vectors hold: 4 bytes a character stays under the
1 MiB a tsvector can hold (migration 0017 chose the number; 0022 fills the vectors with it)."""


class SearchVector(TypeDecorator[str]):
    """A PostgreSQL tsvector written from a text: the store binds the text, which is folded in
    Python (`folding.sql_fold` of its first `PG_INDEXED_CHARS` characters) and made a vector by
    `to_tsvector` in the INSERT, so that no SQL folding runs per row (migration 0024). An empty
    text is NULL (matches nothing, takes no room)."""

    impl = TSVECTOR
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        del dialect
        return sql_fold(value[:PG_INDEXED_CHARS]) if value else None

    def bind_expression(self, bindvalue: Any) -> Any:
        return func.to_tsvector(literal_column(f"'{TS_CONFIG}'"), bindvalue)


DEFAULT_TENANT = ""
"""The tenant of a store opened without one, and of every row written before migration 0028."""
TENANT_KEY = "the_tenant"
"""The parameter every scoped statement binds its store's tenant to (`tenancy.scoped` adds it to
each statement's parameters; not `tenant`, the name an INSERT or UPDATE gives the column's own)."""
TENANT = bindparam(TENANT_KEY, type_=String(64))
"""The store's tenant in a statement: `table.c.tenant == TENANT` (see `of_tenant`)."""


def tenant_column(*, primary_key: bool = True) -> Column[str]:
    """The column that says whose a row is (migration 0028): every table has it, first in its
    keys (migration 0030), so that two tenants may hold the same session and node ids."""
    return Column(
        "tenant",
        String(64),
        nullable=False,
        server_default=DEFAULT_TENANT,
        primary_key=primary_key,
    )


def of_tenant(table: Any) -> ColumnElement[bool]:
    """The condition that keeps `table`'s rows (a table or an alias of one) to the store's
    tenant."""
    return table.c.tenant == TENANT  # type: ignore[no-any-return]


def stored_on(column: Column[Any], dialect: str) -> bool:
    """Whether a database of `dialect` has `column` (see `POSTGRESQL_ONLY`)."""
    dialects = column.info.get("dialects")
    return dialects is None or dialect in dialects


def _where(predicate: str) -> dict[str, Any]:
    """The keyword arguments of a partial index, on both databases."""
    return {"sqlite_where": text(predicate), "postgresql_where": text(predicate)}


sessions = Table(
    "sessions",
    metadata,
    tenant_column(),
    Column("id", Id, primary_key=True),
    Column("head", Id, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("title", Text, nullable=True),
    Column("meta", JsonObject, nullable=True),
    Column("importing", Text, nullable=True),
    Column("expires_at", BigInteger, nullable=True),
    Index(None, "importing", **_where("importing IS NOT NULL")),
    Index(None, "expires_at", **_where("expires_at IS NOT NULL")),
)

expiry_defaults = Table(
    "expiry_defaults",
    metadata,
    tenant_column(),
    Column("scope", String(8), primary_key=True),
    Column("tag", Id, primary_key=True),
    Column("after_ms", BigInteger, nullable=False),
    CheckConstraint("scope IN ('store', 'tag')", name="known_scope"),
    CheckConstraint("after_ms >= 0", name="not_negative"),
)

# A keyset page of sessions, most recently updated first (ties by id), reads this index in its
# order from the cursor on, with no sort (migration 0024).
Index(
    "ix_sessions_tenant_updated_at_id",
    sessions.c.tenant,
    sessions.c.updated_at.desc(),
    sessions.c.id,
)

session_tags = Table(
    "session_tags",
    metadata,
    tenant_column(),
    Column("session_id", Id, primary_key=True),
    Column("tag", Id, primary_key=True),
    ForeignKeyConstraint(
        ["tenant", "session_id"], ["sessions.tenant", "sessions.id"], ondelete="CASCADE"
    ),
    Index(None, "tenant", "tag"),
)


nodes = Table(
    "nodes",
    metadata,
    tenant_column(primary_key=False),
    Column("pk", SerialKey, primary_key=True, autoincrement=True),
    Column("session_id", Id, nullable=False),
    Column("id", Id, nullable=False),
    Column("parent_id", Id, nullable=True),
    Column("role", String(32), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("turn_json", Text, nullable=False),
    Column("search_chars", Text, nullable=False, server_default=""),
    Column("search_vector", SearchVector, nullable=True, info=POSTGRESQL_ONLY),
    Column("search_chars_vector", SearchVector, nullable=True, info=POSTGRESQL_ONLY),
    UniqueConstraint("tenant", "session_id", "id"),
    ForeignKeyConstraint(
        ["tenant", "session_id"], ["sessions.tenant", "sessions.id"], ondelete="CASCADE"
    ),
    ForeignKeyConstraint(
        ["tenant", "session_id", "parent_id"],
        ["nodes.tenant", "nodes.session_id", "nodes.id"],
        ondelete="CASCADE",
    ),
    CheckConstraint("parent_id IS NULL OR parent_id <> id", name="not_own_parent"),
    # Partial, so that a lookup by (session_id, id) can only use the unique index (migration
    # 0012): the children of a node, and a session's nodes in the order stored, without a sort
    # (for the statements that say `pk > 0`, see `IN_STORED_ORDER`).
    Index(None, "tenant", "session_id", "parent_id", **_where("parent_id IS NOT NULL")),
    Index(None, "tenant", "session_id", "pk", **_where("pk > 0")),
)

NOT_IMPORTING = and_(sessions.c.tenant == TENANT, sessions.c.importing.is_(None))
"""The condition every read of `sessions` adds: a session of another tenant, or being
imported, is absent."""


def of_visible_session(session_id: ColumnElement[str]) -> ColumnElement[bool]:
    """The condition every read of a session's rows adds: the row is the store's tenant's (when
    `session_id` is a table's column), and its session is not being imported (a set that is
    empty but while an import runs: its partial index finds it at once)."""
    importing = select(sessions.c.id).where(
        sessions.c.tenant == TENANT, sessions.c.importing.is_not(None)
    )
    visible = session_id.not_in(importing)
    table = getattr(session_id, "table", None)
    if table is None:  # a bound session id: the query's tables say whose rows they read
        return visible
    return and_(table.c.tenant == TENANT, visible)


IN_STORED_ORDER = nodes.c.pk > literal_column("0")
"""The condition (always true) that lets a query read a session's nodes in the order stored,
through the partial index `ix_nodes_tenant_session_id_pk`: add it to such queries."""

node_blocks = Table(
    "node_blocks",
    metadata,
    tenant_column(),
    Column("session_id", Id, primary_key=True),
    Column("node_id", Id, primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("kind", Text, nullable=False),
    Column("tool_name", Text, nullable=True),
    Column("call_id", Text, nullable=True),
    Column("is_error", Integer, nullable=True),
    ForeignKeyConstraint(
        ["tenant", "session_id", "node_id"],
        ["nodes.tenant", "nodes.session_id", "nodes.id"],
        ondelete="CASCADE",
    ),
    # The blocks that have a call id, which lookups by call id read (migration 0039, SQLite):
    # an append of a turn without tool calls or results writes no page of it.
    Index(None, "tenant", "session_id", "call_id", sqlite_where=text("call_id IS NOT NULL")),
)

records = Table(
    "records",
    metadata,
    tenant_column(primary_key=False),
    Column("pk", SerialKey, primary_key=True, autoincrement=True),
    Column("session_id", Id, nullable=False),
    Column("kind", String(8), nullable=False),
    Column("node_id", Id, nullable=True),
    Column("raw", Text, nullable=True),
    ForeignKeyConstraint(
        ["tenant", "session_id", "node_id"],
        ["nodes.tenant", "nodes.session_id", "nodes.id"],
        ondelete="CASCADE",
    ),
    ForeignKeyConstraint(
        ["tenant", "session_id"], ["sessions.tenant", "sessions.id"], ondelete="CASCADE"
    ),
    CheckConstraint("kind IN ('append', 'node', 'head', 'other')", name="known_kind"),
    Index(None, "tenant", "session_id", "pk"),
    # A foreign key's referencing columns: deleting a node finds its records by index
    # (migration 0027; without it PostgreSQL read all the session's records per node).
    Index(None, "tenant", "session_id", "node_id"),
)

node_usage = Table(
    "node_usage",
    metadata,
    tenant_column(),
    Column("session_id", Id, primary_key=True),
    Column("node_id", Id, primary_key=True),
    Column("provider", Text, nullable=True),
    Column("model", Text, nullable=True),
    Column("input_tokens", BigInteger, nullable=True),
    Column("output_tokens", BigInteger, nullable=True),
    Column("cache_read_tokens", BigInteger, nullable=True),
    Column("cache_write_tokens", BigInteger, nullable=True),
    Column("cost_usd", Float, nullable=True),
    ForeignKeyConstraint(
        ["tenant", "session_id", "node_id"],
        ["nodes.tenant", "nodes.session_id", "nodes.id"],
        ondelete="CASCADE",
    ),
    # The copies of one node's usage in several sessions (forks), an earlier one found by
    # index: usage by model or day counts each model call once (migration 0027).
    Index(None, "tenant", "node_id", "session_id"),
)

node_keys = Table(
    "node_keys",
    metadata,
    tenant_column(),
    Column("session_id", Id, primary_key=True),
    Column("key", Id, primary_key=True),
    Column("node_id", Id, nullable=False),
    ForeignKeyConstraint(
        ["tenant", "session_id", "node_id"],
        ["nodes.tenant", "nodes.session_id", "nodes.id"],
        ondelete="CASCADE",
    ),
    # The foreign key's columns, as in `records`; partial, so that only a statement naming a
    # node (the foreign key's cascade) reads it: on tables never analyzed PostgreSQL found it as
    # good as the primary key for a lookup by session and key, read all of the session's keys
    # through it and filtered them (migration 0040).
    Index(None, "tenant", "session_id", "node_id", **_where("node_id IS NOT NULL")),
)

erasures = Table(
    "erasures",
    metadata,
    tenant_column(primary_key=False),
    Column("id", SerialKey, primary_key=True, autoincrement=True),
    Column("erased_at", BigInteger, nullable=False),
    Column("scope", String(8), nullable=False),
    Column("target", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("sessions_deleted", Integer, nullable=False),
    Column("nodes_erased", Integer, nullable=False),
    Column("summaries_erased", Integer, nullable=False),
    Column("targets_json", Text, nullable=False),
    CheckConstraint("scope IN ('session', 'node', 'subject')", name="known_scope"),
    Index(None, "tenant", "erased_at"),
)

pruned_usage = Table(
    "pruned_usage",
    metadata,
    tenant_column(primary_key=False),
    Column("pk", SerialKey, primary_key=True, autoincrement=True),
    Column("session_id", Id, nullable=False),
    Column("day", String(10), nullable=False),
    Column("provider", Text, nullable=True),
    Column("model", Text, nullable=True),
    Column("counted", Integer, nullable=False),
    Column("calls", BigInteger, nullable=False),
    *(Column(name, BigInteger, nullable=True) for name in ("input_tokens", "output_tokens")),
    *(Column(f"cache_{name}_tokens", BigInteger, nullable=True) for name in ("read", "write")),
    Column("cost_usd", Float, nullable=True),
    ForeignKeyConstraint(
        ["tenant", "session_id"], ["sessions.tenant", "sessions.id"], ondelete="CASCADE"
    ),
    Index(None, "tenant", "session_id"),
)

summary_subjects = Table(
    "summary_subjects",
    metadata,
    tenant_column(),
    Column("session_id", Id, primary_key=True),
    Column("node_id", Id, primary_key=True),
    Column("subject_hash", String(64), primary_key=True),
    ForeignKeyConstraint(
        ["tenant", "session_id", "node_id"],
        ["nodes.tenant", "nodes.session_id", "nodes.id"],
        ondelete="CASCADE",
    ),
    Index(None, "tenant", "subject_hash"),
)

# SQLite's full-text index, for the statements that fill and query it (its rowid is `nodes.pk`).
nodes_fts = table("nodes_fts", column("rowid"), column("search_text"))
nodes_fts_chars = table("nodes_fts_chars", column("rowid"), column("search_chars"))
# The nodes small writes added that `nodes_fts` does not hold yet (migration 0019).
nodes_fts_backlog = table("nodes_fts_backlog", column("pk"))
# SQLite's view of each node's search text, derived from `turn_json` (migration 0016).
node_search = table(
    "node_search", column("tenant"), column("pk"), column("session_id"), column("search_text")
)
