"""PostgreSQL derives a turn's search text from `nodes.turn_json`: `nodes.search_text` goes
(issue 33; about 650 bytes a turn of the peer harness's workload), as it went on SQLite in 0016.

The search vectors are folded in Python from the text as a node is written (migrations 0022,
0024) and stay; the text itself was read back only for snippets, for the `node_search` view and
for the turns longer than the vectors hold. Those now derive it with the SQL function
`memstore_search_text(turn_json)` (IMMUTABLE), which gives what `rows.search_text` gives: text
and thinking, `name input` of a tool call, a tool result's output (a string as it is, any other
value as its JSON text), one block a line, NUL and lone surrogates as U+FFFD.

It reads the turn as `json` (not `jsonb`), whose `->` gives a nested value's own text: for
memstore's compact JSON, the text `JSON.stringify` gives, as the column held. PostgreSQL's JSON
parser refuses an escape of NUL or of a lone surrogate anywhere in the text, so the function
reads two versions of a turn that holds one: one where each such escape is `\\ufffd` (strings,
read with `->>`, show U+FFFD as `rows.storable` makes them) and one where it is spelled
`\\u005cuXXXX` (an escaped backslash, then `uXXXX`), put back after `->` (JSON text, unchanged).

- `node_search` reads the function (CREATE OR REPLACE, which keeps its grants; its options,
  `security_invoker`, which CREATE OR REPLACE would reset, are set again);
- the partial index `ix_nodes_search_oversized` lists the turns whose JSON is longer than the
  vectors hold (a turn's search text is always shorter than its JSON), and the search checks
  the derived text of those alone;
- the search runs in a new function, `memstore_search_keys`, of 0034's arguments and answer:
  0034's may belong to the search role (`memstore db search-role`), which only its members may
  replace. It goes to the role 0034's went to (`memstore db search-role` or 0034 handed it over)
  and 0034's is dropped, when this login may (a superuser, a member of that role); else 0034's
  stays with its role and the new one runs as its caller until an operator hands it over;
- `memstore_append` no longer writes the column.

The downgrade puts the column back, filled by the same function (every tenant's rows: `FORCE`
is lifted for the statement), and 0034's function when it was dropped. SQLite: nothing.

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-07
"""

from collections.abc import Sequence
from typing import Any

from alembic import op

from memstore.errors import MigrationError
from memstore.store.revision_scripts import revision_module

revision: str = "0036"
down_revision: str | None = "0035"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# An escape of NUL or of a surrogate (canonical JSON writes a surrogate escaped only when it is
# lone), preceded by an even number of backslashes: an escape, not text after an escaped `\`.
_ESCAPE = r"(?<!\\)((?:\\\\)*)\\u(0000|[dD][89a-fA-F][0-9a-fA-F]{2})"


def _readable(replacement: str) -> str:
    """SQL for `turn_json` with each escape PostgreSQL's JSON parser refuses (NUL, a lone
    surrogate) replaced by `replacement` (a regexp_replace replacement: `\\2` is the escape's
    four hex digits). Written out where it is used, not a function of its own: a SQL function's
    body names no other of memstore's functions, which `pg_dump`'s restore could not find."""
    return (
        f"CASE WHEN strpos(turn_json, '\\u') = 0 THEN turn_json "
        f"ELSE regexp_replace(turn_json, '{_ESCAPE}', '\\1{replacement}', 'g') END"
    )


_VALUE = r"""CASE WHEN shown -> '{key}' IS NULL THEN 'null'
             WHEN json_typeof(shown -> '{key}') = 'string' THEN shown ->> '{key}'
             ELSE regexp_replace((kept -> '{key}')::text, '(?<!\\)((?:\\\\)*)\\u005cu', '\1\\u',
                                 'g') END"""
