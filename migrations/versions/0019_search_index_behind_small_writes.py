"""SQLite's full-text index takes small writes in batches: `nodes_fts_backlog` lists the nodes a
write of fewer than `SEARCH_BACKLOG` nodes added without indexing them (FTS5 costs a commit about
150 us whatever it adds: a new segment, its structure and averages records); the write that fills
the backlog indexes it all at once, and searches index it first (a read-only store searches it in
memory). The index's delete and update triggers leave backlog nodes alone (they are not in the
index), the delete trigger takes a deleted node off the backlog, and one given another key keeps
its place in it. PostgreSQL's index is an expression index, current with every write: nothing
changes there.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04
"""

import runpy
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The search text's SQL expression, as revision 0016 wrote it into the triggers.
_0016 = runpy.run_path(str(Path(__file__).with_name("0016_sqlite_stores_a_turn_once.py")))
search_text_sql = _0016["search_text_sql"]
OLD_TRIGGERS = _0016["SEARCH"][3:5]  # nodes_fts_delete, nodes_fts_update

NOT_IN_BACKLOG = "NOT EXISTS (SELECT 1 FROM nodes_fts_backlog WHERE pk = {row}.pk)"
TRIGGERS = [
    f"""CREATE TRIGGER nodes_fts_delete AFTER DELETE ON nodes BEGIN
        INSERT INTO nodes_fts(nodes_fts, rowid, search_text)
        SELECT 'delete', old.pk, {search_text_sql("old.turn_json")}
        WHERE {NOT_IN_BACKLOG.format(row="old")};
        DELETE FROM nodes_fts_backlog WHERE pk = old.pk;
    END""",
    f"""CREATE TRIGGER nodes_fts_update AFTER UPDATE OF turn_json ON nodes
    WHEN {NOT_IN_BACKLOG.format(row="old")} BEGIN
        INSERT INTO nodes_fts(nodes_fts, rowid, search_text)
        VALUES ('delete', old.pk, {search_text_sql("old.turn_json")});
        INSERT INTO nodes_fts(rowid, search_text)
        VALUES (new.pk, {search_text_sql("new.turn_json")});
    END""",
]
# A node given another key (nothing in memstore does; a test stores nodes in reverse order) keeps
# its place in the backlog, which a node given its old key must not inherit.
FOLLOW_KEY = """CREATE TRIGGER nodes_fts_backlog_key AFTER UPDATE OF pk ON nodes BEGIN
        UPDATE nodes_fts_backlog SET pk = new.pk WHERE pk = old.pk;
    END"""
INDEX_BACKLOG = """INSERT INTO nodes_fts (rowid, search_text)
SELECT pk, search_text FROM node_search WHERE pk IN (SELECT pk FROM nodes_fts_backlog)"""


def _drop_triggers() -> None:
    for trigger in ("delete", "update"):
        op.execute(f"DROP TRIGGER nodes_fts_{trigger}")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute("CREATE TABLE nodes_fts_backlog (pk INTEGER PRIMARY KEY)")
    _drop_triggers()
    for statement in [*TRIGGERS, FOLLOW_KEY]:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(INDEX_BACKLOG)
    _drop_triggers()
    op.execute("DROP TRIGGER nodes_fts_backlog_key")
    op.execute("DROP TABLE nodes_fts_backlog")
    for statement in OLD_TRIGGERS:
        op.execute(statement)
