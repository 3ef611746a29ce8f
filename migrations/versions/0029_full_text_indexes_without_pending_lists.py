"""PostgreSQL's full-text indexes take each new turn's words straight into their trees
(`fastupdate = off` on `ix_nodes_search` and `ix_nodes_search_chars`), rather than into a
pending list that a later insert merges: the pages a merged list leaves are reused only after a
VACUUM, so an index grown one append at a time took about seven times the room of one built at
once, and every search read the list still pending. The lists pending when this revision runs
are merged into the trees. SQLite's FTS5 is unchanged.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = ("ix_nodes_search", "ix_nodes_search_chars")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for index in INDEXES:
            op.execute(f"ALTER INDEX {index} SET (fastupdate = off)")
            op.execute(f"SELECT gin_clean_pending_list('{index}'::regclass)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for index in INDEXES:
            op.execute(f"ALTER INDEX {index} RESET (fastupdate)")
