"""Make the two other indexes of `nodes` that start with `session_id` partial, so that looking a
node up by (session_id, id) can only use the unique index.

A lookup by key (the parent and duplicate checks, the foreign key checks, each step of a path
walk) could use any index that starts with `session_id`, filtering the session's rows on `id`.
PostgreSQL's planner picks between them by estimated cost, and when its statistics say the
session is empty or the table small (a new session, a table analyzed while small, or never
analyzed) the costs tie and the smaller `(session_id, pk)` index often won: every lookup then
read the whole session. A partial index serves only the statements whose conditions imply its
predicate: `(session_id, pk) WHERE pk > 0` the ordered reads of a session, which say `pk > 0`,
and `(session_id, parent_id) WHERE parent_id IS NOT NULL` the lookups of a node's children
(roots need no entry). Neither can serve a lookup by id, whatever the statistics say.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PARTIAL = {("session_id", "pk"): "pk > 0", ("session_id", "parent_id"): "parent_id IS NOT NULL"}


def _recreate(partial: bool) -> None:
    for columns, predicate in PARTIAL.items():
        name = op.f(f"ix_nodes_{'_'.join(columns)}")
        op.drop_index(name, table_name="nodes")
        where = sa.text(predicate) if partial else None
        op.create_index(name, "nodes", list(columns), sqlite_where=where, postgresql_where=where)


def upgrade() -> None:
    _recreate(partial=True)


def downgrade() -> None:
    _recreate(partial=False)
