"""Query surface: every block as a row (node_blocks), search text on nodes, full-text indexes,
and the turns/blocks/tool_calls/session_stats views (the same on SQLite and PostgreSQL).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memstore import jsjson
from memstore.store.rows import block_rows, search_text

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SQLITE_SEARCH = [
    "CREATE VIRTUAL TABLE nodes_fts USING fts5(search_text, content='nodes', content_rowid='pk')",
    """CREATE TRIGGER nodes_fts_insert AFTER INSERT ON nodes BEGIN
        INSERT INTO nodes_fts(rowid, search_text) VALUES (new.pk, new.search_text);
    END""",
    """CREATE TRIGGER nodes_fts_delete AFTER DELETE ON nodes BEGIN
        INSERT INTO nodes_fts(nodes_fts, rowid, search_text)
        VALUES ('delete', old.pk, old.search_text);
    END""",
    """CREATE TRIGGER nodes_fts_update AFTER UPDATE OF search_text ON nodes BEGIN
        INSERT INTO nodes_fts(nodes_fts, rowid, search_text)
        VALUES ('delete', old.pk, old.search_text);
        INSERT INTO nodes_fts(rowid, search_text) VALUES (new.pk, new.search_text);
    END""",
    "INSERT INTO nodes_fts(nodes_fts) VALUES ('rebuild')",
]
POSTGRES_SEARCH = [
    "CREATE INDEX ix_nodes_search ON nodes USING gin (to_tsvector('simple', search_text))",
]
BLOCKS = """
CREATE VIEW blocks AS
SELECT session_id, node_id, position, kind, text, tool_name, call_id, is_error, input_json,
       output_json
FROM node_blocks
"""
TEXT_AGGREGATE = {
    "sqlite": "group_concat(b.text, char(10))",
    "postgresql": "string_agg(b.text, E'\\n' ORDER BY b.position)",
}
TURNS = """
CREATE VIEW turns AS
SELECT n.session_id, n.id AS node_id, n.parent_id, n.pk AS seq, n.created_at, n.role,
       (SELECT {aggregate} FROM node_blocks AS b
        WHERE b.session_id = n.session_id AND b.node_id = n.id AND b.kind = 'text') AS text
FROM nodes AS n
"""
TOOL_CALLS = """
CREATE VIEW tool_calls AS
SELECT c.session_id, c.node_id AS call_node_id, c.call_id, c.tool_name, c.input_json,
       r.node_id AS result_node_id, r.output_json, r.is_error,
       cn.created_at AS called_at, rn.created_at AS answered_at
FROM node_blocks AS c
JOIN nodes AS cn ON cn.session_id = c.session_id AND cn.id = c.node_id
LEFT JOIN node_blocks AS r
    ON r.session_id = c.session_id AND r.kind = 'tool_result' AND r.call_id = c.call_id
LEFT JOIN nodes AS rn ON rn.session_id = r.session_id AND rn.id = r.node_id
WHERE c.kind = 'tool_call'
"""
SESSION_STATS = """
CREATE VIEW session_stats AS
SELECT s.id AS session_id, s.title, s.head, s.created_at, s.updated_at,
       (SELECT count(*) FROM nodes AS n WHERE n.session_id = s.id) AS nodes,
       (SELECT count(*) FROM nodes AS n WHERE n.session_id = s.id AND n.role = 'user')
           AS user_turns,
       (SELECT count(*) FROM nodes AS n WHERE n.session_id = s.id AND n.role = 'assistant')
           AS assistant_turns,
       (SELECT count(*) FROM nodes AS n WHERE n.session_id = s.id AND NOT EXISTS (
            SELECT 1 FROM nodes AS c WHERE c.session_id = n.session_id AND c.parent_id = n.id
       )) AS branches,
       (SELECT count(*) FROM node_blocks AS b WHERE b.session_id = s.id AND b.kind = 'tool_call')
           AS tool_calls,
       (SELECT count(*) FROM node_blocks AS b WHERE b.session_id = s.id AND b.is_error = 1)
           AS failed_tool_calls,
       (SELECT min(n.created_at) FROM nodes AS n WHERE n.session_id = s.id) AS first_turn_at,
       (SELECT max(n.created_at) FROM nodes AS n WHERE n.session_id = s.id) AS last_turn_at
FROM sessions AS s
"""
VIEWS = ("session_stats", "tool_calls", "turns", "blocks")


def _create_node_blocks() -> None:
    op.create_table(
        "node_blocks",
        sa.Column("session_id", sa.String(length=255), nullable=False),
        sa.Column("node_id", sa.String(length=255), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("tool_name", sa.Text(), nullable=True),
        sa.Column("call_id", sa.Text(), nullable=True),
        sa.Column("is_error", sa.Integer(), nullable=True),
        sa.Column("input_json", sa.Text(), nullable=True),
        sa.Column("output_json", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id", "node_id"],
            ["nodes.session_id", "nodes.id"],
            name=op.f("fk_node_blocks_session_id_node_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "node_id", "position", name=op.f("pk_node_blocks")),
    )
    op.create_index(
        op.f("ix_node_blocks_session_id_call_id"), "node_blocks", ["session_id", "call_id"]
    )


def _backfill() -> None:
    """Derive the new columns and rows for the nodes stored before this revision."""
    bind = op.get_bind()
    nodes = sa.table(
        "nodes",
        sa.column("pk"),
        sa.column("session_id"),
        sa.column("id"),
        sa.column("turn_json"),
        sa.column("search_text"),
    )
    update = nodes.update().where(nodes.c.pk == sa.bindparam("row_pk"))
    query = sa.select(nodes.c.pk, nodes.c.session_id, nodes.c.id, nodes.c.turn_json)
    for batch in bind.execute(query).partitions(1000):
        turns = [(row, jsjson.loads(row.turn_json)) for row in batch]
        bind.execute(
            update.values(search_text=sa.bindparam("text")),
            [{"row_pk": row.pk, "text": search_text(turn)} for row, turn in turns],
        )
        blocks = [b for row, turn in turns for b in block_rows(row.session_id, row.id, turn)]
        if blocks:
            bind.execute(sa.table("node_blocks", *map(sa.column, blocks[0])).insert(), blocks)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.add_column("nodes", sa.Column("search_text", sa.Text(), nullable=False, server_default=""))
    _create_node_blocks()
    _backfill()
    for statement in POSTGRES_SEARCH if dialect == "postgresql" else SQLITE_SEARCH:
        op.execute(statement)
    op.execute(BLOCKS)
    op.execute(TURNS.format(aggregate=TEXT_AGGREGATE[dialect]))
    op.execute(TOOL_CALLS)
    op.execute(SESSION_STATS)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for view in VIEWS:
        op.execute(f"DROP VIEW {view}")
    if dialect == "postgresql":
        op.execute("DROP INDEX ix_nodes_search")
    else:
        for trigger in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER nodes_fts_{trigger}")
        op.execute("DROP TABLE nodes_fts")
    op.drop_table("node_blocks")
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("search_text")
