"""PostgreSQL enforces the tenant: row-level security on every table memstore owns (issue 31).

Each of the nine tables gets row-level security, `FORCE`d so that it binds the tables' owner
too, and one policy, `memstore_tenant`, for every command: a row is visible, and may be written,
only when its `tenant` is `memstore_tenant()`, the tenant the setting `memstore.tenant` names
(`USING` and `WITH CHECK` alike). memstore sets it for every transaction it runs (see
`memstore.store.row_security`). A superuser, or a role with `BYPASSRLS`, is not bound by any
policy and sees every tenant (an operator's login); any other login sees nothing until the
setting names a tenant.

`memstore.tenant` holds a tenant's name, or `(default)` for the default tenant (whose name is
''): PostgreSQL gives a custom setting that was set once in a session the value '' (not NULL)
after the transaction that set it, and '' must mean "no tenant", never the default one.

The views are made `security_invoker` (PostgreSQL 15), so that a query through a view is held to
the policies as the login that runs it, not as the views' owner (who may be a superuser). Before
PostgreSQL 15 views cannot be: there they are held to the policies as their owner, which binds
them too unless the owner is a superuser or has `BYPASSRLS` (docs/tenants.md).
`memstore_append` runs as its caller already, so its reads and writes are held to them too.

SQLite has no row-level security: this revision does nothing there. The downgrade drops the
policies, the function and the settings of the tables and views; no row changes either way.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-07
"""

from collections.abc import Sequence

from alembic import op

from memstore.store.revision_scripts import revision_module

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES: tuple[str, ...] = revision_module("0028").TABLES
VIEWS: tuple[str, ...] = revision_module("0030").VIEWS_DROPPED
POLICY = "memstore_tenant"

# A SQL function of one expression, STABLE: PostgreSQL inlines it into each policy, where it is
# evaluated once per statement and compared through the indexes (which all lead with `tenant`).
FUNCTION = """
CREATE FUNCTION memstore_tenant() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE current_setting('memstore.tenant', true)
        WHEN '' THEN NULL
        WHEN '(default)' THEN ''
        ELSE current_setting('memstore.tenant', true)
    END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(FUNCTION)
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY {POLICY} ON {table} "
            "USING (tenant = memstore_tenant()) WITH CHECK (tenant = memstore_tenant())"
        )
    for view in _invoker_views():
        op.execute(f"ALTER VIEW {view} SET (security_invoker = true)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for view in _invoker_views():
        op.execute(f"ALTER VIEW {view} RESET (security_invoker)")
    for table in reversed(TABLES):
        op.execute(f"DROP POLICY {POLICY} ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    op.execute("DROP FUNCTION memstore_tenant()")


def _invoker_views() -> tuple[str, ...]:
    """The views to make `security_invoker`: all of them, on PostgreSQL 15 or later."""
    version = op.get_bind().dialect.server_version_info or (0,)
    return VIEWS if version >= (15,) else ()
