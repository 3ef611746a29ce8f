"""SQLite: the index of `node_blocks`' call ids holds the blocks that have one (issue 33).

`ix_node_blocks_tenant_session_id_call_id` held every block, most of them (text, thinking,
images) without a call id: each append wrote a page of it while SQLite's writer lock was held,
for entries no lookup reads (a lookup by call id compares it with `=`, which a NULL never
equals). It is now partial, `WHERE call_id IS NOT NULL`: a turn without tool calls or results
writes nothing in it, one page fewer per append. The lookups by call id (the `tool_calls` view's
join of a result to its call, `blocks` filtered by call id) read it as before; a session's blocks
(its stats' counts, deleting them) are found by the primary key's index, as a node's are.

Tried and not kept: `node_blocks` as a WITHOUT ROWID table (the rows in the key's B-tree, half a
page fewer per append): without statistics SQLite's planner then found a result's call by
scanning the session's blocks, not by this index.

PostgreSQL: nothing. The downgrade makes the index whole again.

Revision ID: 0039
Revises: 0038
Create Date: 2026-12-07
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0039"
down_revision: str | None = "0038"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_node_blocks_tenant_session_id_call_id"
WHOLE = f"CREATE INDEX {INDEX} ON node_blocks (tenant, session_id, call_id)"
PARTIAL = f"{WHOLE} WHERE call_id IS NOT NULL"


def _make(definition: str) -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"DROP INDEX {INDEX}")
        op.execute(definition)


def upgrade() -> None:
    _make(PARTIAL)


def downgrade() -> None:
    _make(WHOLE)