SHOWN = _readable(r"\\ufffd")  # strings read show U+FFFD
KEPT = _readable(r"\\u005cu\2")  # put back in the JSON text of other values
_TEXT = "CASE WHEN json_typeof(shown -> 'text') = 'string' THEN shown ->> 'text' END"
SEARCH_TEXT = rf"""
CREATE FUNCTION memstore_search_text(turn_json text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $function$
SELECT coalesce(string_agg(part, E'\n' ORDER BY position), '')
FROM (
    SELECT position, CASE shown ->> 'kind'
        WHEN 'text' THEN {_TEXT}
        WHEN 'thinking' THEN {_TEXT}
        WHEN 'tool_call' THEN (shown ->> 'name') || ' ' || {_VALUE.format(key="input")}
        WHEN 'tool_result' THEN {_VALUE.format(key="output")}
    END AS part
    FROM ROWS FROM (
        json_array_elements(({SHOWN})::json -> 'blocks'),
        json_array_elements(({KEPT})::json -> 'blocks')
    ) WITH ORDINALITY AS b (shown, kept, position)
) AS parts
WHERE part <> ''
$function$
"""
"""The search text of a turn (`rows.search_text`): `shown` is the turn as strings read (NUL and
lone surrogates as U+FFFD), `kept` the same with those escapes spelled out, put back in the JSON
text of a value that is not a string."""

NODE_SEARCH = """CREATE OR REPLACE VIEW node_search AS
SELECT tenant, pk, session_id, memstore_search_text(turn_json) AS search_text FROM nodes"""
OLD_NODE_SEARCH = """CREATE OR REPLACE VIEW node_search AS
SELECT tenant, pk, session_id, search_text FROM nodes"""

OVERSIZED = (
    "CREATE INDEX ix_nodes_search_oversized ON nodes (pk) "
    "WHERE length(turn_json) > 250000 OR length(search_chars) > 250000"
)
OLD_OVERSIZED = (
    "CREATE INDEX ix_nodes_search_oversized ON nodes (pk) "
    "WHERE length(search_text) > 250000 OR length(search_chars) > 250000"
)

SIGNATURE = "memstore_search_keys(tsquery, tsquery, text[], text, integer)"
_MATCHES: str = revision_module("0034").FUNCTION
_OLD_SPELLINGS = (
    # the spaced words' query: a turn longer than the vectors hold, by its derived text
    (
        "OR (length(n.search_text) > 250000",
        "OR (length(n.turn_json) > 250000\n"
        "                       AND length(memstore_search_text(n.turn_json)) > 250000",
    ),
    # the unspaced words' query
    (
        "WHERE (length(n.search_text) > 250000 OR length(n.search_chars) > 250000)",
        "WHERE ((length(n.turn_json) > 250000\n"
        "                        AND length(memstore_search_text(n.turn_json)) > 250000)\n"
        "                       OR length(n.search_chars) > 250000)",
    ),
    (
        "memstore_search_fold(n.search_text)",
        "memstore_search_fold(memstore_search_text(n.turn_json))",
    ),
    ("CREATE FUNCTION memstore_search_matches(", "CREATE FUNCTION memstore_search_keys("),
)


def search_function() -> str:
    """0034's `memstore_search_matches` as `memstore_search_keys`, reading the derived text."""
    function = _MATCHES
    for old, new in _OLD_SPELLINGS:
        if old not in function:  # pragma: no cover - revision 0034's text never changes
            raise AssertionError(f"memstore_search_matches of revision 0034 lacks {old!r}")
        function = function.replace(old, new)
    return function


def hand_over(role: str, schema: str) -> list[str]:
    """The statements that give `memstore_search_keys` to `role` (see 0034's `hand_over`)."""
    old: list[str] = revision_module("0034").hand_over(role, schema)
    return [
        statement.replace("memstore_search_matches(", "memstore_search_keys(") for statement in old
    ]


_APPEND_SPELLINGS = (
    ("search_text, search_chars, search_vector", "search_chars, search_vector"),
    ("v_node ->> 'search_text', v_node ->> 'search_chars'", "v_node ->> 'search_chars'"),
)


