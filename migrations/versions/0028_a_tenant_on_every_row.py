"""A tenant on every row: the column `tenant` (NOT NULL, default '', the default tenant) on every
table memstore owns, the first step towards stores scoped to a tenant (issue 31): every row
says whose it is. Existing rows, and the rows of a store opened without a tenant, are the
default tenant's. `memstore_append` (migration 0025) takes the tenant as its first argument and
writes it.

Adding a column with a constant default rewrites no table, on either database. The downgrade
drops the column again; it refuses while any row belongs to another tenant than the default one,
rather than merge tenants' rows or lose them.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memstore.errors import MigrationError
from memstore.store.revision_scripts import revision_module

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# `memstore_append` of migration 0025, given the tenant its rows are written with (it looks rows
# up by the keys it had: the tenant joins the keys in a later revision).
FUNCTION = r"""
CREATE FUNCTION memstore_append(
    p_tenant text, p_session text, p_now bigint, p_check boolean, p_expected text, p_ids text[],
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
    INSERT INTO sessions AS s (tenant, id, head, created_at, updated_at)
    VALUES (p_tenant, p_session, NULL, p_now, p_now)
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
            INSERT INTO nodes (tenant, session_id, id, parent_id, role, created_at, turn_json,
                               search_text, search_chars, search_vector, search_chars_vector)
            VALUES (p_tenant, p_session, ids[i], v_parent, v_node ->> 'role',
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
        'tenant', p_tenant, 'session_id', p_session, 'node_id', ids[(b.row ->> 'n')::integer]))).*
    FROM jsonb_array_elements(p_blocks) AS b(row)
    WHERE v_new[(b.row ->> 'n')::integer];
    FOR i IN 1 .. v_count LOOP
        INSERT INTO records (tenant, session_id, kind, node_id, raw)
        VALUES (p_tenant, p_session, 'append', ids[i], NULL);
        IF p_usage[i] IS NOT NULL THEN
            INSERT INTO records (tenant, session_id, kind, node_id, raw)
            VALUES (p_tenant, p_session, 'other', NULL,
                    '{"type":"usage","node":' || to_json(ids[i])::text || p_usage[i]);
        END IF;
    END LOOP;
    UPDATE sessions SET head = ids[v_count], updated_at = p_now WHERE id = p_session;
    outcome := 'ok';
END
$$
"""
OLD_DROP = (
    "DROP FUNCTION memstore_append(text, bigint, boolean, text, text[], text, jsonb, jsonb, text[])"
)
DROP = (
    "DROP FUNCTION memstore_append("
    "text, text, bigint, boolean, text, text[], text, jsonb, jsonb, text[])"
)
TABLES = (
    "sessions",
    "expiry_defaults",
    "session_tags",
    "nodes",
    "node_blocks",
    "records",
    "node_usage",
    "node_keys",
    "erasures",
)


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("tenant", sa.String(64), nullable=False, server_default=""))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(OLD_DROP)
        op.execute(FUNCTION)


def refuse_other_tenants(revision: str = "0028") -> None:
    """Raise MigrationError naming a table that holds rows of a tenant other than the default:
    below `revision`, tenants cannot be told apart."""
    bind = op.get_bind()
    for table in TABLES:
        found = bind.execute(sa.text(f"SELECT tenant FROM {table} WHERE tenant <> '' LIMIT 1"))
        row = found.first()
        if row is not None:
            raise MigrationError(
                f"cannot downgrade below revision {revision}: table {table} holds rows of tenant "
                f"{row[0]!r}, and older revisions have no tenants; export each tenant's sessions "
                "with a store opened for each tenant, and erase them first"
            )


def downgrade() -> None:
    refuse_other_tenants()
    if op.get_bind().dialect.name == "postgresql":
        op.execute(DROP)
        op.execute(revision_module("0025").FUNCTION)
    for table in reversed(TABLES):
        op.drop_column(table, "tenant")
