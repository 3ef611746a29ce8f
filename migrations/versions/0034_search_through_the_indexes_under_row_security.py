"""PostgreSQL search through its full-text indexes for logins that row-level security binds.

PostgreSQL applies a query's conditions that are not leakproof, such as `@@`, after a policy's,
so not through an index: as a login the policies of 0031 bind (every one but a superuser or a
`BYPASSRLS` role) a search read all of its tenant's turns. The search now runs in the function
`memstore_search_matches`, which keeps the tenant's turns (`memstore_tenant()`, so a login bound
by its name keeps its own) that match, before it ranks them, and returns the best `most` keys
with their rank, none of another tenant's. Each call plans its query with the words and the
tenant known (`EXECUTE ... USING`), as the store's own statements are; the planner expects it to
return a search's usual 20 rows (`ROWS 20`), so that the store's statement looks each one up by
its key rather than reading the tenant's turns to join them.

The function runs as its caller, held to the policies like any query, until an operator hands
it to a role with `BYPASSRLS` (`memstore db search-role`, `memstore.store.search_role`): then it
runs as that role (`SECURITY DEFINER`), unbound, so `@@` reads the index, and its own tenant
filter is what keeps the tenant's rows. This revision hands it over itself when the role
`memstore_search` exists, has `BYPASSRLS`, was granted `USAGE` on the schema (an operator's
choice of schemas: a role of the whole server takes no other schema's search), may read no
table of another owner outside the schema (the function runs its schema owner's code as the
role, `OTHER_OWNERS`), and the migrating login may give it the function.
Once handed over, only a member of that role (or a superuser) may replace or drop it: a later
revision that changes it must make a function of another name, and the downgrade refuses,
saying how, unless the downgrading login may drop it; then it also takes back the role's
reading of `nodes` and `sessions`. SQLite: nothing.

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-07
"""

from collections.abc import Sequence

from alembic import op

from memstore.errors import MigrationError

revision: str = "0034"
down_revision: str | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SIGNATURE = "memstore_search_matches(tsquery, tsquery, text[], text, integer)"
ROLE = "memstore_search"

# words: the spaced words' tsquery (NULL: none); chars: the unspaced words' phrases over
# `search_chars_vector` (NULL: a search of spaced words only); oversized: every query word,
# folded as `memstore_search_fold` folds, which a turn longer than the indexes hold
# (250,000 characters, the partial index ix_nodes_search_oversized) must hold to match;
# in_session: one session's turns only (NULL: all); most: how many to return.
FUNCTION = r"""
CREATE FUNCTION memstore_search_matches(
    words tsquery, chars tsquery, oversized text[], in_session text, most integer
) RETURNS TABLE (pk bigint, rank real)
LANGUAGE plpgsql STABLE ROWS 20 AS $function$
DECLARE
    tenant_now text := memstore_tenant();
BEGIN
    IF tenant_now IS NULL THEN
        RETURN;  -- the setting names no tenant: no row, as the policies show none
    END IF;
    IF NOT has_table_privilege(session_user, 'nodes', 'SELECT') THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = 'permission denied for table nodes (login ' || session_user || ')';
    END IF;
    -- The matches first, through the indexes alone (MATERIALIZED: beside the tenant's
    -- condition the planner would read the tenant's part of a key as well), then the
    -- tenant's, which alone are ranked.
    IF chars IS NULL THEN
        RETURN QUERY EXECUTE $query$
            WITH found AS MATERIALIZED (
                SELECT n.pk, n.tenant, n.session_id, n.search_vector
                FROM nodes n
                WHERE n.search_vector @@ $1
                   OR (length(n.search_text) > 250000
                       AND NOT EXISTS (
                           SELECT FROM unnest($3) AS word
                           WHERE strpos(lower(memstore_search_fold(n.search_text)),
                                        lower(word)) = 0)))
            SELECT f.pk, ts_rank(f.search_vector, $1) AS rank
            FROM found f
            WHERE f.tenant = $5
              AND ($4 IS NULL OR f.session_id = $4)
              AND f.session_id NOT IN (
                  SELECT s.id FROM sessions s WHERE s.tenant = $5 AND s.importing IS NOT NULL)
            ORDER BY 2 DESC, 1
            LIMIT $6
        $query$ USING words, chars, oversized, in_session, tenant_now, most;
    ELSE
        RETURN QUERY EXECUTE $query$
            WITH found AS MATERIALIZED (
                SELECT n.pk FROM nodes n
                WHERE n.search_chars_vector IS NOT NULL AND n.search_chars_vector @@ $2
                  AND ($1 IS NULL OR n.search_vector @@ $1)
                UNION
                SELECT n.pk FROM nodes n
                WHERE (length(n.search_text) > 250000 OR length(n.search_chars) > 250000)
                  AND NOT EXISTS (
                      SELECT FROM unnest($3) AS word
                      WHERE strpos(lower(memstore_search_fold(n.search_text)),
                                   lower(word)) = 0))
            SELECT n.pk,
                   CASE WHEN n.search_chars_vector @@ $2
                             AND ($1 IS NULL OR n.search_vector @@ $1)
                        THEN ts_rank(n.search_chars_vector, $2)
                             + coalesce(ts_rank(n.search_vector, $1), 0)
                        ELSE 0 END::real AS rank
            FROM nodes n
            WHERE n.pk IN (SELECT f.pk FROM found f)
              AND n.tenant = $5
              AND ($4 IS NULL OR n.session_id = $4)
              AND n.session_id NOT IN (
                  SELECT s.id FROM sessions s WHERE s.tenant = $5 AND s.importing IS NOT NULL)
            ORDER BY 2 DESC, 1
            LIMIT $6
        $query$ USING words, chars, oversized, in_session, tenant_now, most;
    END IF;
END
$function$
"""

