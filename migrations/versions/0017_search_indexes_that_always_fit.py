"""PostgreSQL search indexes that hold any turn: a tsvector cannot exceed 1 MiB, so the GIN
indexes cover the first 250,000 characters of `search_text` and `search_chars` (4 bytes a
character at most: it always fits), and a partial index lists the longer turns, which search
matches by substring (see `memstore.store.search`). SQLite's FTS5 has no such limit: nothing
changes there.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The number is memstore.store.search.PG_INDEXED_CHARS when this revision was written; the
# search's expressions must match these indexes' exactly for PostgreSQL to use them.
UPGRADE = (
    "DROP INDEX ix_nodes_search",
    "CREATE INDEX ix_nodes_search ON nodes "
    "USING gin (to_tsvector('simple', left(search_text, 250000)))",
    "DROP INDEX ix_nodes_search_chars",
    "CREATE INDEX ix_nodes_search_chars ON nodes "
    "USING gin (to_tsvector('simple', left(search_chars, 250000))) WHERE search_chars <> ''",
    "CREATE INDEX ix_nodes_search_oversized ON nodes (pk) "
    "WHERE length(search_text) > 250000 OR length(search_chars) > 250000",
)
DOWNGRADE = (
    "DROP INDEX ix_nodes_search_oversized",
    "DROP INDEX ix_nodes_search_chars",
    "CREATE INDEX ix_nodes_search_chars ON nodes USING gin (to_tsvector('simple', search_chars)) "
    "WHERE search_chars <> ''",
    "DROP INDEX ix_nodes_search",
    "CREATE INDEX ix_nodes_search ON nodes USING gin (to_tsvector('simple', search_text))",
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in DOWNGRADE:
            op.execute(statement)
