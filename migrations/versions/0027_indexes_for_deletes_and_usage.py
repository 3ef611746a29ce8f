"""Indexes that deletes and usage totals need: `records (session_id, node_id)` and
`node_keys (session_id, node_id)`, the referencing columns of their foreign keys to `nodes`, so
that deleting a node finds its records and keys by index (without them, deleting a session of
30,000 nodes on PostgreSQL read every record of the session once per node: minutes); and
`node_usage (node_id, session_id)`, so that usage totalled by model or by day counts a node that
forks copied once by looking up an earlier copy of each row by index.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = (
    ("records", ("session_id", "node_id")),
    ("node_keys", ("session_id", "node_id")),
    ("node_usage", ("node_id", "session_id")),
)


def upgrade() -> None:
    for table, columns in INDEXES:
        op.create_index(op.f(f"ix_{table}_{'_'.join(columns)}"), table, list(columns))


def downgrade() -> None:
    for table, columns in reversed(INDEXES):
        op.drop_index(op.f(f"ix_{table}_{'_'.join(columns)}"), table_name=table)
