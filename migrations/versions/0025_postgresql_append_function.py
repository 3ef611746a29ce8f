"""PostgreSQL appends in one round trip: the function `memstore_append`, which does what an
append's statements did one by one (create and lock the session row, compare its head, hash
the chain's node ids from the head, check the parent and each stored node's content, insert the
new nodes, their blocks and the log records, and move the head). The store calls it
(`memstore.store.plans.one_call`); an outcome other than 'ok' leaves nothing written, and the
store maps it to its error in one place. SQLite is unchanged: its statements run in-process.

Node ids are `hash_node`'s: sha256 of `{"parent":<parent>,"turn":<turn>,"createdAt":<time>}`,
first 32 hex digits. The function hashes only a parent that JSON writes as it is (no `"`, `\\`
or control characters: every id memstore makes); for any other it answers 'rehash' and the
store sends the ids it hashed itself.

The function runs with `plan_cache_mode = auto`, not the connection's `force_custom_plan`: its
statements (and the foreign key checks they fire) keep generic plans across calls instead of
planning each of its ten statements afresh (1.45 ms a call -> 0.9 ms). Every row it reads is
looked up by a key, so it also runs with `enable_seqscan = off`: a generic plan made while the
tables were small and analyzed would otherwise read them whole, for the life of the connection.
`tests/test_postgres_plans.py` checks the plans run, the foreign key checks' included.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# p_ids: the chain's ids when the store knows them (NULL: hash them from the head, which is then
# the first node's parent; else p_parent is). p_nodes: one object per node, in chain order:
# turn_json, role, created_at (a number) and created_json (its JSON text, for the hash),
# search_text, search_chars and the two folded texts of the vectors (NULL when empty).
# p_blocks: the `node_blocks` rows of every node, each with `n`, its node's index (from 1).
# p_usage: per node, NULL or the usage line after the node's id (the store writes the id's JSON
# text before it: `{"type":"usage","node":<id>` then this).
FUNCTION = r"""
CREATE FUNCTION memstore_append(
    p_session text, p_now bigint, p_check boolean, p_expected text, p_ids text[],
    p_parent text, p_nodes jsonb, p_blocks jsonb, p_usage text[],
    OUT outcome text, OUT head text, OUT importing text, OUT ids text[], OUT detail text
) LANGUAGE plpgsql SET plan_cache_mode = auto SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_count integer := jsonb_array_length(p_nodes);
    v_parent text;
    v_node jsonb;
    v_new boolean[] := '{}';
    v_found record;
BEGIN
    INSERT INTO sessions AS s (id, head, created_at, updated_at)
    VALUES (p_session, NULL, p_now, p_now)
    ON CONFLICT (id) DO UPDATE SET head = s.head
    RETURNING s.head, s.importing INTO head, importing;
    IF importing IS NOT NULL THEN
        outcome := 'importing';
        RETURN;
    END IF;
    IF p_check AND head IS DISTINCT FROM p_expected THEN
        outcome := 'moved';
        RETURN;
    END IF;
    v_parent := CASE WHEN p_ids IS NULL THEN head ELSE p_parent END;
    IF p_ids IS NULL THEN
        IF v_parent ~ '["\\\x01-\x1f]' THEN
            outcome := 'rehash';
            RETURN;
        END IF;
        ids := '{}';
        FOR i IN 1 .. v_count LOOP
            v_node := p_nodes -> (i - 1);
            ids := ids || left(encode(sha256(convert_to(
                '{"parent":' || coalesce('"' || coalesce(ids[i - 1], v_parent) || '"', 'null')
                || ',"turn":' || (v_node ->> 'turn_json')
                || ',"createdAt":' || (v_node ->> 'created_json') || '}', 'UTF8')), 'hex'), 32);
        END LOOP;
    ELSE
        ids := p_ids;
    END IF;
    IF v_parent IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM nodes AS n WHERE n.session_id = p_session AND n.id = v_parent
    ) THEN
        outcome := 'unknown_parent';
        detail := v_parent;
        RETURN;
    END IF;
    FOR i IN 1 .. v_count LOOP
        v_node := p_nodes -> (i - 1);
        SELECT n.parent_id, n.created_at, n.turn_json INTO v_found
        FROM nodes AS n WHERE n.session_id = p_session AND n.id = ids[i];
        IF FOUND THEN
            IF v_found.parent_id IS DISTINCT FROM v_parent
               OR v_found.created_at <> (v_node ->> 'created_at')::bigint
               OR v_found.turn_json <> (v_node ->> 'turn_json') THEN
                outcome := 'conflict';
                detail := ids[i];
                RETURN;
            END IF;
            v_new := v_new || false;
        ELSE
            INSERT INTO nodes (session_id, id, parent_id, role, created_at, turn_json,
                               search_text, search_chars, search_vector, search_chars_vector)
            VALUES (p_session, ids[i], v_parent, v_node ->> 'role',
                    (v_node ->> 'created_at')::bigint, v_node ->> 'turn_json',
                    v_node ->> 'search_text', v_node ->> 'search_chars',
                    to_tsvector('simple', v_node ->> 'search_vector'),
                    to_tsvector('simple', v_node ->> 'search_chars_vector'));
            v_new := v_new || true;
        END IF;
        v_parent := ids[i];
    END LOOP;
    INSERT INTO node_blocks
    SELECT (jsonb_populate_record(NULL::node_blocks, b.row || jsonb_build_object(
        'session_id', p_session, 'node_id', ids[(b.row ->> 'n')::integer]))).*
    FROM jsonb_array_elements(p_blocks) AS b(row)
    WHERE v_new[(b.row ->> 'n')::integer];
    FOR i IN 1 .. v_count LOOP
        INSERT INTO records (session_id, kind, node_id, raw)
        VALUES (p_session, 'append', ids[i], NULL);
        IF p_usage[i] IS NOT NULL THEN
            INSERT INTO records (session_id, kind, node_id, raw)
            VALUES (p_session, 'other', NULL,
                    '{"type":"usage","node":' || to_json(ids[i])::text || p_usage[i]);
        END IF;
    END LOOP;
    UPDATE sessions SET head = ids[v_count], updated_at = p_now WHERE id = p_session;
    outcome := 'ok';
END
$$
"""
DROP = (
    "DROP FUNCTION memstore_append(text, bigint, boolean, text, text[], text, jsonb, jsonb, text[])"
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(DROP)
