"""The `node_keys` table: a key a writer gave a node (a Claude Agent SDK entry's `uuid`), unique
in its session, so that an append skips the turns whose keys the session holds by looking them
up in this table's primary key, inside its writing transaction: the cost of an append no longer
grows with the session, and concurrent appends of the same entries store each once.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "node_keys",
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("node_id", sa.String(255), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id", "node_id"],
            ["nodes.session_id", "nodes.id"],
            name=op.f("fk_node_keys_session_id_node_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "key", name=op.f("pk_node_keys")),
    )


def downgrade() -> None:
    op.drop_table("node_keys")
