"""SQLite stores a turn's text once: in `nodes.turn_json`. The copies go: `nodes.search_text` and
the `text`, `input_json` and `output_json` columns of `node_blocks`, which held the turn's text a
second and a third time (about 2.2 KB of a 4.7 KB turn on disk).

In their place, SQL derives them from `turn_json` when they are read:

- the view `node_search` (pk, session_id, search_text) gives each node's search text (text,
  thinking, tool names, inputs and outputs, one block a line, as `rows.search_text` makes it);
- the full-text index `nodes_fts` is external-content over that view: the store fills it from
  the view, snippets read the view, and the delete and update triggers derive the text they
  remove from the old row's `turn_json` with the same expression, so the index stays consistent
  with itself whatever the JSON holds;
- the views `blocks`, `turns` and `tool_calls` keep their columns, read out of `turn_json` with
  SQLite's JSON functions (a nested value as its JSON text, which for memstore's compact JSON is
  the text `JSON.stringify` gives, as the columns held).

PostgreSQL keeps the columns (its GIN index is an expression over `search_text`, and TOAST
compresses them); it gets the `node_search` view too, reading `nodes.search_text`, so that the
same query works on both. `VACUUM` returns the freed pages to the file system.

Revision ID: 0016
Revises: 0013
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memstore import jsjson
from memstore.store.rows import block_rows, search_text

revision: str = "0016"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _clean(json_text: str) -> str:
    """SQL for JSON text whose NUL escapes read as U+FFFD (SQLite's `->>` would cut the text
    there), as `rows.storable` makes them. First every escaped backslash becomes `\\u005c` (the
    same character), so that each `\\u0000` left is an escape of NUL, not text after a backslash."""
    return f"replace(replace({json_text}, '\\\\', '\\u005c'), '\\u0000', '\\ufffd')"


def _value(block: str, key: str) -> str:
    """A tool input's or output's searchable text: a string as it is, else its JSON."""
    kind = f"json_type({block}, '$.{key}')"
    return (
        f"CASE WHEN {kind} IS NULL THEN 'null' WHEN {kind} = 'text' "
        f"THEN {_clean(block)} ->> '$.{key}' ELSE {block} -> '$.{key}' END"
    )


def _text(block: str) -> str:
    """A text-like block's text, '' when it is not a string."""
    return (
        f"CASE json_type({block}, '$.text') WHEN 'text' THEN {_clean(block)} ->> '$.text' "
        "ELSE '' END"
    )


def search_text_sql(turn_json: str) -> str:
    """SQL for the search text of the turn whose JSON is `turn_json` (`rows.search_text`).

    The blocks are walked by index with a recursive CTE, not with `json_each`: FTS5 reads its
    external content with statements that may not use virtual tables (its `rebuild` and
    `integrity-check` then fail), and `json_each` is one."""
    count = f"json_array_length({turn_json}, '$.blocks')"
    part = f"""CASE b.value ->> '$.kind'
            WHEN 'text' THEN {_text("b.value")}
            WHEN 'thinking' THEN {_text("b.value")}
            WHEN 'tool_call' THEN
                ({_clean("b.value")} ->> '$.name') || ' ' || {_value("b.value", "input")}
            WHEN 'tool_result' THEN {_value("b.value", "output")}
        END"""
    return f"""(WITH RECURSIVE b(i, value) AS (
        SELECT 0, {turn_json} -> '$.blocks[0]' WHERE {count} > 0
        UNION ALL
        SELECT i + 1, {turn_json} -> ('$.blocks[' || (i + 1) || ']') FROM b WHERE i + 1 < {count}
    )
    SELECT coalesce(group_concat(part, char(10)), '') FROM (
        SELECT {part} AS part FROM b ORDER BY i
    ) WHERE part <> '')"""


# PostgreSQL stores the text: the view reads it, so that the same query works on both.
POSTGRES_NODE_SEARCH = "CREATE VIEW node_search AS SELECT pk, session_id, search_text FROM nodes"
NODE_SEARCH = f"""CREATE VIEW node_search AS
SELECT pk, session_id, {search_text_sql("turn_json")} AS search_text FROM nodes"""
_DELETE_OLD = f"""INSERT INTO nodes_fts(nodes_fts, rowid, search_text)
        VALUES ('delete', old.pk, {search_text_sql("old.turn_json")})"""
