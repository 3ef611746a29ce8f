"""The `node_usage` table: what the model call behind an imported node cost (provider, model,
tokens, US dollars), filled by the pi and Claude Code importers; and the `session_sources` view:
which agent each session came from (`memstore` for native ones), its directory, model, parent
session, and its usage totals.

Revision ID: 0011
Revises: 0004
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


META = {
    "sqlite": "json_extract(s.meta, '$.{key}')",
    "postgresql": "(s.meta ->> '{key}')",
}
SESSION_SOURCES = """
CREATE VIEW session_sources AS
SELECT s.id AS session_id, coalesce({agent}, 'memstore') AS agent, {cwd} AS cwd,
       coalesce({model_id}, {model}) AS model, {parent} AS parent_session,
       (SELECT sum(u.input_tokens) FROM node_usage AS u WHERE u.session_id = s.id)
           AS input_tokens,
       (SELECT sum(u.output_tokens) FROM node_usage AS u WHERE u.session_id = s.id)
           AS output_tokens,
       (SELECT sum(u.cost_usd) FROM node_usage AS u WHERE u.session_id = s.id) AS cost_usd
FROM sessions AS s
"""


def _session_sources(dialect: str) -> str:
    meta = META["postgresql" if dialect == "postgresql" else "sqlite"]
    keys = {"agent": "agent", "cwd": "cwd", "model_id": "modelId", "model": "model"}
    fields = {name: meta.format(key=key) for name, key in keys.items()}
    return SESSION_SOURCES.format(parent=meta.format(key="parentSession"), **fields)


def upgrade() -> None:
    op.create_table(
        "node_usage",
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("node_id", sa.String(255), nullable=False),
        sa.Column("provider", sa.Text(), nullable=True),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("output_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id", "node_id"],
            ["nodes.session_id", "nodes.id"],
            name=op.f("fk_node_usage_session_id_node_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "node_id", name=op.f("pk_node_usage")),
    )
    op.execute(_session_sources(op.get_bind().dialect.name))


def downgrade() -> None:
    op.execute("DROP VIEW session_sources")
    op.drop_table("node_usage")
