"""What each conversation cost, and sessions listed a page at a time: the `usage` view (one row
per node whose model call's usage is known: the node's session, time, day (UTC) and role, the
provider, model, tokens and US dollars), and an index of sessions by (updated_at DESC, id), the
order of `sessions(...)`, which a keyset page reads from its cursor on with no sort.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DAY = {
    "sqlite": "date(n.created_at / 1000, 'unixepoch')",
    "postgresql": "to_char(to_timestamp(n.created_at / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
}
USAGE = """CREATE VIEW usage AS
SELECT u.session_id, u.node_id, n.parent_id, n.role, n.created_at, {day} AS day,
       u.provider, u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens,
       u.cache_write_tokens, u.cost_usd
FROM node_usage AS u
JOIN nodes AS n ON n.session_id = u.session_id AND n.id = u.node_id
WHERE u.session_id NOT IN (SELECT id FROM sessions WHERE importing IS NOT NULL)
"""


def upgrade() -> None:
    dialect = "postgresql" if op.get_bind().dialect.name == "postgresql" else "sqlite"
    op.execute(USAGE.format(day=DAY[dialect]))
    op.create_index("ix_sessions_updated_at_id", "sessions", [sa.text("updated_at DESC"), "id"])


def downgrade() -> None:
    op.drop_index("ix_sessions_updated_at_id", table_name="sessions")
    op.execute("DROP VIEW usage")
