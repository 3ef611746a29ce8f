"""PostgreSQL derives a block's text, tool input and tool output from `nodes.turn_json`: the
copies in `node_blocks` (`text`, `input_json`, `output_json`) go (issue 33; about 600 bytes a
turn of the peer harness's workload), as they went on SQLite in 0016.

`node_blocks` keeps what is looked up: the key, kind, tool name, call id and error flag. The
views `blocks`, `turns` and `tool_calls` (their `_all` forms) read the rest out of the turn with
three SQL functions, as the columns held them (`rows.block_rows`):

- `memstore_block_text(turn_json, position)`: a text or thinking block's text ('' when it is not
  a string), NUL and lone surrogates as U+FFFD;
- `memstore_block_json(turn_json, position, key)`: the JSON text of the block's `input` or
  `output` (NULL without one), as `JSON.stringify` wrote it in the turn;
- `memstore_turn_text(turn_json)`: the turn's text blocks, one a line (NULL without any).

They read the turn as 0036's `memstore_search_text` does (`json`, whose `->` keeps a nested
value's text; an escape of NUL or a lone surrogate, which PostgreSQL's parser refuses, read as
U+FFFD in strings and kept as written in JSON text). The views are replaced (CREATE OR REPLACE:
their grants stay; their options, `security_invoker`, are set again, see 0036's
`replace_view`). `memstore_append` inserts a block's row by the table's row type: it needs no
change. The downgrade puts the columns back, filled by the same functions (every tenant's rows:
`FORCE` is lifted for the statement). SQLite: nothing.

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-07
"""

from collections.abc import Sequence

from alembic import op

from memstore.store.revision_scripts import revision_module

revision: str = "0037"
down_revision: str | None = "0036"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_derived = revision_module("0036")
_SHOWN: str = _derived.SHOWN  # the turn as strings read
_KEPT: str = _derived.KEPT  # the turn as JSON text keeps it
_RESTORED = r"regexp_replace(({value})::text, '(?<!\\)((?:\\\\)*)\\u005cu', '\1\\u', 'g')"
_STRING = "CASE WHEN json_typeof({block} -> 'text') = 'string' THEN {block} ->> 'text' ELSE '' END"

BLOCK_TEXT = f"""
CREATE FUNCTION memstore_block_text(turn_json text, block integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $function$
SELECT {_STRING.format(block=f"(({_SHOWN})::json -> 'blocks' -> block)")}
$function$
"""
BLOCK_JSON = f"""
CREATE FUNCTION memstore_block_json(turn_json text, block integer, key text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $function$
SELECT {_RESTORED.format(value=f"({_KEPT})::json -> 'blocks' -> block -> key")}
$function$
"""
TURN_TEXT = f"""
CREATE FUNCTION memstore_turn_text(turn_json text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $function$
SELECT string_agg({_STRING.format(block="b.shown")}, E'\\n' ORDER BY b.position)
FROM json_array_elements(({_SHOWN})::json -> 'blocks') WITH ORDINALITY AS b (shown, position)
WHERE b.shown ->> 'kind' = 'text'
$function$
"""
FUNCTIONS = {
    "memstore_block_text(text, integer)": BLOCK_TEXT,
    "memstore_block_json(text, integer, text)": BLOCK_JSON,
    "memstore_turn_text(text)": TURN_TEXT,
}

BLOCKS_ALL = """CREATE OR REPLACE VIEW blocks_all AS
SELECT b.tenant, b.session_id, b.node_id, b.position, b.kind,
       CASE WHEN b.kind IN ('text', 'thinking') THEN memstore_block_text(n.turn_json, b.position)
       END AS text,
       b.tool_name, b.call_id, b.is_error,
       CASE WHEN b.kind = 'tool_call' THEN memstore_block_json(n.turn_json, b.position, 'input')
       END AS input_json,
       CASE WHEN b.kind = 'tool_result'
            THEN memstore_block_json(n.turn_json, b.position, 'output') END AS output_json
FROM node_blocks AS b
JOIN nodes AS n ON n.tenant = b.tenant AND n.session_id = b.session_id AND n.id = b.node_id"""
TURNS_ALL = """CREATE OR REPLACE VIEW turns_all AS
SELECT n.tenant, n.session_id, n.id AS node_id, n.parent_id, n.pk AS seq, n.created_at, n.role,
       memstore_turn_text(n.turn_json) AS text
FROM nodes AS n"""
TOOL_CALLS_ALL = """CREATE OR REPLACE VIEW tool_calls_all AS
SELECT c.tenant, c.session_id, c.node_id AS call_node_id, c.call_id, c.tool_name,
       memstore_block_json(cn.turn_json, c.position, 'input') AS input_json,
       r.node_id AS result_node_id,
       memstore_block_json(rn.turn_json, r.position, 'output') AS output_json, r.is_error,
       cn.created_at AS called_at, rn.created_at AS answered_at
FROM node_blocks AS c
JOIN nodes AS cn
    ON cn.tenant = coalesce(c.tenant, '') AND cn.session_id = c.session_id AND cn.id = c.node_id
LEFT JOIN node_blocks AS r
    ON r.tenant = c.tenant AND r.session_id = c.session_id AND r.kind = 'tool_result'
    AND r.call_id = c.call_id
LEFT JOIN nodes AS rn
    ON rn.tenant = coalesce(r.tenant, '') AND rn.session_id = r.session_id AND rn.id = r.node_id
WHERE c.kind = 'tool_call'"""
VIEWS = {"blocks_all": BLOCKS_ALL, "turns_all": TURNS_ALL, "tool_calls_all": TOOL_CALLS_ALL}
COPIES = ("text", "input_json", "output_json")
REFILL = """UPDATE node_blocks AS b SET
    text = CASE WHEN b.kind IN ('text', 'thinking')
                THEN memstore_block_text(n.turn_json, b.position) END,
    input_json = CASE WHEN b.kind = 'tool_call'
                      THEN memstore_block_json(n.turn_json, b.position, 'input') END,
    output_json = CASE WHEN b.kind = 'tool_result'
                       THEN memstore_block_json(n.turn_json, b.position, 'output') END
FROM nodes AS n
WHERE n.tenant = b.tenant AND n.session_id = b.session_id AND n.id = b.node_id"""


def _old_views() -> dict[str, str]:
    """The three views as 0030 made them, as CREATE OR REPLACE."""
    made: list[str] = revision_module("0030")._views("postgresql", tenant=True)
    old = {}
    for name in VIEWS:
        (view,) = [view for view in made if f"CREATE VIEW {name} AS" in view]
        old[name] = view.replace("CREATE VIEW", "CREATE OR REPLACE VIEW", 1)
    return old


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for function in FUNCTIONS.values():
        op.execute(function)
    for name, view in VIEWS.items():
        _derived.replace_view(name, view)
    for column in COPIES:
        op.drop_column("node_blocks", column)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for column in COPIES:
        op.execute(f"ALTER TABLE node_blocks ADD COLUMN {column} text")
    op.execute("ALTER TABLE node_blocks NO FORCE ROW LEVEL SECURITY")  # every tenant's rows
    op.execute(REFILL)
    op.execute("ALTER TABLE node_blocks FORCE ROW LEVEL SECURITY")
    for name, view in _old_views().items():
        _derived.replace_view(name, view)
    for signature in FUNCTIONS:
        op.execute(f"DROP FUNCTION {signature}")
