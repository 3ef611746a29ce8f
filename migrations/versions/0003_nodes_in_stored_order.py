"""Index a session's nodes in the order stored, so loading a session reads them without a sort.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(op.f("ix_nodes_session_id_pk"), "nodes", ["session_id", "pk"])


def downgrade() -> None:
    op.drop_index(op.f("ix_nodes_session_id_pk"), table_name="nodes")