SEARCH = [
    NODE_SEARCH,
    "CREATE VIRTUAL TABLE nodes_fts USING fts5(search_text, content='node_search', "
    "content_rowid='pk')",
    "INSERT INTO nodes_fts(nodes_fts) VALUES ('rebuild')",
    f"""CREATE TRIGGER nodes_fts_delete AFTER DELETE ON nodes BEGIN
        {_DELETE_OLD};
    END""",
    f"""CREATE TRIGGER nodes_fts_update AFTER UPDATE OF turn_json ON nodes BEGIN
        {_DELETE_OLD};
        INSERT INTO nodes_fts(rowid, search_text)
        VALUES (new.pk, {search_text_sql("new.turn_json")});
    END""",
]
_BLOCK = "n.turn_json -> ('$.blocks[' || b.position || ']')"
BLOCKS = f"""CREATE VIEW blocks AS
SELECT b.session_id, b.node_id, b.position, b.kind,
       CASE WHEN b.kind IN ('text', 'thinking') THEN {_text(_BLOCK)} END AS text,
       b.tool_name, b.call_id, b.is_error,
       CASE WHEN b.kind = 'tool_call' THEN {_BLOCK} -> '$.input' END AS input_json,
       CASE WHEN b.kind = 'tool_result' THEN {_BLOCK} -> '$.output' END AS output_json
FROM node_blocks AS b
JOIN nodes AS n ON n.session_id = b.session_id AND n.id = b.node_id"""
TURNS = f"""CREATE VIEW turns AS
SELECT n.session_id, n.id AS node_id, n.parent_id, n.pk AS seq, n.created_at, n.role,
       (SELECT group_concat({_text("b.value")}, char(10))
        FROM json_each(n.turn_json, '$.blocks') AS b WHERE b.value ->> '$.kind' = 'text') AS text
FROM nodes AS n"""
TOOL_CALLS = """CREATE VIEW tool_calls AS
SELECT c.session_id, c.node_id AS call_node_id, c.call_id, c.tool_name,
       cn.turn_json -> ('$.blocks[' || c.position || '].input') AS input_json,
       r.node_id AS result_node_id,
       rn.turn_json -> ('$.blocks[' || r.position || '].output') AS output_json, r.is_error,
       cn.created_at AS called_at, rn.created_at AS answered_at
FROM node_blocks AS c
JOIN nodes AS cn ON cn.session_id = c.session_id AND cn.id = c.node_id
LEFT JOIN node_blocks AS r
    ON r.session_id = c.session_id AND r.kind = 'tool_result' AND r.call_id = c.call_id
LEFT JOIN nodes AS rn ON rn.session_id = r.session_id AND rn.id = r.node_id
WHERE c.kind = 'tool_call'"""
VIEWS = ("blocks", "turns", "tool_calls")
BLOCK_COPIES = ("text", "input_json", "output_json")
BATCH = 1000

# As revision 0002 made them (the downgrade puts them back).
OLD_SEARCH = [
    "CREATE VIRTUAL TABLE nodes_fts USING fts5(search_text, content='nodes', content_rowid='pk')",
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
OLD_BLOCKS = """CREATE VIEW blocks AS
SELECT session_id, node_id, position, kind, text, tool_name, call_id, is_error, input_json,
       output_json
FROM node_blocks"""
OLD_TURNS = """CREATE VIEW turns AS
SELECT n.session_id, n.id AS node_id, n.parent_id, n.pk AS seq, n.created_at, n.role,
       (SELECT group_concat(b.text, char(10)) FROM node_blocks AS b
        WHERE b.session_id = n.session_id AND b.node_id = n.id AND b.kind = 'text') AS text
FROM nodes AS n"""
OLD_TOOL_CALLS = """CREATE VIEW tool_calls AS
SELECT c.session_id, c.node_id AS call_node_id, c.call_id, c.tool_name, c.input_json,
       r.node_id AS result_node_id, r.output_json, r.is_error,
       cn.created_at AS called_at, rn.created_at AS answered_at
FROM node_blocks AS c
JOIN nodes AS cn ON cn.session_id = c.session_id AND cn.id = c.node_id
LEFT JOIN node_blocks AS r
    ON r.session_id = c.session_id AND r.kind = 'tool_result' AND r.call_id = c.call_id
LEFT JOIN nodes AS rn ON rn.session_id = r.session_id AND rn.id = r.node_id
WHERE c.kind = 'tool_call'"""


def _drop_search_and_views() -> None:
    for trigger in ("delete", "update"):
        op.execute(f"DROP TRIGGER nodes_fts_{trigger}")
    op.execute("DROP TABLE nodes_fts")
    for view in VIEWS:
        op.execute(f"DROP VIEW {view}")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.execute(POSTGRES_NODE_SEARCH)
        return
    _drop_search_and_views()
    op.drop_column("nodes", "search_text")  # SQLite's own DROP COLUMN: no table copy
    for name in BLOCK_COPIES:
        op.drop_column("node_blocks", name)
    for statement in [*SEARCH, BLOCKS, TURNS, TOOL_CALLS]:
        op.execute(statement)


def _backfill() -> None:
    """Derive the copies again from each node's turn, a batch of nodes at a time (in key order,
    from where the last batch ended: no cursor stays open across the updates)."""
    bind = op.get_bind()
    nodes = sa.table(
        "nodes", sa.column("pk"), sa.column("session_id"), sa.column("id"), sa.column("turn_json")
    )
    update_node = sa.text("UPDATE nodes SET search_text = :text WHERE pk = :row_pk")
    update_block = sa.text(
        "UPDATE node_blocks SET text = :text, input_json = :input_json, "
        "output_json = :output_json "
        "WHERE session_id = :session_id AND node_id = :node_id AND position = :position"
    )
    query = sa.select(nodes.c.pk, nodes.c.session_id, nodes.c.id, nodes.c.turn_json)
    last = 0
    while batch := bind.execute(
        query.where(nodes.c.pk > last).order_by(nodes.c.pk).limit(BATCH)
    ).all():
        last = batch[-1].pk
        turns = [(row, jsjson.loads(row.turn_json)) for row in batch]
        bind.execute(
            update_node, [{"row_pk": row.pk, "text": search_text(turn)} for row, turn in turns]
        )
        copies = [b for row, turn in turns for b in block_rows(row.session_id, row.id, turn)]
        if copies:
            bind.execute(update_block, copies)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.execute("DROP VIEW node_search")
        return
    _drop_search_and_views()
    op.execute("DROP VIEW node_search")
    op.add_column("nodes", sa.Column("search_text", sa.Text(), nullable=False, server_default=""))
    for name in BLOCK_COPIES:
        op.add_column("node_blocks", sa.Column(name, sa.Text(), nullable=True))
    _backfill()
    for statement in [*OLD_SEARCH, OLD_BLOCKS, OLD_TURNS, OLD_TOOL_CALLS]:
        op.execute(statement)
