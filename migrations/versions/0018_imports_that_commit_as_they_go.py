"""Imports that commit as they go: `sessions.importing` names the process importing a new session
(SQLite commits such an import in chunks, so that other writers wait one chunk, not the whole
file), and until it is cleared every read treats the session as absent. The views leave such
sessions out: each becomes a filter over `<view>_all`, which is the view as it was (all rows).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04
"""

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VIEWS = ("blocks", "turns", "tool_calls", "session_stats", "session_sources")
VISIBLE = "session_id NOT IN (SELECT id FROM sessions WHERE importing IS NOT NULL)"
_CREATE_VIEW = re.compile(r"^\s*CREATE\s+VIEW\s+\S+\s+AS(?=\s)", re.IGNORECASE)


def _definition(view: str) -> str:
    """The SELECT a view runs, read back from the database's catalog (with the white space
    before it, so that a view made again is written as it was)."""
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        query = sa.text("SELECT sql FROM sqlite_master WHERE type = 'view' AND name = :name")
        return _CREATE_VIEW.sub("", bind.execute(query, {"name": view}).scalar_one(), count=1)
    query = sa.text("SELECT pg_get_viewdef(CAST(:name AS regclass), true)")
    return str(bind.execute(query, {"name": view}).scalar_one()).rstrip().rstrip(";")


def _replace(view: str, select: str) -> None:
    """Make `view` run `select`; PostgreSQL keeps the view (and what was granted on it)."""
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"DROP VIEW {view}")
        op.execute(f"CREATE VIEW {view} AS{select}")
    else:
        op.execute(f"CREATE OR REPLACE VIEW {view} AS{select}")


def upgrade() -> None:
    op.add_column("sessions", sa.Column("importing", sa.Text(), nullable=True))
    op.create_index(
        "ix_sessions_importing",
        "sessions",
        ["importing"],
        sqlite_where=sa.text("importing IS NOT NULL"),
        postgresql_where=sa.text("importing IS NOT NULL"),
    )
    for view in VIEWS:
        op.execute(f"CREATE VIEW {view}_all AS{_definition(view)}")
        _replace(view, f" SELECT * FROM {view}_all WHERE {VISIBLE}")


def downgrade() -> None:
    for view in VIEWS:
        _replace(view, _definition(f"{view}_all"))
        op.execute(f"DROP VIEW {view}_all")
    op.drop_index("ix_sessions_importing", table_name="sessions")
    op.drop_column("sessions", "importing")  # SQLite's own DROP COLUMN: no table copy