def append_function() -> str:
    """0033's `memstore_append`, which no longer writes `nodes.search_text`."""
    function: str = revision_module("0033").function()
    for old, new in _APPEND_SPELLINGS:
        if function.count(old) != 1:  # pragma: no cover - revision 0033's text never changes
            raise AssertionError(f"memstore_append of revision 0033 lacks {old!r}")
        function = function.replace(old, new)
    return function


def upgrade() -> None:
    connection = op.get_bind()
    if connection.dialect.name != "postgresql":
        return
    op.execute(SEARCH_TEXT)
    replace_view("node_search", NODE_SEARCH)
    op.execute("DROP INDEX ix_nodes_search_oversized")
    op.drop_column("nodes", "search_text")
    op.execute(OVERSIZED)
    op.execute(append_function())
    op.execute(search_function())
    old = _owner(revision_module("0034").SIGNATURE)
    if old is None or not old.may_drop:  # left to its role's members; the new one runs as its
        return  # caller until an operator hands it over (memstore db search-role)
    if old.handed_over:  # to the role 0034's went to
        schema = connection.exec_driver_sql("SELECT current_schema()").scalar_one()
        for statement in hand_over(old.name, schema):
            op.execute(statement)
    op.execute(f"DROP FUNCTION {revision_module('0034').SIGNATURE}")


def downgrade() -> None:
    connection = op.get_bind()
    if connection.dialect.name != "postgresql":
        return
    owner = _owner(SIGNATURE)
    if owner is not None and not owner.may_drop:
        raise MigrationError(
            f"the search function {SIGNATURE} belongs to the role {owner.name!r} (memstore db "
            "search-role), which this login may not drop: downgrade as a superuser or a member "
            f"of {owner.name!r}, or have one give this login the function first (ALTER "
            f"FUNCTION {SIGNATURE} OWNER TO <this login>)"
        )
    op.execute(f"DROP FUNCTION IF EXISTS {SIGNATURE}")
    op.execute("ALTER TABLE nodes ADD COLUMN search_text text NOT NULL DEFAULT ''")
    op.execute("ALTER TABLE nodes NO FORCE ROW LEVEL SECURITY")  # every tenant's rows
    op.execute("UPDATE nodes SET search_text = memstore_search_text(turn_json)")
    op.execute("ALTER TABLE nodes FORCE ROW LEVEL SECURITY")
    replace_view("node_search", OLD_NODE_SEARCH)
    op.execute("DROP INDEX ix_nodes_search_oversized")
    op.execute(OLD_OVERSIZED)
    op.execute(revision_module("0033").function())
    if _owner(revision_module("0034").SIGNATURE) is None:  # dropped by the upgrade
        revision_module("0034").upgrade()
    op.execute("DROP FUNCTION memstore_search_text(text)")


def replace_view(name: str, definition: str) -> None:
    """Run `definition`, a CREATE OR REPLACE VIEW of the view `name`, keeping the view's options
    (`security_invoker`, migration 0031), which PostgreSQL replaces with the statement's (none)."""
    options = op.get_bind().exec_driver_sql(_OPTIONS, {"name": name}).scalar()
    op.execute(definition)
    if options:
        op.execute(f"ALTER VIEW {name} SET ({', '.join(options)})")


_OPTIONS = "SELECT reloptions FROM pg_class WHERE oid = to_regclass(%(name)s)"
_OWNER = """
SELECT owner.rolname AS name, pg_has_role(current_user, owner.oid, 'MEMBER') AS may_drop,
       pg_proc.prosecdef AS handed_over
FROM pg_proc JOIN pg_roles owner ON owner.oid = pg_proc.proowner
WHERE pg_proc.oid = to_regprocedure(%(signature)s)
"""


def _owner(signature: str) -> Any:
    """The role owning the function `signature` and whether this login may drop it; None when
    there is no such function."""
    return op.get_bind().exec_driver_sql(_OWNER, {"signature": signature}).one_or_none()
