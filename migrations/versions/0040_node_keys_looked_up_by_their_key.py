"""`node_keys`' index for its foreign key becomes partial, `WHERE node_id IS NOT NULL` (issue 32).

A keyed append (`append_keyed`: the Claude Agent SDK's entries, by `uuid`) looks each key up by
`(tenant, session_id, key)`, the primary key. On tables PostgreSQL never analyzed, the planner
found the foreign key's index `(tenant, session_id, node_id)` as good (it knows no tenant or
session to be common), read every key of the session through it and filtered by `key`: 8.8 ms a
lookup at 22,000 entries, so appends grew with the session (an import of 22,000 entries through
the SDK took 132 s, 4 s on SQLite). Every row has a node, so the partial index holds the same
entries; only a statement that names a node (the foreign key's checks and cascades) may read it,
as `nodes`' other indexes serve only the statements that say `pk > 0` or name a parent
(migration 0012). SQLite's planner already chose the primary key; the index changes there too,
so that the models are the same on both.

Revision ID: 0040
Revises: 0039
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0040"
down_revision: str | None = "0039"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_node_keys_tenant_session_id_node_id"
COLUMNS = ["tenant", "session_id", "node_id"]
PREDICATE = "node_id IS NOT NULL"


def _make(partial: bool) -> None:
    op.drop_index(INDEX, table_name="node_keys")
    if partial:
        where = sa.text(PREDICATE)
        op.create_index(INDEX, "node_keys", COLUMNS, sqlite_where=where, postgresql_where=where)
    else:
        op.create_index(INDEX, "node_keys", COLUMNS)


def upgrade() -> None:
    _make(partial=True)


def downgrade() -> None:
    _make(partial=False)