# Whether the role exists, has BYPASSRLS and USAGE on the schema, and the migrating login may
# give it the function (ALTER FUNCTION ... OWNER TO: a superuser, or a member of the role that
# may create in the schema, who must also be able to grant it the tables' reading), and the
# role reads no other owner's tables.
MAY_HAND_OVER = f"""
SELECT r.rolbypassrls AND has_schema_privilege(r.oid, current_schema(), 'USAGE')
AND (me.rolsuper OR (
    pg_has_role(current_user, r.oid, 'MEMBER')
    AND has_schema_privilege(r.oid, current_schema(), 'CREATE')
    AND has_table_privilege(current_user, 'nodes', 'SELECT WITH GRANT OPTION')
    AND has_table_privilege(current_user, 'sessions', 'SELECT WITH GRANT OPTION')))
AND NOT EXISTS ({{other_owners}})
FROM pg_roles me JOIN pg_roles r ON r.rolname = '{ROLE}'
WHERE me.rolname = current_user
"""

# A table outside this schema, of another owner than this schema's `nodes`, that the role `r`
# owns or was granted a privilege on. A search role must serve one owner's schemas only: the
# function runs its schema owner's code as the role (`memstore_tenant()`, `memstore_search_fold`,
# whatever `nodes` is), which could read through it whatever else the role may read.
OTHER_OWNERS = """
SELECT quote_ident(ns.nspname) || '.' || quote_ident(c.relname) AS name,
       pg_get_userbyid(c.relowner) AS owner
FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
WHERE ns.nspname <> current_schema()
  AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND c.relowner <> (SELECT relowner FROM pg_class
                     WHERE oid = (quote_ident(current_schema()) || '.nodes')::regclass)
  AND (c.relowner = r.oid
       OR EXISTS (SELECT FROM aclexplode(c.relacl) AS acl WHERE acl.grantee = r.oid))
"""


def hand_over(role: str, schema: str) -> list[str]:
    """The statements that give the function to `role` (which has BYPASSRLS): it may read the
    two tables the function reads, and the function runs as it, on this schema only."""
    quoted_role, quoted_schema = _quoted(role), _quoted(schema)
    function = f"{quoted_schema}.{SIGNATURE}"
    return [
        f"GRANT USAGE ON SCHEMA {quoted_schema} TO {quoted_role}",
        f"GRANT SELECT ON {quoted_schema}.nodes, {quoted_schema}.sessions TO {quoted_role}",
        f"ALTER FUNCTION {function} OWNER TO {quoted_role}",
        f"ALTER FUNCTION {function} SECURITY DEFINER SET search_path = {quoted_schema}, pg_temp",
    ]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(FUNCTION)
    connection = op.get_bind()
    if connection.exec_driver_sql(MAY_HAND_OVER.format(other_owners=OTHER_OWNERS)).scalar():
        schema = connection.exec_driver_sql("SELECT current_schema()").scalar_one()
        for statement in hand_over(ROLE, schema):
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    owner = op.get_bind().exec_driver_sql(_OWNER).one()
    if not owner.may_drop:
        raise MigrationError(
            f"the search function {SIGNATURE} belongs to the role {owner.name!r} (memstore db "
            "search-role), which this login may not drop: downgrade as a superuser or a member "
            f"of {owner.name!r}, or have one give this login the function first (ALTER "
            f"FUNCTION {SIGNATURE} OWNER TO <this login>)"
        )
    if owner.handed_over:  # the reading hand_over granted it, which only the function used
        op.execute(f"REVOKE SELECT ON nodes, sessions FROM {_quoted(owner.name)}")
    op.execute(f"DROP FUNCTION {SIGNATURE}")


_OWNER = f"""
SELECT owner.rolname AS name, pg_has_role(current_user, owner.oid, 'MEMBER') AS may_drop,
       pg_proc.prosecdef AS handed_over
FROM pg_proc JOIN pg_roles owner ON owner.oid = pg_proc.proowner
WHERE pg_proc.oid = to_regprocedure('{SIGNATURE}')
"""
