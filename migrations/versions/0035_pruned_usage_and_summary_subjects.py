"""What a prune deletes leaves two things behind: the usage of the deleted nodes' model calls, and,
for a summary that survives its condensed turns, what erasure by subject needs to still reach it.

- `pruned_usage`: per session, day (UTC), provider and model, the summed tokens and dollars of
  the `node_usage` rows a prune deleted with a branch of a session it kept (`calls`: how many
  rows; `counted`: 0 where a copy of those calls stays in another session, which totals by model
  or day count instead). The `usage` view adds its rows (no node, parent, role or time; their
  day) and a column `calls` (1 for a node's row), so that a session's totals are the same before
  and after a prune. A session deleted whole takes its rows with it.
- `summary_subjects`: for a summary (a node recording `memstore.condensed`) whose condensed
  turns a prune deleted, the sha256 of each top-level `key: value` field of those turns
  (`subject_hash`), so that `erase(subject=...)` still finds the summary; no plaintext.

Both have the tenant first in their keys and, on PostgreSQL, row-level security with the
`memstore_tenant` policy (0031); the view stays `security_invoker` (PostgreSQL 15). The
downgrade drops both tables, with their rows (the older schema has no place for them), and
gives the `usage` view back its earlier definition.

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memstore.store.revision_scripts import revision_module

revision: str = "0035"
down_revision: str | None = "0034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

POLICY = "memstore_tenant"
NEW_TABLES = ("pruned_usage", "summary_subjects")
VISIBLE = "NOT IN (SELECT tenant, id FROM sessions WHERE importing IS NOT NULL)"
USAGE = f"""CREATE VIEW usage AS
SELECT u.tenant, u.session_id, u.node_id, n.parent_id, n.role, n.created_at, {{day}} AS day,
       u.provider, u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens,
       u.cache_write_tokens, u.cost_usd, 1 AS calls
FROM node_usage AS u
JOIN nodes AS n ON n.tenant = u.tenant AND n.session_id = u.session_id AND n.id = u.node_id
WHERE (u.tenant, u.session_id) {VISIBLE}
UNION ALL
SELECT p.tenant, p.session_id, NULL, NULL, NULL, NULL, p.day,
       p.provider, p.model, p.input_tokens, p.output_tokens, p.cache_read_tokens,
       p.cache_write_tokens, p.cost_usd, p.calls
FROM pruned_usage AS p
WHERE (p.tenant, p.session_id) {VISIBLE}
"""


def _dialect() -> str:
    return "postgresql" if op.get_bind().dialect.name == "postgresql" else "sqlite"


def _invoker() -> bool:
    """Whether views are made `security_invoker` (PostgreSQL 15 or later, as 0031 does)."""
    version = op.get_bind().dialect.server_version_info or (0,)
    return _dialect() == "postgresql" and version >= (15,)


def _replace_usage(statement: str) -> None:
    op.execute("DROP VIEW usage")
    op.execute(statement)
    if _invoker():
        op.execute("ALTER VIEW usage SET (security_invoker = true)")


def _tenant_column() -> sa.Column[str]:
    return sa.Column("tenant", sa.String(64), nullable=False, server_default="")


def upgrade() -> None:
    op.create_table(
        "pruned_usage",
        _tenant_column(),
        sa.Column("pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("day", sa.String(10), nullable=False),
        sa.Column("provider", sa.Text(), nullable=True),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("counted", sa.Integer(), nullable=False),
        sa.Column("calls", sa.BigInteger(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("output_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant", "session_id"],
            ["sessions.tenant", "sessions.id"],
            name="fk_pruned_usage_tenant_session_id_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name="pk_pruned_usage"),
    )
    op.create_index("ix_pruned_usage_tenant_session_id", "pruned_usage", ["tenant", "session_id"])
    op.create_table(
        "summary_subjects",
        _tenant_column(),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("node_id", sa.String(255), nullable=False),
        sa.Column("subject_hash", sa.String(64), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant", "session_id", "node_id"],
            ["nodes.tenant", "nodes.session_id", "nodes.id"],
            name="fk_summary_subjects_tenant_session_id_nodes",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "tenant", "session_id", "node_id", "subject_hash", name="pk_summary_subjects"
        ),
    )
    op.create_index(
        "ix_summary_subjects_tenant_subject_hash", "summary_subjects", ["tenant", "subject_hash"]
    )
    if _dialect() == "postgresql":
        for table in NEW_TABLES:
            op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
            op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
            op.execute(
                f"CREATE POLICY {POLICY} ON {table} "
                "USING (tenant = memstore_tenant()) WITH CHECK (tenant = memstore_tenant())"
            )
    day = revision_module("0024").DAY[_dialect()]
    _replace_usage(USAGE.format(day=day))


def downgrade() -> None:
    earlier = revision_module("0030")
    usage = revision_module("0024")
    _replace_usage(earlier._tenant_view(usage.USAGE.format(day=usage.DAY[_dialect()])))
    op.drop_table("summary_subjects")  # its index and policy go with it
    op.drop_table("pruned_usage")
