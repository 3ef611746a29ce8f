"""PostgreSQL: `memstore_append` checks everything before it writes anything, without the
subtransaction of 0033's block (issue 33).

0033 ran the function's statements in a block that a refusal (importing, moved, rehash, unknown
parent, conflict) left by an error it caught: a subtransaction per call, refused or not, so that
the session row's upsert and the nodes of a chain before a conflicting one were undone. Now the
function reads first and writes only when it will answer 'ok':

- The session row is read and locked (`FOR NO KEY UPDATE`, the lock 0033's upsert took), not
  upserted: the refusals of a session that exists answer from it. A session that does not exist
  is made (`ON CONFLICT DO NOTHING`) only after every check passed on its head of NULL; when
  another call made it meanwhile, the checks run again on its row.
- The nodes are all checked before the first is inserted. A node whose id an earlier node of
  the same chain has is compared with that node, as 0033 compared it with the row it had just
  inserted.

The answers (outcome, head, importing, ids, detail) are 0033's, refusal by refusal, with nothing
written. Two differences, both in a transaction a caller holds around the call: a refused call
keeps the session's row lock until that transaction ends (0033's was undone with its block), and
a call refused on a session that does not exist does not wait for another transaction making it.
SQLite: nothing. The downgrade puts 0036's function back (0037 kept it).

Revision ID: 0038
Revises: 0037
Create Date: 2026-12-07
"""

from collections.abc import Sequence

from alembic import op

from memstore.store.revision_scripts import revision_module

revision: str = "0038"
down_revision: str | None = "0037"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FROM_0036: str = revision_module("0036").append_function()

DECLARED = (
    "    v_new boolean[] := '{}';\n    v_found record;\n",
    "    v_new boolean[];\n    v_found record;\n    v_parents text[];\n    v_first integer;\n"
    "    v_exists boolean;\n",
)
READ_SESSION = (
    "    BEGIN  -- a block of its own: a refusal undoes what it wrote\n"
    "    INSERT INTO sessions AS s (tenant, id, head, created_at, updated_at)\n"
    "    VALUES (p_tenant, p_session, NULL, p_now, p_now)\n"
    "    ON CONFLICT (tenant, id) DO UPDATE SET head = s.head\n"
    "    RETURNING s.head, s.importing INTO head, importing;\n",
    """    LOOP  -- once, or again when another call made the session meanwhile
    v_new := '{}';
    v_parents := '{}';
    ids := NULL;
    SELECT s.head, s.importing INTO head, importing
    FROM sessions AS s WHERE s.tenant = p_tenant AND s.id = p_session
    FOR NO KEY UPDATE;
    v_exists := FOUND;
""",
)
REFUSED = ("RAISE SQLSTATE 'MSREF';", "RETURN;")
CHECK_NODES = """    FOR i IN 1 .. v_count LOOP
        v_node := p_nodes -> (i - 1);
        v_first := array_position(ids, ids[i]);
        IF v_first < i THEN  -- the row the chain's own earlier node stored
            SELECT CAST(v_parents[v_first] AS varchar) AS parent_id,  -- as the column
                   (p_nodes -> (v_first - 1) ->> 'created_at')::bigint AS created_at,
                   p_nodes -> (v_first - 1) ->> 'turn_json' AS turn_json INTO v_found;
        ELSE
            SELECT n.parent_id, n.created_at, n.turn_json INTO v_found
            FROM nodes AS n
            WHERE n.tenant = p_tenant AND n.session_id = p_session AND n.id = ids[i];
        END IF;
        IF FOUND THEN
{compared}            v_new := v_new || false;
        ELSE
            v_new := v_new || true;
        END IF;
        v_parents := v_parents || v_parent;
        v_parent := ids[i];
    END LOOP;
    EXIT WHEN v_exists;
    INSERT INTO sessions (tenant, id, head, created_at, updated_at)
    VALUES (p_tenant, p_session, NULL, p_now, p_now)
    ON CONFLICT (tenant, id) DO NOTHING;
    EXIT WHEN FOUND;
    END LOOP;
    FOR i IN 1 .. v_count LOOP
        CONTINUE WHEN NOT v_new[i];
        v_node := p_nodes -> (i - 1);
{inserted}    END LOOP;
"""
CAUGHT: str = revision_module("0033").CAUGHT
ENDED = ("    outcome := 'ok';\nEND\n$$", CAUGHT)


def _between(text: str, first: str, last: str) -> str:
    """The part of `text` from the line that starts with `first` to the line that starts with
    `last`, both included."""
    begin = text.index(first)
    end = text.index("\n", text.index(last, begin)) + 1
    return text[begin:end]


def function() -> str:
    """0036's `memstore_append` (which 0037 kept), replacing it: the session read and locked
    rather than upserted, every node checked before the first is written, and a refusal a
    return, without the block whose error undid a refused call's writes."""
    made = _FROM_0036
    for old, new in (DECLARED, READ_SESSION, ENDED[::-1], REFUSED):
        if old not in made:  # pragma: no cover - revision 0036's text never changes
            raise AssertionError(f"memstore_append of revision 0036 lacks {old!r}")
        made = made.replace(old, new)
    loop = _between(
        made,
        "    FOR i IN 1 .. v_count LOOP\n        v_node := p_nodes -> (i - 1);\n"
        "        SELECT n.parent_id",
        "    END LOOP;",
    )
    compared = _between(loop, "            IF v_found.parent_id", "            END IF;")
    inserted = _between(
        loop,
        "            INSERT INTO nodes",
        "                    to_tsvector('simple', v_node ->> 'search_chars_vector'",
    )
    inserted = inserted.replace("v_parent,", "v_parents[i],", 1)
    return made.replace(loop, CHECK_NODES.format(compared=compared, inserted=inserted))


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(function())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(revision_module("0036").append_function())
