"""Initial schema: sessions, session_tags, nodes and the records log.

Revision ID: 0001
Revises:
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SERIAL = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSON_OBJECT = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(length=255), nullable=False),
        sa.Column("head", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("meta", JSON_OBJECT, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
    )
    op.create_table(
        "nodes",
        sa.Column("pk", SERIAL, autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=255), nullable=False),
        sa.Column("id", sa.String(length=255), nullable=False),
        sa.Column("parent_id", sa.String(length=255), nullable=True),
        sa.Column("role", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("turn_json", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "parent_id IS NULL OR parent_id <> id", name=op.f("ck_nodes_not_own_parent")
        ),
        sa.ForeignKeyConstraint(
            ["session_id", "parent_id"],
            ["nodes.session_id", "nodes.id"],
            name=op.f("fk_nodes_session_id_parent_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_nodes_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_nodes")),
        sa.UniqueConstraint("session_id", "id", name=op.f("uq_nodes_session_id_id")),
    )
    op.create_index(op.f("ix_nodes_session_id_parent_id"), "nodes", ["session_id", "parent_id"])
    op.create_table(
        "session_tags",
        sa.Column("session_id", sa.String(length=255), nullable=False),
        sa.Column("tag", sa.String(length=255), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_session_tags_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "tag", name=op.f("pk_session_tags")),
    )
    op.create_index(op.f("ix_session_tags_tag"), "session_tags", ["tag"])
    op.create_table(
        "records",
        sa.Column("pk", SERIAL, autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("node_id", sa.String(length=255), nullable=True),
        sa.Column("raw", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "kind IN ('append', 'node', 'head', 'other')", name=op.f("ck_records_known_kind")
        ),
        sa.ForeignKeyConstraint(
            ["session_id", "node_id"],
            ["nodes.session_id", "nodes.id"],
            name=op.f("fk_records_session_id_node_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_records_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_records")),
    )
    op.create_index(op.f("ix_records_session_id_pk"), "records", ["session_id", "pk"])


def downgrade() -> None:
    op.drop_table("records")
    op.drop_table("session_tags")
    op.drop_table("nodes")
    op.drop_table("sessions")
