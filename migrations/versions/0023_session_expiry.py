"""Sessions that expire: `sessions.expires_at` (epoch ms, NULL: no expiry of its own) with a
partial index, and `expiry_defaults`, how long after its last update a session without one
expires (a row for the store, one per tag). `memstore prune --expired` deletes what expired.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NOT_NULL = "expires_at IS NOT NULL"


def upgrade() -> None:
    op.add_column("sessions", sa.Column("expires_at", sa.BigInteger(), nullable=True))
    op.create_index(
        op.f("ix_sessions_expires_at"),
        "sessions",
        ["expires_at"],
        sqlite_where=sa.text(NOT_NULL),
        postgresql_where=sa.text(NOT_NULL),
    )
    op.create_table(
        "expiry_defaults",
        sa.Column("scope", sa.String(8), nullable=False),
        sa.Column("tag", sa.String(255), nullable=False),
        sa.Column("after_ms", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "scope IN ('store', 'tag')", name=op.f("ck_expiry_defaults_known_scope")
        ),
        sa.CheckConstraint("after_ms >= 0", name=op.f("ck_expiry_defaults_not_negative")),
        sa.PrimaryKeyConstraint("scope", "tag", name=op.f("pk_expiry_defaults")),
    )


def downgrade() -> None:
    op.drop_table("expiry_defaults")
    op.drop_index(op.f("ix_sessions_expires_at"), table_name="sessions")
    op.drop_column("sessions", "expires_at")  # SQLite's own DROP COLUMN: no table copy
