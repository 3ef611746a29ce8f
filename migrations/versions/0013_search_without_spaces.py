"""Search inside text written without spaces (Chinese, Japanese, Thai, ...): `nodes.search_chars`
holds the words of such scripts with each of their characters a word of its own, indexed for
phrase queries (SQLite: the contentless FTS5 table `nodes_fts_chars`, filled by the store, kept by
triggers on delete and update; PostgreSQL: a partial GIN expression index).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memstore.store.rows import search_chars

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DELETE_OLD = """INSERT INTO nodes_fts_chars(nodes_fts_chars, rowid, search_chars)
        VALUES ('delete', old.pk, old.search_chars)"""
_INSERT_NEW = "INSERT INTO nodes_fts_chars(rowid, search_chars) VALUES (new.pk, new.search_chars)"
SQLITE_SEARCH = [
    "CREATE VIRTUAL TABLE nodes_fts_chars USING fts5(search_chars, content='')",
    f"""CREATE TRIGGER nodes_fts_chars_delete AFTER DELETE ON nodes
    WHEN old.search_chars <> '' BEGIN
        {_DELETE_OLD};
    END""",
    f"""CREATE TRIGGER nodes_fts_chars_update_old AFTER UPDATE OF search_chars ON nodes
    WHEN old.search_chars <> '' BEGIN
        {_DELETE_OLD};
    END""",
    f"""CREATE TRIGGER nodes_fts_chars_update_new AFTER UPDATE OF search_chars ON nodes
    WHEN new.search_chars <> '' BEGIN
        {_INSERT_NEW};
    END""",
    "INSERT INTO nodes_fts_chars(rowid, search_chars) "
    "SELECT pk, search_chars FROM nodes WHERE search_chars <> ''",
]
POSTGRES_SEARCH = [
    "CREATE INDEX ix_nodes_search_chars ON nodes USING gin (to_tsvector('simple', search_chars)) "
    "WHERE search_chars <> ''",
]


def _backfill() -> None:
    """Derive `search_chars` for the nodes stored before this revision that need it."""
    bind = op.get_bind()
    nodes = sa.table("nodes", sa.column("pk"), sa.column("search_text"), sa.column("search_chars"))
    update = (
        nodes.update()
        .where(nodes.c.pk == sa.bindparam("row_pk"))
        .values(search_chars=sa.bindparam("chars"))
    )
    rows = bind.execute(sa.select(nodes.c.pk, nodes.c.search_text).order_by(nodes.c.pk))
    for batch in rows.partitions(1000):
        changed = [{"row_pk": pk, "chars": search_chars(text)} for pk, text in batch]
        changed = [row for row in changed if row["chars"]]
        if changed:
            bind.execute(update, changed)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.add_column("nodes", sa.Column("search_chars", sa.Text(), nullable=False, server_default=""))
    _backfill()
    for statement in POSTGRES_SEARCH if dialect == "postgresql" else SQLITE_SEARCH:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_nodes_search_chars")
    else:
        for trigger in ("delete", "update_old", "update_new"):
            op.execute(f"DROP TRIGGER nodes_fts_chars_{trigger}")
        op.execute("DROP TABLE nodes_fts_chars")
    op.drop_column("nodes", "search_chars")  # SQLite's own DROP COLUMN: no table copy
