"""PostgreSQL's search reads stored vectors, folded in Python as they are written: the columns
`nodes.search_vector` and `nodes.search_chars_vector` hold the tsvectors of `search_text` and
`search_chars` (their first 250,000 characters, folded as `memstore.store.folding.sql_fold`
folds; NULL for an empty text), under plain GIN indexes. Before, the indexes were expressions
over `memstore_search_fold` (migration 0020), which ran in SQL on every write, and the search
ranked each match by folding its text again (a word in every session: 0.85 s before 0020, 2.9 s
with it). The store fills the columns (`memstore.store.tables.SearchVector`); this revision
fills them for the rows stored before it, with the function once. SQLite's FTS5 is unchanged.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# 250000 is memstore.store.tables.PG_INDEXED_CHARS when this revision was written; the vectors
# are what migration 0020's index expressions computed, so the store's search finds the same.
_VECTOR = "to_tsvector('simple', memstore_search_fold(left({column}, 250000)))"
UPGRADE = (
    "ALTER TABLE nodes ADD COLUMN search_vector tsvector, ADD COLUMN search_chars_vector tsvector",
    "UPDATE nodes SET "
    f"search_vector = CASE WHEN search_text <> '' THEN {_VECTOR.format(column='search_text')} END, "
    "search_chars_vector = CASE WHEN search_chars <> '' "
    f"THEN {_VECTOR.format(column='search_chars')} END",
    "DROP INDEX ix_nodes_search",
    "CREATE INDEX ix_nodes_search ON nodes USING gin (search_vector)",
    "DROP INDEX ix_nodes_search_chars",
    "CREATE INDEX ix_nodes_search_chars ON nodes USING gin (search_chars_vector) "
    "WHERE search_chars_vector IS NOT NULL",
)
DOWNGRADE = (
    "DROP INDEX ix_nodes_search_chars",
    "DROP INDEX ix_nodes_search",
    "ALTER TABLE nodes DROP COLUMN search_chars_vector, DROP COLUMN search_vector",
    "CREATE INDEX ix_nodes_search ON nodes "
    "USING gin (to_tsvector('simple', memstore_search_fold(left(search_text, 250000))))",
    "CREATE INDEX ix_nodes_search_chars ON nodes "
    "USING gin (to_tsvector('simple', memstore_search_fold(left(search_chars, 250000)))) "
    "WHERE search_chars <> ''",
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in DOWNGRADE:
            op.execute(statement)
