"""SQLite's full-text index is filled by the store, a statement per batch of new nodes, instead
of by an insert trigger (which made FTS5 flush and merge a segment per node). The delete and
update triggers stay. PostgreSQL's search index is an expression index: nothing changes there.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INSERT_TRIGGER = """CREATE TRIGGER nodes_fts_insert AFTER INSERT ON nodes BEGIN
    INSERT INTO nodes_fts(rowid, search_text) VALUES (new.pk, new.search_text);
END"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER nodes_fts_insert")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(INSERT_TRIGGER)
