"""Erasure receipts: `erasures`, one row per `erase` (when, what scope and target, the sessions
and nodes it reached, counts, the caller's reason; never the content erased).

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "erasures",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("erased_at", sa.BigInteger(), nullable=False),
        sa.Column("scope", sa.String(8), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("sessions_deleted", sa.Integer(), nullable=False),
        sa.Column("nodes_erased", sa.Integer(), nullable=False),
        sa.Column("summaries_erased", sa.Integer(), nullable=False),
        sa.Column("targets_json", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "scope IN ('session', 'node', 'subject')", name=op.f("ck_erasures_known_scope")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_erasures")),
    )
    op.create_index(op.f("ix_erasures_erased_at"), "erasures", ["erased_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_erasures_erased_at"), table_name="erasures")
    op.drop_table("erasures")
